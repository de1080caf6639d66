"""What every subcommand shares: one-line errors, never a traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from nlgkit.core.errors import NlgkitError

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on one line to stderr and return the Exit to raise."""
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    return typer.Exit(code)


def handle_errors(command: F) -> F:
    """Turn user errors (NlgkitError, unreadable files, Ctrl-C) into a one-line message and exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except NlgkitError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            raise fail(f"{exc.filename}: {exc.strerror}") from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except BrokenPipeError:
            sys.stderr.close()
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]

"""What every subcommand shares: one-line errors, never a traceback."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from nlgkit.core.errors import NlgkitError

if TYPE_CHECKING:
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])

# Commands whose work is done once their output is written (an atomic file, or stdout): see end_at_once.
ENDS_AT_ONCE = frozenset({"translate", "caption"})

ReportTime = Annotated[bool, typer.Option(help="End with a line on stderr: how many inputs were done in how many "
                                               "seconds (from the loaded model to the last output written), their "
                                               "rate, and the model's loading time")]


@contextmanager
def progress_bar(description: str, show: bool = True,
                 console: Console | None = None) -> Iterator[Callable[[int, int], None]]:
    """A transient rich progress bar on stderr, shown on a terminal only (a log or a pipe gets no bar), and the
    ``(done, total)`` callback that moves it; what is printed to stderr meanwhile appears above it. Standard output
    is left alone (rich would move its lines to stderr, a pipe's too): a command that writes to a terminal's stdout
    while the bar is drawn asks for none."""
    # lazy: CLI start-up
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = console or Console(stderr=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TimeRemainingColumn(), console=console, disable=not (show and console.is_terminal),
                        transient=True, redirect_stdout=False)
    with progress:
        task = progress.add_task(description, total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


def writes_to_terminal(output: Path | None) -> bool:
    """Whether ``output`` (stdout when None) is a terminal: a progress bar drawn beside what it writes would garble
    both. ``/dev/stdout`` is asked through the process's own descriptor; a named terminal, by opening it."""
    # lazy: CLI start-up
    from nlgkit.core.io import own_descriptor

    if output is None:
        return sys.stdout.isatty()
    if (descriptor := own_descriptor(output)) is not None:
        return os.isatty(descriptor)
    if not output.is_char_device():  # (a file or a pipe; /dev/null is a character device, not a terminal)
        return False
    descriptor = os.open(output, os.O_WRONLY | os.O_NOCTTY)
    try:
        return os.isatty(descriptor)
    finally:
        os.close(descriptor)


def writable_output(value: Any) -> Any:
    """The callback of an ``--output FILE`` option: a file that cannot be written is a usage error as the option is
    parsed, before a command of minutes or hours whose write comes last."""
    # lazy: CLI start-up
    from nlgkit.core.errors import DataError
    from nlgkit.core.io import check_output

    try:
        check_output(value)
    except DataError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def time_report(verb: str, count: int, unit: str, seconds: float, loading_seconds: float) -> str:
    """``--report-time``'s line, e.g. "translated 1000 lines in 8.21 s (121.8 lines/s); model loaded in 1.52 s"."""
    rate = f"{count / seconds:.1f}" if seconds > 0 else "–"
    return (f"{verb} {count} {unit} in {seconds:.2f} s ({rate} {unit}/s); model loaded in {loading_seconds:.2f} s")


def end_at_once(code: int, argv: Sequence[str]) -> None:
    """After ``translate`` or ``caption`` ran as a command (``argv`` as typed), end the process now, output
    flushed, instead of returning: the interpreter's teardown of torch and spaCy (module finalisation, garbage
    collection) takes about half a second, a fifth of a one-line translation. Those commands have closed every
    file they write by then. Any other command returns, and so does an in-process call (tests)."""
    words = [word for word in argv if not word.startswith("-")]
    if not words or words[0] not in ENDS_AT_ONCE:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError, ValueError):  # a closed pipe has nothing left to receive
            code = code or 1
    os._exit(code)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on one line to stderr and return the Exit to raise."""
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    return typer.Exit(code)


def handle_errors(command: F) -> F:
    """Turn user errors (NlgkitError, files that cannot be read or written, Ctrl-C) into a one-line message and exit
    code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except NlgkitError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except BrokenPipeError:
            sys.stderr.close()
            raise typer.Exit(1) from None
        except OSError as exc:  # a missing or unreadable file, a full disk, a read-only file system, …
            raise fail(_os_error_message(exc)) from None

    return wrapper  # type: ignore[return-value]


def _os_error_message(exc: OSError) -> str:
    """``FILE: reason``; a folder that could not be made or entered because a file is in the way names that file
    (mkdir's and open's own words are "File exists" or "Not a directory", about the path asked for)."""
    if not (exc.filename and exc.strerror):
        return str(exc)
    named = Path(exc.filename)
    blocked: list[Path] = []  # where a file may stand in the folder's way
    if isinstance(exc, FileExistsError):
        blocked = [named]
    elif isinstance(exc, NotADirectoryError):
        blocked = [named, *named.parents]
    if (blocker := next((path for path in blocked if path.is_file()), None)) is not None:
        return f"{blocker}: a file, where a folder is needed"
    return f"{exc.filename}: {exc.strerror}"

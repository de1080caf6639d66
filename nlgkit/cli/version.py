"""``nlgkit --version``: the options of the ``nlgkit`` command itself, before any subcommand."""

from __future__ import annotations

from typing import Annotated

import typer

from nlgkit.core.version import version_line


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


def root_options(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Print the version (and the git revision when run from a "
                                               "checkout) and exit")] = False,
) -> None:
    """The options of ``nlgkit`` itself (the help text is the app's, in main)."""

"""What every paper reproduction shares: where the recipes are, writing a table, and which runs have trained.

A table command reads run directories (or their committed records), some of which may not have trained yet;
those are listed in the table, not an error, so a partly run reproduction still writes what it has.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from nlgkit.core.errors import NlgkitError
from nlgkit.core.io import atomic_write
from nlgkit.runs.records import best_meta

ROOT = Path(__file__).resolve().parents[2]  # the repository: recipes/, results/ and the Makefile
RECIPES = ROOT / "recipes"


def write_output(text: str, output: str | None) -> str:
    """Write ``text`` to ``output`` when one is given (atomically); returns ``text`` for the caller to print."""
    if output:
        with atomic_write(output) as handle:
            handle.write(text)
    return text


def log(message: str) -> None:
    """Progress and warnings go to stderr, so stdout holds only the table."""
    print(message, file=sys.stderr)


def trained_runs(run_dirs: list[str]) -> tuple[list[str], list[str]]:
    """The run directories with a best checkpoint, and those without one yet."""
    ready, waiting = [], []
    for run_dir in run_dirs:
        try:
            best_meta(Path(run_dir))
            ready.append(run_dir)
        except NlgkitError:
            waiting.append(run_dir)
    return ready, waiting


def research_report(paper: str, build: Callable[[list[Path]], str], run_dirs: list[str], output: str | None) -> str:
    """``build(trained run directories)``'s Markdown, with the runs not trained yet listed (not an error)."""
    ready, waiting = trained_runs(run_dirs)
    text = build([Path(r) for r in ready]) if ready else f"# {paper} on the data present\n"
    if waiting:
        text += "\nNot run yet: " + ", ".join(f"`{Path(run_dir).name}`" for run_dir in waiting) + ".\n"
    return write_output(text, output)

"""``nlgkit average RUN --last N | --best N -o RUN_AVG``: average a run's epoch checkpoints into a new run.

The work is done in :mod:`nlgkit.runs.averaging`; this module parses and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import handle_errors


@handle_errors
def average(
    run: Annotated[Path, typer.Argument(help="Run directory written by `nlgkit train`")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The new run directory (must not exist)")],
    last: Annotated[int, typer.Option(help="Average the N most recent epoch checkpoints")] = 0,
    best: Annotated[int, typer.Option(help="Average the N epoch checkpoints with the best validation score")] = 0,
) -> None:
    """Average a run's kept epoch checkpoints (train.keep_epochs) into a new run directory."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.runs.averaging import average_run

    averaged = average_run(run, output, last=last, best=best)
    epochs = ", ".join(f"{c.epoch}" + (f" ({c.score:.2f})" if c.score is not None else "") for c in averaged.sources)
    typer.echo(f"{averaged.run_dir}: average of epochs {epochs} of {run}")

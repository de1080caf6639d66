"""``nlgkit evaluate``: corpus BLEU, chrF and TER of a hypothesis file against one or more references.

The scoring is a typer callback (``invoke_without_command=True``) rather than a command, so that
``nlgkit evaluate --hyp H --ref R`` works today and sub-commands (``nlgkit evaluate report …``) can be
added later without changing it. Every input problem is one line on stderr naming the file, exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from nlgkit.cli.common import handle_errors
from nlgkit.errors import DataError
from nlgkit.evaluate.metrics import METRICS, corpus_scores
from nlgkit.io import read_lines

app = typer.Typer(
    help="Score hypotheses against references (BLEU, chrF, TER via sacrebleu).",
    add_completion=False,
    pretty_exceptions_enable=False,
)


def read_nonempty(path: Path, role: str) -> list[str]:
    """Strict UTF-8 lines of ``path``; a file without any line is an error, not a score of 0."""
    lines = read_lines(path)
    if not lines:
        raise DataError(f"{path}: {role} file is empty")
    return lines


@app.callback(invoke_without_command=True)
@handle_errors
def evaluate(
    ctx: typer.Context,
    hyp: Annotated[
        Path | None,
        typer.Option("--hyp", metavar="FILE", help="Hypothesis file, one detokenised line per segment"),
    ] = None,
    ref: Annotated[
        list[Path] | None,
        typer.Option(
            "--ref", metavar="FILE", help="Reference file, line-aligned with --hyp; repeat for several"
        ),
    ] = None,
    metrics: Annotated[str, typer.Option(help="Comma-separated metrics: bleu, chrf, ter")] = ",".join(
        METRICS
    ),
    lowercase: Annotated[
        bool, typer.Option("--lowercase", help="Case-insensitive scoring (all metrics)")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table")
    ] = False,
) -> None:
    """Score --hyp against every --ref with sacrebleu and print the scores with their signatures."""
    if ctx.invoked_subcommand is not None:
        return  # a sub-command does its own work
    if hyp is None:
        raise DataError("no hypothesis file given (--hyp)")
    if not ref:
        raise DataError("no reference file given (--ref, repeatable)")
    names = [name.strip().lower() for name in metrics.split(",") if name.strip()]
    hyps = read_nonempty(hyp, "hypothesis")
    refs = []
    for path in ref:
        lines = read_nonempty(path, "reference")
        if len(lines) != len(hyps):
            raise DataError(
                f"{path}: {len(lines)} reference lines but {hyp} has {len(hyps)} hypothesis lines"
            )
        refs.append(lines)
    scores = corpus_scores(hyps, refs, metrics=names, lowercase=lowercase)
    if json_output:
        typer.echo(json.dumps(scores, ensure_ascii=False))
        return
    table = Table(title=f"{hyp} vs {', '.join(str(path) for path in ref)}")
    table.add_column("metric")
    table.add_column("score", justify="right")
    table.add_column("signature", overflow="fold")
    for name, entry in scores.items():
        table.add_row(name, f"{entry['score']:.2f}", entry["signature"])
    Console().print(table)

"""The ``nlgkit`` command: one typer app over the shared core."""

from __future__ import annotations

import typer

from nlgkit.cli import analyze, bpe, evaluate, prepare, report
from nlgkit.cli.train import train
from nlgkit.cli.translate import translate

app = typer.Typer(
    name="nlgkit",
    help="Neural text generation with learned, tied, fixed-random and continuous output layers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(prepare.app, name="prepare", help="Prepare a corpus: tokenise, subword, vocabularies, manifest.")
app.add_typer(bpe.app, name="bpe", help="Learn or apply subword models (subword-nmt BPE, sentencepiece).")
app.command()(train)
app.command()(translate)
analyze.register(evaluate.app)  # nlgkit evaluate norms | wordsim | neighbours | geometry | params
report.register(evaluate.app)  # nlgkit evaluate report RUN_DIR… [--paper TABLE]
app.add_typer(evaluate.app, name="evaluate",
              help="Score outputs (BLEU, chrF, TER, METEOR, captioning metrics) and analyse trained models.")


def main() -> None:
    app(prog_name="nlgkit")

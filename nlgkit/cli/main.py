"""The ``nlgkit`` command: one typer app over the shared core."""

from __future__ import annotations

import signal
import sys

import typer

from nlgkit.cli import analyze, bpe, embed, evaluate, export, prepare, report, reproduce
from nlgkit.cli.average import average
from nlgkit.cli.bench import bench
from nlgkit.cli.caption import caption
from nlgkit.cli.common import Terminated, end_at_once, terminate_as_interrupt
from nlgkit.cli.serve import serve
from nlgkit.cli.train import train
from nlgkit.cli.translate import translate
from nlgkit.cli.version import root_options

app = typer.Typer(
    name="nlgkit",
    help="Neural text generation with learned, tied, fixed-random and continuous output layers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.callback()(root_options)  # nlgkit --version
app.add_typer(prepare.app, name="prepare", help="Prepare a corpus: tokenise, subword, vocabularies, manifest.")
app.add_typer(bpe.app, name="bpe", help="Learn or apply subword models (subword-nmt BPE, sentencepiece).")
app.add_typer(embed.app, name="embed",
              help="Word-vector tables: random, extracted, combined, loaded, trained, debiased; their report.")
app.command()(train)
app.command()(translate)
app.command()(caption)
app.add_typer(export.app, name="export", help="Export a trained run for CTranslate2 (`export ct2`).")
app.command()(average)  # nlgkit average RUN --last N | --best N -o RUN_AVG
analyze.register(evaluate.app)  # nlgkit evaluate norms | wordsim | neighbours | geometry | params
report.register(evaluate.app)  # nlgkit evaluate report RUN_DIR… [--paper TABLE]
app.add_typer(evaluate.app, name="evaluate",
              help="Score outputs (BLEU, chrF, TER, METEOR, captioning metrics) and analyse trained models.")
app.add_typer(reproduce.app, name="reproduce",
              help="Reproduce the papers' tables (Shalev, Tokarchuk, Pappas, Hirasawa) from runs or committed records.")
app.command()(bench)
app.command()(serve)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``nlgkit`` and ``python -m nlgkit``: usage errors too become one ``error:`` line."""
    if argv is None:  # the console command: SIGTERM cleans up as Ctrl-C does (an in-process call keeps its own)
        terminate_as_interrupt()
    try:
        code = app(args=argv, prog_name="nlgkit", standalone_mode=False)
    except typer.Abort as exc:  # Ctrl-C or SIGTERM outside a command's own handling (click's word for it)
        terminated = isinstance(exc.__context__, Terminated)
        typer.echo(f"error: {'terminated' if terminated else 'interrupted'}", err=True)
        code = 128 + signal.SIGTERM if terminated else 130
    except typer.TyperException as exc:  # click's usage errors (typer vendors click)
        ctx = getattr(exc, "ctx", None)
        message = " ".join(exc.format_message().split()) if hasattr(exc, "format_message") else str(exc)
        if not message and ctx is not None:  # no arguments at all: show the help
            typer.echo(ctx.get_help())
            code = 0
        else:
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            typer.echo(f"error: {message}{hint}", err=True)
            code = getattr(exc, "exit_code", 2)
    code = code if isinstance(code, int) else 0
    if argv is None:  # the console command (not a call from Python): translate and caption end at once
        end_at_once(code, sys.argv[1:])
    sys.exit(code)

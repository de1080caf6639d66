"""``nlgkit evaluate``: score a hypothesis file against one or more references, optionally against system B.

Metrics: sacrebleu's BLEU, chrF and TER; METEOR 1.5 (``--lang``); the COCO caption metrics (``caption``:
BLEU-1..4, METEOR, ROUGE-L, CIDEr, and SPICE reported unavailable); vocabulary usage (``vu``), with rare
share and word F1 by training-frequency bin given ``--train-vocab`` or ``--train-words``. ``--compare HYP_B``
adds a paired bootstrap test of B against --hyp (A) for each of bleu/chrf/ter asked for.

The scoring is a typer callback (``invoke_without_command=True``) rather than a command, so that
``nlgkit evaluate --hyp H --ref R`` works today and sub-commands (``nlgkit evaluate report …``) can be
added later without changing it. Every input problem is one line on stderr naming the file, exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nlgkit.cli.common import handle_errors
from nlgkit.core.config import MAX_SEED
from nlgkit.core.errors import DataError
from nlgkit.metrics.names import ALL_METRICS, METRICS

app = typer.Typer(
    help="Score hypotheses against references (BLEU, chrF, TER, METEOR, caption metrics, vocabulary usage).",
    add_completion=False,
    pretty_exceptions_enable=False,
)


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
    metrics: Annotated[
        str, typer.Option(help=f"Comma-separated metrics: {', '.join(ALL_METRICS)}")
    ] = ",".join(METRICS),
    lowercase: Annotated[
        bool, typer.Option("--lowercase", help="Case-insensitive scoring (all metrics)")
    ] = False,
    lang: Annotated[
        str, typer.Option(help="Target language of --hyp, for METEOR (caption metrics are English)")
    ] = "en",
    train_vocab: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Training vocabulary (vocab.{lang}.txt): adds vu with rare share and word F1 by frequency bin",
        ),
    ] = None,
    train_words: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Training word counts (WORD<TAB>COUNT, as a run record's data/train.words.{lang}): the words of a "
                 "subword model, instead of --train-vocab's tokens",
        ),
    ] = None,
    bins: Annotated[
        str | None,
        typer.Option(metavar="EDGES", help="Training-frequency bin edges (default 1,2,3,4,5,10,100,1000)"),
    ] = None,
    compare: Annotated[
        Path | None,
        typer.Option(metavar="HYP_B", help="Second system: paired bootstrap of it against --hyp"),
    ] = None,
    samples: Annotated[int, typer.Option(help="Bootstrap resamples (with --compare)", max=1_000_000)] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap random seed (with --compare)", min=0, max=MAX_SEED)] = 12345,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table")
    ] = False,
) -> None:
    """Score --hyp against every --ref and print the scores with their signatures."""
    if ctx.invoked_subcommand is not None:
        return  # a sub-command does its own work
    if hyp is None:
        raise DataError("no hypothesis file given (--hyp)")
    if not ref:
        raise DataError("no reference file given (--ref, repeatable)")
    from nlgkit.evaluate.scoring import score_files  # lazy: CLI start-up (numpy, significance tests)

    scores = score_files(hyp, ref, metrics, lowercase=lowercase, lang=lang, train_vocab=train_vocab, bins=bins,
                         compare=compare, samples=samples, seed=seed, train_words=train_words)
    if json_output:
        typer.echo(json.dumps(scores, ensure_ascii=False))
        return
    _print_tables(scores, f"{hyp} vs {', '.join(str(path) for path in ref)}", compare)


def _print_tables(scores: dict[str, Any], title: str, compare: Path | None) -> None:
    """Rich tables: scores, then frequency bins (with --train-vocab or --train-words), then the bootstrap (with
    --compare)."""
    console = Console()
    table = Table(title=title)
    for column in ("metric", "score", "signature"):
        table.add_column(column, justify="right" if column == "score" else "left", overflow="fold")
    for name, entry in scores.items():
        if name == "caption":
            for sub, sub_entry in entry["scores"].items():
                table.add_row(*_row(f"caption {sub}", sub_entry))
            table.add_row("caption tokenizer", "", entry["tokenizer"])
        elif name == "vu":
            table.add_row("vu", str(entry["score"]), f"{entry['signature']}|tokens:{entry['tokens']}")
        elif name != "paired_bootstrap":
            table.add_row(*_row(name, entry))
    console.print(table)
    vu = scores.get("vu", {})
    if "rare" in vu:
        bins = Table(title="training-frequency bins (word F1 against the first --ref, as compare-mt)")
        for column in ("bin", "hyp tokens", "share", "types", "precision", "recall", "F1"):
            bins.add_column(column, justify="left" if column == "bin" else "right")
        f1_rows = vu.get("word_f1", [{}] * len(vu["rare"]))
        for rare, f1 in zip(vu["rare"], f1_rows, strict=True):
            cells = [f"{f1[key]:.3f}" if key in f1 else "" for key in ("precision", "recall", "f1")]
            bins.add_row(rare["bin"], str(rare["tokens"]), f"{rare['share']:.3f}", str(rare["types"]), *cells)
        console.print(bins)
    if "paired_bootstrap" in scores:
        test = Table(
            title=f"paired bootstrap: B = {compare} vs A = --hyp (p: share of resamples B not better)"
        )
        for column in ("metric", "A", "B", "B - A", "95% CI", "p"):
            test.add_column(column, justify="left" if column == "metric" else "right")
        for name, result in scores["paired_bootstrap"].items():
            interval = f"[{result['ci_low']:+.2f}, {result['ci_high']:+.2f}]"
            test.add_row(
                name,
                f"{result['score_a']:.2f}",
                f"{result['score_b']:.2f}",
                f"{result['delta']:+.2f}",
                interval,
                f"{result['p_value']:.3f}",
            )
        console.print(test)


def _row(name: str, entry: dict[str, Any]) -> tuple[str, str, str]:
    """(metric, score, signature); an unavailable score shows ``n/a`` and the reason."""
    if entry.get("available", True):
        return name, f"{entry['score']:.2f}", entry.get("signature", "")
    return name, "n/a", f"unavailable: {entry['reason']}"

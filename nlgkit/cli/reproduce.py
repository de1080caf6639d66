"""``nlgkit reproduce …``: the paper tables, their run logs, weightless run records, and a quick look at outputs.

Only parsing and printing live here; the tables are built in :mod:`nlgkit.experiments` (imported inside each
command, so that ``nlgkit --help`` starts without torch). Each table prints nlgkit's figure beside the paper's,
with where it came from; ``--records results/runs`` reads a run whose directory is gone from its committed record.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from nlgkit.cli.common import handle_errors, log_line, writable_output
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import read_lines

app = typer.Typer(
    help="Reproduce the papers' tables from run directories or their committed records.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

Runs = Annotated[list[str], typer.Argument(metavar="RUN_DIR...", help="Run directories (or records)")]
Output = Annotated[str | None, typer.Option(metavar="FILE.md", help="Also write the Markdown here",
                                            callback=writable_output)]
Records = Annotated[
    str | None, typer.Option(metavar="DIR", help="Read a run with no trained directory from its record here")
]


def _runs(runs: list[str], records: str | None) -> list[str]:
    """The run directories, each replaced by its record in ``records`` where the directory is gone."""
    if not records:
        return runs
    from nlgkit.runs.records import with_records  # lazy: CLI start-up

    return with_records(runs, records, log=log_line)


def _print(text: str) -> None:
    sys.stdout.write(text)


def parse_beams(text: str) -> tuple[int, ...]:
    """``--beams 1,2,5`` as beam sizes, each at least 1; anything else is a one-line error."""
    try:
        beams = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ConfigError(f"--beams {text!r}: expected beam sizes separated by commas, e.g. 1,2,5") from None
    if not beams or min(beams) < 1:
        raise ConfigError(f"--beams {text!r}: beam sizes must be at least 1")
    return beams


@app.command("table1")
@handle_errors
def table1(runs: Runs, output: Output = None, records: Records = None,
           dataset: Annotated[str, typer.Option(help="Dataset named in the title")] = "Flickr8k") -> None:
    """Shalev et al.'s Table 1: captioning runs (BLEU, VU, ROUGE-L, METEOR, CIDEr) beside the paper's."""
    from nlgkit.experiments.shalev import table1 as build  # lazy: CLI start-up

    _print(build(_runs(runs, records), output, dataset))


@app.command("table2")
@handle_errors
def table2(runs: Runs, output: Output = None, records: Records = None) -> None:
    """Shalev et al.'s Table 2: BLEU on Multi30K test2016 beside the paper's."""
    from nlgkit.experiments.shalev import table2 as build  # lazy: CLI start-up

    _print(build(_runs(runs, records), output))


@app.command("table3")
@handle_errors
def table3(output: Output = None) -> None:
    """Shalev et al.'s Table 3: trainable parameters of the recipes, checked against the paper's counts."""
    from nlgkit.experiments.shalev import table3 as build  # lazy: CLI start-up

    _print(build(output))


@app.command("table4")
@handle_errors
def table4(runs: Runs, output: Output = None, records: Records = None,
           wordsim_dir: Annotated[str | None, typer.Option(
               help="Word-similarity benchmarks directory (read for runs with weights; default data/wordsim, "
                    "written by `nlgkit prepare wordsim`, else ../shared/data/wordsim)")] = None) -> None:
    """Shalev et al.'s Table 4 (word similarity of target and input vectors) and Fig. 2's norm–frequency ρ.

    A run with weights is analysed and keeps its figures in RUN/vector_analysis.json; a run without is read from it.
    """
    from nlgkit.experiments.shalev import table4 as build  # lazy: CLI start-up

    _print(build(_runs(runs, records), output, wordsim_dir))


@app.command("tokarchuk")
@handle_errors
def tokarchuk(runs: Runs, output: Output = None, records: Records = None,
              beams: Annotated[str, typer.Option(help="Beam sizes of BLEU against beam size")] = "1,2,3,4,5,6,7,8,9,10",
              ) -> None:
    """Tokarchuk & Niculae (2024): their Table 1, Fig. 1 and Fig. 3 from the runs, softmax baseline first."""
    beam_sizes = parse_beams(beams)
    from nlgkit.experiments.tokarchuk import tokarchuk as build  # lazy: CLI start-up

    _print(build(_runs(runs, records), output, beam_sizes))


@app.command("pappas")
@handle_errors
def pappas(runs: Runs, output: Output = None, records: Records = None) -> None:
    """Pappas et al. (2018): their Table 2, ablations and sampling from the runs."""
    from nlgkit.experiments.pappas import pappas as build  # lazy: CLI start-up

    _print(build(_runs(runs, records), output))


@app.command("pappas-speed")
@handle_errors
def pappas_speed(
    recipe: Annotated[str | None, typer.Argument(help="Recipe (default: recipes/pappas_multi30k.toml)")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", metavar="KEY=VALUE", help="Override a setting")] = None,
    vocab: Annotated[int, typer.Option(help="Synthetic vocabulary size (the paper's ≈ 128K)")] = 128_000,
    sentences: Annotated[int, typer.Option(help="Sentence pairs per update")] = 64,
    updates: Annotated[int, typer.Option(help="Timed updates")] = 3,
    warmup: Annotated[int, typer.Option(help="Warm-up updates")] = 1,
    device: Annotated[str, typer.Option(help="cpu, or cuda to measure on a GPU (float32)")] = "cpu",
    output: Output = None,
) -> None:
    """Pappas et al.'s Table 4: training tokens/s by output layer and sampling share."""
    from nlgkit.experiments.common import RECIPES  # lazy: CLI start-up
    from nlgkit.experiments.pappas_speed import pappas_speed as measure  # lazy: CLI start-up

    _print(measure(recipe or str(RECIPES / "pappas_multi30k.toml"), list(overrides or []), vocab, sentences,
                   updates, warmup, output, device))


@app.command("hirasawa")
@handle_errors
def hirasawa(
    runs: Annotated[list[str] | None, typer.Argument(metavar="[RUN_DIR...]",
                                                     help="Trained run directories besides the records")] = None,
    output: Output = None,
    records: Annotated[str, typer.Option(metavar="DIR", help="Every run record here is a row's run")] = (
        "results/runs/hirasawa"),
) -> None:
    """Hirasawa & Komachi (2019): their Tables 3–4 and Fig. 1 (word F-score by frequency, PNG beside --output)."""
    from nlgkit.experiments.hirasawa import hirasawa as build  # lazy: CLI start-up

    _print(build(list(runs or []), records, output))


@app.command("log-summary")
@handle_errors
def log_summary(runs: Runs, output: Output = None, records: Records = None) -> None:
    """Per-epoch validation figures of each run, with where and how it trained (the run logs behind a table)."""
    from nlgkit.experiments.logs import log_summary as build  # lazy: CLI start-up

    _print(build(_runs(runs, records), output))


@app.command("status")
@handle_errors
def status(runs: Runs, output: Output = None, records: Records = None) -> None:
    """Where each run stands against its stopping rule: epochs, best, epochs without a gain, at most how long left;
    with ``--records``, a run trained elsewhere stands as its record says."""
    from nlgkit.experiments.common import write_output  # lazy: CLI start-up
    from nlgkit.experiments.logs import status as build

    _print(write_output(build(_runs(runs, records)), output))


@app.command("archive")
@handle_errors
def archive(runs: Runs,
            into: Annotated[str, typer.Option(metavar="DIR", help="Records directory, e.g. results/runs")],
            replace: Annotated[bool, typer.Option(
                "--replace", help="Let a run stopped early replace the record of a finished run of its name")] = False,
            ) -> None:
    """Write weightless run records (commit them beside the tables)."""
    from nlgkit.runs.records import archive_run  # lazy: CLI start-up

    for run in runs:
        log_line(f"{run}: recorded in {archive_run(Path(run), Path(into), replace_finished=replace)}")


@app.command("show")
@handle_errors
def show(hyp: Annotated[str, typer.Argument(help="Hypotheses, one a line")],
         ref: Annotated[str, typer.Argument(help="References, one a line")],
         source: Annotated[str | None, typer.Option(help="Sources, one a line")] = None,
         n: Annotated[int, typer.Option("-n", help="How many lines")] = 5) -> None:
    """Print the first N hypotheses beside their references (and sources)."""
    if n < 1:
        raise ConfigError(f"-n {n}: must be at least 1")
    hyps, refs = read_lines(hyp), read_lines(ref)
    srcs = read_lines(source) if source else [""] * len(hyps)
    for name, lines in ((ref, refs), (source, srcs)):
        if len(lines) != len(hyps):  # lines side by side that do not belong together
            raise DataError(f"{name}: {len(lines)} lines but {hyp} has {len(hyps)}")
    table = Table(title=f"first {n} test translations", show_lines=True)
    for column in ("source", "nlgkit", "reference"):
        table.add_column(column, overflow="fold")
    for s, h, r in list(zip(srcs, hyps, refs))[:n]:
        table.add_row(s, h, r)
    Console().print(table)

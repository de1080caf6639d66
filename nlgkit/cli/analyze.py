"""``nlgkit evaluate norms|wordsim|neighbours|geometry|params|confidence RUN_DIR``: analyses of a trained model.

Each command loads the run, hands tensors and vocabularies to :mod:`nlgkit.evaluate.analysis`, and prints
a rich table or, with ``--json``, one JSON object. All work is done before a PNG is written, and PNGs are
written atomically, so a failed command leaves no file behind. Vector sets: ``src_input`` (encoder
embedding), ``tgt_input`` (decoder embedding), ``tgt_output`` (the head's target vectors).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nlgkit.cli.common import handle_errors
from nlgkit.core.errors import DataError, NlgkitError
from nlgkit.data.wordsim import BENCHMARKS, default_dir

if TYPE_CHECKING:  # the analyses import torch, scipy and matplotlib: only when a command runs
    from nlgkit.evaluate.analysis.vectors import VectorSet
    from nlgkit.runs import loading as runs

RunDir = Annotated[Path, typer.Argument(help="Run directory written by `nlgkit train`", show_default=False)]
Checkpoint = Annotated[str, typer.Option(help="best, last, or a checkpoint directory")]
Device = Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N")]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables")]
Png = Annotated[Path | None, typer.Option("--png", metavar="FILE", help="Also write a PNG figure")]
Vectors = Annotated[list[str] | None, typer.Option(
    "--vectors", metavar="SET",
    help="Vector set, repeatable: src_input, tgt_input, tgt_output (default: per command)")]


def _load_sets(run_dir: Path, checkpoint: str, device: str, names: list[str] | None,
               default: list[str] | None) -> tuple[runs.TrainedRun, list[VectorSet]]:
    """Load the run and pick vector sets: ``names``, else ``default`` where available, else all."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.evaluate.analysis.vectors import select_sets, vector_sets
    from nlgkit.runs import loading as runs

    run = runs.load_trained(run_dir, checkpoint, device)
    available = vector_sets(run.model, run.source_vocab, run.tgt_vocab)
    if not names:
        names = [name for name in (default or available) if name in available]
    if not names:
        wanted = ", ".join(default or [])
        raise NlgkitError(f"{run.checkpoint}: the model has none of the vector sets {wanted}")
    return run, select_sets(available, names)


def _emit(payload: dict[str, Any], json_output: bool, tables: list[Table]) -> None:
    if json_output:
        typer.echo(json.dumps(payload, ensure_ascii=False, allow_nan=False))
        return
    console = Console()
    console.print(f"checkpoint: {payload['checkpoint']}  (head: {payload['head']})", highlight=False,
                  soft_wrap=True)
    for table in tables:
        console.print(table)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{round(value, digits) + 0.0:.{digits}f}"  # + 0.0: no "-0.000"


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title)
    for position, column in enumerate(columns):
        table.add_column(column, justify="left" if position == 0 else "right")
    return table


def _header(run: runs.TrainedRun) -> dict[str, Any]:
    return {"checkpoint": str(run.checkpoint), "head": getattr(run.config.head, "type", None)}


@handle_errors
def norms_command(run_dir: RunDir, checkpoint: Checkpoint = "best", device: Device = "auto",
                  vectors: Vectors = None, png: Png = None, json_output: JsonFlag = False) -> None:
    """Spearman ρ between vector L2 norm and training frequency (Shalev et al. Fig. 2); default: all sets."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.figures import save_png
    from nlgkit.core.io import check_output
    from nlgkit.data.word_counts import check_side_counts
    from nlgkit.evaluate.analysis import norms
    from nlgkit.runs.files import models_as_inputs

    if png is not None:
        check_output(png, models_as_inputs([run_dir], "RUN_DIR"))
    run, sets = _load_sets(run_dir, checkpoint, device, vectors, None)
    check_side_counts(run.assets)  # each set is ranked by its own language's counts
    results = {entry.name: norms.norm_frequency(entry.matrix, entry.vocab) for entry in sets}
    if png is not None:
        save_png(norms.norm_figure(results), png)
    table = _table("norm vs training frequency", "vectors", "spearman ρ", "p-value", "words")
    for name, result in results.items():
        pvalue = "–" if result.pvalue is None else f"{result.pvalue:.1e}"
        table.add_row(name, _fmt(result.rho), pvalue, str(result.words))
    payload = {**_header(run), "sets": {name: result.summary() for name, result in results.items()},
               "png": None if png is None else str(png)}
    _emit(payload, json_output, [table])


@handle_errors
def wordsim_command(run_dir: RunDir, checkpoint: Checkpoint = "best", device: Device = "auto",
                    vectors: Vectors = None,
                    data_dir: Annotated[Path | None, typer.Option(
                        help="Directory of the benchmark files (default: data/wordsim, written by `nlgkit prepare "
                             "wordsim`, else ../shared/data/wordsim)")] = None,
                    benchmark: Annotated[list[str] | None, typer.Option(
                        help=f"Repeatable: {', '.join(BENCHMARKS)} (default: all)")] = None,
                    json_output: JsonFlag = False) -> None:
    """Spearman ρ between cosines and human similarity, with pairs covered (Shalev et al. Table 4); default: every
    set of English words (the benchmarks are English)."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.evaluate.analysis import wordsim

    benchmarks = {name: wordsim.read_benchmark(path)
                  for name, path in wordsim.benchmark_paths(data_dir or default_dir(),
                                                            benchmark).items()}
    run, sets = _load_sets(run_dir, checkpoint, device, vectors, None)
    sets = wordsim.english_sets(sets, getattr(run.config.data, "src_lang", None), run.config.data.tgt_lang,
                                asked=bool(vectors), where=str(run.checkpoint))
    results = {entry.name: {name: wordsim.word_similarity(entry.matrix, entry.vocab, pairs)
                            for name, pairs in benchmarks.items()} for entry in sets}
    columns = [f"{name} ρ (covered/total)" for name in benchmarks]
    table = _table("word similarity", "vectors", *columns)
    for name, scores in results.items():
        table.add_row(name, *(f"{_fmt(r.rho)} ({r.covered}/{r.total})" for r in scores.values()))
    payload = {**_header(run), "sets": {name: {bench: result.summary() for bench, result in scores.items()}
                                        for name, scores in results.items()}}
    _emit(payload, json_output, [table])


def _parse_pair(text: str) -> tuple[str, str]:
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise NlgkitError(f"--pair {text!r}: expected WORD,WORD")
    return parts[0], parts[1]


@handle_errors
def neighbours_command(run_dir: RunDir, checkpoint: Checkpoint = "best", device: Device = "auto",
                       query: Annotated[list[str] | None, typer.Option(
                           metavar="WORD", help="Query word, repeatable")] = None,
                       k: Annotated[int, typer.Option("-k", help="Neighbours per query")] = 10,
                       pair: Annotated[list[str] | None, typer.Option(
                           metavar="A,B", help="Word pair whose cosine to print, repeatable")] = None,
                       vectors: Vectors = None, json_output: JsonFlag = False) -> None:
    """Nearest neighbours by cosine (Pappas et al. Table 1) and pair cosines; default: tgt_input/output."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.evaluate.analysis import neighbours

    pairs = [_parse_pair(text) for text in pair or []]
    if not query and not pairs:
        raise NlgkitError("nothing to look up: give --query WORD and/or --pair A,B")
    if k < 1:
        raise NlgkitError(f"-k {k}: must be at least 1")
    run, sets = _load_sets(run_dir, checkpoint, device, vectors, ["tgt_input", "tgt_output"])
    payload: dict[str, Any] = {**_header(run), "sets": {}}
    tables = []
    for entry in sets:
        found = neighbours.nearest_neighbours(entry.matrix, entry.vocab, query or [], k)
        cosines = neighbours.cosine_of_pairs(entry.matrix, entry.vocab, pairs)
        payload["sets"][entry.name] = {
            "neighbours": {word: [[w, c] for w, c in hits] for word, hits in found.found.items()},
            "oov": found.oov,
            "pairs": [{"a": a, "b": b, "cosine": c} for a, b, c in cosines],
        }
        table = _table(f"{entry.name} nearest neighbours", "query", f"top {k} (cosine)")
        for word, hits in found.found.items():
            table.add_row(word, ", ".join(f"{w} ({c:.2f})" for w, c in hits), end_section=True)
        for word in found.oov:
            table.add_row(word, "OOV (not in the vocabulary)")
        for a, b, c in cosines:
            table.add_row(f"{a} ~ {b}", "OOV" if c is None else f"cosine {c:.3f}")
        tables.append(table)
    _emit(payload, json_output, tables)


@handle_errors
def geometry_command(run_dir: RunDir, checkpoint: Checkpoint = "best", device: Device = "auto",
                     bins: Annotated[int, typer.Option(help="Equal-size rank bins")] = 10,
                     bin_size: Annotated[int | None, typer.Option(help="Ranks per bin (overrides --bins)")]
                     = None,
                     vectors: Vectors = None, png: Png = None, json_output: JsonFlag = False) -> None:
    """Cosine to, and rank of, the 1st/5th nearest neighbour per frequency-rank bin (Tokarchuk & Niculae)."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.figures import save_png
    from nlgkit.core.io import check_output
    from nlgkit.data.word_counts import check_side_counts
    from nlgkit.evaluate.analysis import geometry
    from nlgkit.runs.files import models_as_inputs

    if bins < 1 or (bin_size is not None and bin_size < 1):
        raise NlgkitError("--bins and --bin-size must be at least 1")
    if png is not None:
        check_output(png, models_as_inputs([run_dir], "RUN_DIR"))
    run, sets = _load_sets(run_dir, checkpoint, device, vectors, ["tgt_output"])
    check_side_counts(run.assets)  # frequency ranks from the set's own language's counts
    orders = (1, 5)
    results = {}
    for entry in sets:
        found = geometry.neighbour_geometry(entry.matrix, entry.vocab, orders)
        edges = geometry.rank_bins(found.ranks.numel(), bins, bin_size)
        results[entry.name] = geometry.bin_geometry(found, edges)
    if png is not None:
        save_png(geometry.geometry_figure(results, orders), png)
    tables = []
    for name, rows in results.items():
        table = _table(f"{name}: neighbours by frequency rank (medians)", "ranks", "words",
                       *(f"cos@{n}" for n in orders), *(f"rank@{n}" for n in orders))
        for row in rows:
            cells = [_fmt(row[f"cos@{n}"]["median"]) if row["words"] else "–" for n in orders]
            cells += [f"{row[f'rank@{n}']['median']:.0f}" if row["words"] else "–" for n in orders]
            table.add_row(f"{row['ranks'][0]}–{row['ranks'][1]}", str(row["words"]), *cells)
        tables.append(table)
    payload = {**_header(run), "orders": list(orders), "sets": results,
               "png": None if png is None else str(png)}
    _emit(payload, json_output, tables)


@handle_errors
def params_command(run_dir: RunDir, checkpoint: Checkpoint = "best", device: Device = "cpu",
                   measure_optimizer: Annotated[bool, typer.Option(
                       "--measure-optimizer", help="Also measure Adam state from train_state.pt"
                   )] = False,
                   json_output: JsonFlag = False) -> None:
    """Trainable/frozen/buffer elements and bytes per component, plus Adam state (Shalev et al. Table 3)."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.evaluate.analysis import params
    from nlgkit.runs import loading as runs
    from nlgkit.runs.checkpoint import STATE_FILE, find_checkpoint, load_train_state

    run = runs.load_trained(run_dir, checkpoint, device)
    if measure_optimizer and not ((find_checkpoint(run.checkpoint) or run.checkpoint) / STATE_FILE).is_file():
        raise NlgkitError(f"--measure-optimizer: {run.checkpoint} keeps no optimizer state ({STATE_FILE}; the "
                          "last checkpoint does: --checkpoint last)")
    state = load_train_state(run.checkpoint).get("optimizer") if measure_optimizer else None
    if measure_optimizer and not isinstance(state, dict):
        raise NlgkitError(f"{run.checkpoint}: training state holds no optimizer state")
    report = params.parameter_report(run.model, state)
    table = _table("parameters", "component", "trainable", "frozen", "buffers", "MiB")
    for name, entry in report["components"].items():
        table.add_row(name, f"{entry['trainable']:,}", f"{entry['frozen']:,}", f"{entry['buffers']:,}",
                      f"{entry['bytes'] / 2**20:.2f}")
    table.add_row("total", f"{report['trainable']:,}", f"{report['frozen']:,}", f"{report['buffers']:,}",
                  f"{report['bytes'] / 2**20:.2f}", end_section=True)
    table.add_row("Adam state (fp32 estimate)", "", "", "", f"{report['adam_bytes'] / 2**20:.2f}")
    if report["adam_bytes_measured"] is not None:
        table.add_row("Adam state (measured)", "", "", "", f"{report['adam_bytes_measured'] / 2**20:.2f}")
    _emit({**_header(run), **report}, json_output, [table])


@handle_errors
def confidence_command(run_dirs: Annotated[list[Path], typer.Argument(
                           help="Run directories written by `nlgkit train`, side by side (each binned by its own "
                                "target vocabulary's training counts)", show_default=False)],
                       split: Annotated[str, typer.Option(help="The prepared split whose references are scored")]
                       = "test",
                       data_dir: Annotated[Path | None, typer.Option(
                           help="Prepared data directory (default: each run's data.dir)")] = None,
                       bins: Annotated[str | None, typer.Option(
                           metavar="EDGES", help="Training-frequency bin edges (default 1,2,3,4,5,10,100,1000)")]
                       = None,
                       checkpoint: Checkpoint = "best", device: Device = "auto", png: Png = None,
                       json_output: JsonFlag = False) -> None:
    """Mean log-probability of the reference tokens by training frequency, run beside run (forced decoding)."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.figures import save_png
    from nlgkit.core.io import check_output
    from nlgkit.data.word_counts import check_side_counts
    from nlgkit.evaluate.analysis.confidence import confidence_by_frequency, confidence_figure
    from nlgkit.generation.decode import score_references
    from nlgkit.metrics.vocabulary import DEFAULT_EDGES, parse_edges, train_counts
    from nlgkit.runs import loading as runs
    from nlgkit.runs.files import models_as_inputs

    if png is not None:
        check_output(png, models_as_inputs(run_dirs, "RUN_DIR"))
    edges = parse_edges(bins) if bins is not None else DEFAULT_EDGES
    if len({str(run_dir) for run_dir in run_dirs}) != len(run_dirs):
        raise NlgkitError("a run directory named twice: name each run once")
    results, headers = {}, []
    for run_dir in run_dirs:
        run = runs.load_trained(run_dir, checkpoint, device)
        check_side_counts(run.assets)  # reference tokens binned by the target side's counts
        directory = data_dir or Path(run.config.data.dir)
        try:
            per_item = run.task.split_target_tokens(directory, split)
        except DataError as exc:
            raise DataError(f"{run_dir}: {exc} (--data-dir names the prepared directory)") from None
        items = run.task.split_sources(directory, split, run.vocabs)
        if len(items) != len(per_item):
            raise DataError(f"{directory}: split {split!r} has {len(items)} sources for {len(per_item)} references")
        # an item with several references (an image's captions) is scored once with each
        sources = [source for source, references in zip(items, per_item, strict=True) for _ in references]
        references = [tokens for item_references in per_item for tokens in item_references]
        scores = score_references(run.model, run.task, sources, references, run.tgt_vocab, device=run.device)
        results[str(run_dir)] = confidence_by_frequency(references, [s.token_scores for s in scores],
                                                        train_counts(run.tgt_vocab), edges)
        headers.append(_header(run))
    names = list(results)
    table = _table(f"reference-token log-probability by training frequency ({split})", "bin", "tokens",
                   *[f"{name} ({header['head']})" for name, header in zip(names, headers, strict=True)])
    first = results[names[0]]
    for row, entry in enumerate(first):
        cells = [_fmt(results[name][row].mean_log_prob) for name in names]
        table.add_row(entry.label, f"{entry.tokens:,}" + ("" if all(
            results[name][row].tokens == entry.tokens for name in names) else " (differs)"), *cells)
    if png is not None:
        save_png(confidence_figure({f"{name} ({header['head']})": results[name]
                                    for name, header in zip(names, headers, strict=True)}), png)
    payload = {"split": split, "edges": list(edges), "png": None if png is None else str(png),
               "runs": {name: {**header, "bins": [b.summary() for b in results[name]]}
                        for name, header in zip(names, headers, strict=True)}}
    if json_output:
        typer.echo(json.dumps(payload, ensure_ascii=False))
        return
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add the analysis commands to ``app`` (the ``nlgkit evaluate`` group)."""
    app.command("norms")(norms_command)
    app.command("wordsim")(wordsim_command)
    app.command("neighbours")(neighbours_command)
    app.command("geometry")(geometry_command)
    app.command("params")(params_command)
    app.command("confidence")(confidence_command)

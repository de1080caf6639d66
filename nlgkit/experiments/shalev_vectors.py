"""Shalev et al.'s Table 4 (word similarity) and Fig. 2 (norm–frequency ρ), from weights or from run records.

A run that still has its weights is analysed from its best checkpoint, and the figures are written into the run
directory as ``vector_analysis.json`` (atomically, with the SHA-256 of the checkpoint's ``meta.json``). That is a
top-level JSON file, so ``nlgkit reproduce archive`` copies it into the run's weightless record, and once the weights
are gone (trained on another machine, only the record came back) the same table is written from that file, byte for
byte: both paths render the same JSON-shaped figures. A run with neither weights nor a current analysis keeps the
cells re-emitted from ``results/table4.json`` (:mod:`nlgkit.experiments.kept`) where it has some, and is listed as
not run yet otherwise.

Runs whose resolved configs differ only in their seed are one head's seeds: after the last of them, a mean row gives
each ρ as mean ± sample sd over the seeds Table 2's mean counts (the finished ones where some finished), since the
paper's claims are about heads, not about one seed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from nlgkit.core.errors import DataError, NlgkitError
from nlgkit.core.io import read_json, sha256_file, write_json
from nlgkit.data.word_counts import check_side_counts
from nlgkit.data.wordsim import default_dir
from nlgkit.evaluate.analysis.norms import norm_frequency
from nlgkit.evaluate.analysis.vectors import VectorSet, set_language, vector_sets
from nlgkit.evaluate.analysis.wordsim import (
    LANGUAGE,
    Pair,
    benchmark_paths,
    read_benchmark,
    word_similarity,
)
from nlgkit.evaluate.collect import counted_seeds, group_key, run_keys
from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.significance import mean_sd
from nlgkit.experiments.common import log, write_output
from nlgkit.experiments.kept import kept_figures, unrecorded_note
from nlgkit.experiments.papers import load_table
from nlgkit.runs.checkpoint import find_checkpoint
from nlgkit.runs.loading import load_trained
from nlgkit.runs.outputs import best_meta, is_record, run_config
from nlgkit.runs.progress import read_progress
from nlgkit.runs.records import check_record

ANALYSIS_FILE = "vector_analysis.json"  # in the run directory; `reproduce archive` copies it into the record
KINDS = ("target", "input")
# Fig. 2 has no table: Section 3.2's text gives the strength of ρ(‖w_j‖, count of word j) of the learned target
# vectors and its direction: "target vectors with large magnitude are representing less frequent words", a negative
# ρ in this table's convention. By (dataset, pair, model), as Table 4's rows: Multi30K and IWSLT with the RNN,
# WMT-14 with ConvS2S; a run of another corpus or model has no paper figure (not Multi30K's).
PAPER_NORM_RHO = {("multi30k", "de-en", "rnn"): -0.84, ("multi30k", "en-de", "rnn"): -0.93,
                  ("iwslt14", "de-en", "rnn"): -0.76, ("iwslt14", "en-de", "rnn"): -0.83,
                  ("wmt14", "en-de", "convs2s"): -0.81}
Analysed = tuple[str, Path, dict[str, Any]]  # a run's name, its directory or record, and its figures

INTRO = [
    "# Shalev et al., Table 4: word similarity (Spearman ρ), target / input vectors", "",
    "Written by `make reproduce-table4` (`nlgkit reproduce table4 RUN_DIR… --records results/runs`): Spearman ρ",
    "between the cosine of two words' vectors and the human score, over the pairs whose words are both in the",
    "vocabulary (covered/total); each run's best checkpoint. The English vectors: for DE-EN, target = the head's",
    "rows and input = the decoder's input embeddings; for EN-DE, the encoder's input embeddings (the paper has no",
    "EN-DE row). A run with weights is analysed and its figures kept in `RUN/vector_analysis.json`, which its run",
    "record carries; a run whose weights are gone is read from that file (`make table2-report` reads the records).",
    "A head's seeds (runs whose resolved configs differ only in the seed) end in a mean row: each ρ is the mean ±",
    "sample sd over them (the finished ones where some finished, as Table 2 counts them).", ""]
FIG2_INTRO = [
    "## Fig. 2: vector norm against training frequency", "",
    "Spearman ρ between each word's vector L2 norm and its count in the training data (non-special words counted",
    "at least once), for the head's rows (target) and the decoder's input embeddings (input), both over the target",
    "vocabulary. The paper's text gives the strength of this ρ for learned target vectors (Multi30K DE-EN 0.84,",
    "EN-DE 0.93) and its direction (\"target vectors with large magnitude are representing less frequent words\"):",
    "negative here, so its column reads -0.84 and -0.93.", ""]


def english_sets(src_lang: str | None, tgt_lang: str) -> dict[str, str | None]:
    """Which vector set is Table 4's target and input for a run: only English vectors meet the benchmarks (the
    language of each set as ``evaluate wordsim`` tells it, :func:`~nlgkit.evaluate.analysis.vectors.set_language`)."""
    def english(name: str) -> str | None:
        return name if set_language(name, src_lang, tgt_lang) == LANGUAGE else None

    return {"target": english("tgt_output"), "input": english("tgt_input") or english("src_input")}


def read_benchmarks(wordsim_dir: str | None) -> dict[str, tuple[Path, list[Pair]]]:
    """Every word-similarity benchmark by name, with its file (read only when some run has weights)."""
    paths = benchmark_paths(Path(wordsim_dir) if wordsim_dir else default_dir(), option="--wordsim-dir")
    return {name: (path, read_benchmark(path)) for name, path in paths.items()}


def checkpoint_stamp(run_dir: Path) -> str:
    """The SHA-256 of the best checkpoint's ``meta.json``: a record's copy has the same bytes, so it still names
    the checkpoint whose weights were analysed."""
    return hashlib.sha256(best_meta(run_dir).read_bytes()).hexdigest()


def analyse_run(run_dir: Path, benchmarks: dict[str, tuple[Path, list[Pair]]]) -> dict[str, Any]:
    """Table 4's and Fig. 2's figures of a run with weights, also written to ``RUN/vector_analysis.json``."""
    run = load_trained(run_dir, "best", "cpu")
    check_side_counts(run.assets)  # Fig. 2 ranks the target's words by the target side's counts
    data = run.config.data
    sets = vector_sets(run.model, run.source_vocab, run.tgt_vocab)
    english = english_sets(getattr(data, "src_lang", None), data.tgt_lang)

    def similarity(kind: str, pairs: list[Pair]) -> dict[str, Any] | None:
        name = english[kind]
        entry = sets.get(name) if name else None
        return None if entry is None else dict(word_similarity(entry.matrix, entry.vocab, pairs).summary())

    def norms(entry: VectorSet | None) -> dict[str, Any] | None:
        if entry is None:
            return None
        return {"vectors": entry.name, **norm_frequency(entry.matrix, entry.vocab).summary()}

    analysis = {
        "checkpoint": checkpoint_stamp(run_dir),
        "word_similarity": {
            "vectors": english,
            "benchmarks": {name: {"file": path.name, "sha256": sha256_file(path),
                                  **{kind: similarity(kind, pairs) for kind in KINDS}}
                           for name, (path, pairs) in benchmarks.items()}},
        "norm_frequency": {"target": norms(sets.get("tgt_output")), "input": norms(sets.get("tgt_input"))},
    }
    write_json(Path(run_dir) / ANALYSIS_FILE, analysis)
    return analysis


def recorded_analysis(run_dir: Path) -> dict[str, Any] | None:
    """The figures a run without weights kept (in its directory or its record), when they are its best
    checkpoint's; None when it has none (or they are stale: written for an earlier best checkpoint)."""
    path = Path(run_dir) / ANALYSIS_FILE
    if not path.is_file():
        return None
    if is_record(run_dir):
        check_record(Path(run_dir))  # committed data: an edited file would change the table silently
    check_side_counts(Path(run_dir) / "data")  # its Fig. 2 figures were counted as analyse_run counts them
    analysis = checked_analysis(read_json(path), path)
    if analysis["checkpoint"] != checkpoint_stamp(Path(run_dir)):
        log(f"{path}: written for another best checkpoint; not used")
        return None
    return analysis


def checked_analysis(data: Any, path: Path) -> dict[str, Any]:
    """``data`` when it has every figure the table reads; otherwise a one-line error naming the file and key."""
    _need(data, path, "the file", dict)
    _need(data.get("checkpoint"), path, "checkpoint", str)
    similarity = _need(data.get("word_similarity"), path, "word_similarity", dict)
    for name, cells in _need(similarity.get("benchmarks"), path, "word_similarity.benchmarks", dict).items():
        where = f"word_similarity.benchmarks.{name}"
        for kind in KINDS:
            _figures(_need(cells, path, where, dict).get(kind), path, f"{where}.{kind}", ("rho", "covered", "total"))
    norms = _need(data.get("norm_frequency"), path, "norm_frequency", dict)
    for kind in KINDS:
        _figures(norms.get(kind), path, f"norm_frequency.{kind}", ("rho", "words"))
    return dict(data)


def _need(value: Any, path: Path, key: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kind):
        raise DataError(f"{path}: {key}: missing or malformed; analyse the run again (nlgkit reproduce table4)")
    return value


def _figures(cell: Any, path: Path, where: str, keys: tuple[str, ...]) -> None:
    """A set's figures (None where the run has no such vectors): ρ a number or None, counts integers."""
    if _need(cell, path, where, (dict, type(None))) is not None:
        for key in keys:
            _need(cell.get(key), path, f"{where}.{key}", (int, float, type(None)) if key == "rho" else int)


def table4(run_dirs: list[str], output: str | None, wordsim_dir: str | None = None) -> str:
    """Shalev et al.'s Table 4 and Fig. 2's ρ for ``run_dirs`` (run directories or records), beside the paper's."""
    paper = load_table("shalev2020_table4")
    kept = kept_figures(output)
    benchmarks: dict[str, tuple[Path, list[Pair]]] | None = None
    parts: list[Analysed | list[list[str]]] = []  # an analysed run, or the rows kept for an unrecorded one
    kept_names: set[str] = set()
    missing: dict[str, list[str]] = {"waiting": [], "unanalysed": []}
    for run_dir in run_dirs:
        path, name = Path(run_dir), Path(run_dir).name
        if find_checkpoint(path / "checkpoints" / "best") is not None:
            benchmarks = read_benchmarks(wordsim_dir) if benchmarks is None else benchmarks
            analysis: dict[str, Any] | None = analyse_run(path, benchmarks)
        else:
            analysis = recorded_analysis(path) if _trained(path) else None
        if analysis is not None:
            parts.append((name, path, analysis))
            continue
        cells = [row for row in kept["rows"] if Path(row["run"]).name == name] if kept else []
        if cells:  # the cells kept from the original runs, marked so
            kept_names.add(name)
            parts.append([[f"`{name}` (unrecorded)", row["head"], row["benchmark"], *row["cells"]] for row in cells])
        else:
            missing["unanalysed" if _trained(path) else "waiting"].append(name)
            log(f"{run_dir}: no weights and no current {ANALYSIS_FILE}; listed, not analysed")
    notes = []
    if kept is not None:  # written back as read (the runs asked for), as `make table2-report` expects
        names = {Path(run_dir).name for run_dir in run_dirs}
        write_json(Path(str(output)).with_suffix(".json"),
                   kept | {"rows": [row for row in kept["rows"] if Path(row["run"]).name in names]})
        if kept_names:
            notes = unrecorded_note(kept, "table4")
    body, norms_body = _table_rows(parts, paper)
    return write_output(_text(body, norms_body, notes, missing), output)


def _table_rows(parts: list[Analysed | list[list[str]]], paper: Any) -> tuple[list[list[str]], list[list[str]]]:
    """Table 4's and Fig. 2's rows in the runs' order, each seed group's mean rows after its last analysed seed."""
    groups: dict[str, list[Analysed]] = {}
    keys: dict[int, str] = {}
    for index, part in enumerate(parts):
        if isinstance(part, tuple):
            keys[index] = group_key(run_config(part[1]))
            groups.setdefault(keys[index], []).append(part)
    body: list[list[str]] = []
    norms_body: list[list[str]] = []
    for index, part in enumerate(parts):
        if not isinstance(part, tuple):
            body += part
            continue
        name, path, analysis = part
        rows, norm_row = _rows(f"`{name}`", path, [analysis], paper)
        body += rows
        norms_body.append(norm_row)
        seeds = groups[keys[index]]
        counted = _counted(seeds)
        if len(counted) > 1 and seeds[-1] is part:
            label = "mean of " + ", ".join(f"`{seed_name}`" for seed_name, _, _ in counted)
            rows, norm_row = _rows(label, path, [seed_analysis for _, _, seed_analysis in counted], paper)
            body += rows
            norms_body.append(norm_row)
    return body, norms_body


def _counted(seeds: list[Analysed]) -> list[Analysed]:
    """The seeds a mean row averages, as Table 2's mean rows count them (:func:`counted_seeds`)."""
    counted = {progress.run_dir for progress in counted_seeds([read_progress(path) for _, path, _ in seeds])}
    return [seed for seed in seeds if seed[1] in counted]


def _trained(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a trained run directory or record (it has a best checkpoint's ``meta.json``)."""
    try:
        best_meta(run_dir)
    except NlgkitError:
        return False
    return True


def _rows(label: str, run_dir: Path, analyses: list[dict[str, Any]],
          paper: Any) -> tuple[list[list[str]], list[str]]:
    """Table 4's rows (one per benchmark) and Fig. 2's row of one analysed run, or of a head's seeds (mean ± sd),
    from their figures and config alone, so that a run read from its record gives the same text as the run
    analysed from its weights."""
    config = run_config(run_dir)
    head = config.head.type
    keys = run_keys(config, run_dir)  # the dataset from the prepared data's manifest, as Table 2 matches its rows
    paper_keys = {"dataset": keys["dataset"], "pair": keys.get("pair"), "model": config.model.type}
    row = paper.match(paper_keys) if head == "learned" else None
    rows = []
    for benchmark in analyses[0]["word_similarity"]["benchmarks"]:
        figures, covered = [], ""
        for kind in KINDS:
            cells = [analysis["word_similarity"]["benchmarks"].get(benchmark, {}).get(kind) for analysis in analyses]
            theirs = row.values.get(f"{benchmark}_{kind}") if row else None
            figures += [_rho(cells), _number(theirs)]
            if cells[0] is not None:
                covered = f"{cells[0]['covered']}/{cells[0]['total']}"
        rows.append([label, head, benchmark, *figures, covered])
    norms = [analysis["norm_frequency"] for analysis in analyses]
    dataset, pair, model = (str(paper_keys[key]).lower() for key in ("dataset", "pair", "model"))
    theirs = PAPER_NORM_RHO.get((dataset, pair, model)) if head == "learned" else None
    words = next((str(norms[0][kind]["words"]) for kind in KINDS if norms[0][kind] is not None), "")
    figures = [_rho([norm[kind] for norm in norms]) for kind in KINDS]
    return rows, [label, head, figures[0], _number(theirs), figures[1], words]


def _rho(cells: list[dict[str, Any] | None]) -> str:
    """One run's ρ, or several seeds' mean ± sample sd; "–" where a run has no such vectors or no ρ."""
    values = [None if cell is None else cell["rho"] for cell in cells]
    if any(value is None for value in values):
        return "–"
    if len(values) == 1:
        return _number(values[0])
    mean, sd = mean_sd([float(value) for value in values if value is not None])
    return f"{mean:.2f} ± {sd:.2f}"


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _text(body: list[list[str]], norms_body: list[list[str]], notes: list[str],
          missing: dict[str, list[str]]) -> str:
    """The document: Table 4, the closing remark, Fig. 2's table, any notes and the runs it could not read."""
    lines = [*INTRO, *md_table(["run", "head", "benchmark", "target ρ (nlgkit)", "target ρ (paper)",
                                "input ρ (nlgkit)", "input ρ (paper)", "pairs"], body, [False] * 3 + [True] * 5),
             "", "A fixed head's target vectors are random by construction; the paper reports learned models only.",
             "", *FIG2_INTRO]
    if norms_body:
        lines += [*md_table(["run", "head", "target ρ (nlgkit)", "target ρ (paper)", "input ρ (nlgkit)", "words"],
                            norms_body, [False] * 2 + [True] * 4), ""]
    if notes or not norms_body:
        lines += ["No norms are known for runs marked unrecorded in Table 4." if notes else "No run analysed yet.", ""]
    if notes:
        lines += [*notes, ""]
    if missing["unanalysed"]:
        unanalysed = _names(missing["unanalysed"])
        lines += [f"Trained, but neither weights nor a current `{ANALYSIS_FILE}` here: {unanalysed}.", ""]
    if missing["waiting"]:
        lines += [f"Not run yet: {_names(missing['waiting'])}.", ""]
    return "\n".join(lines)


def _names(names: list[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)

"""Hirasawa & Komachi (2019): which row of their Tables 3–4 a run belongs to, and what the report reads from it.

A run's place is read from the resolved config it saved (``config.json``, which its record keeps too), as data,
so that a record written before a field existed still lands somewhere: ``model.type``, ``data.src_lang`` /
``data.tgt_lang``, ``train.seed`` and ``[embeddings] label`` ("random" — also when the section is absent — or
``word2vec`` | ``glove`` | ``fasttext`` | ``glove6b``, optionally followed by ``+lc`` or ``+abtt``). Which data it
saw is read from the data manifest it keeps: ``covered_only`` (only the Multi30K pairs whose photograph is here)
and its subword scheme. The tables the embeddings came from are not copied into records; the label names them.

Runs are found by name: every record in the records directory, and every run directory given that has a best
checkpoint (replacing a record of the same name); a given directory with neither is waiting to be trained.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nlgkit.core.errors import NlgkitError
from nlgkit.core.io import read_json
from nlgkit.data.tokenize import TextPipeline
from nlgkit.data.vocab import Vocabulary
from nlgkit.data.word_counts import check_side_counts
from nlgkit.evaluate.analysis.word_fscore import word_matches
from nlgkit.evaluate.collect import RunResult, collect_run
from nlgkit.experiments.common import RECIPES
from nlgkit.metrics.meteor import MeteorSession, meteor_score
from nlgkit.metrics.vocabulary import train_counts
from nlgkit.runs.outputs import best_meta, is_record, saved_config
from nlgkit.runs.records import reading_record

MODELS = ("rnn", "doubly_attentive", "imagination", "vag_nmt")
MODEL_NAMES = {"rnn": "text-only NMT (`rnn`)", "doubly_attentive": "doubly-attentive (`doubly_attentive`)",
               "imagination": "IMAGINATION (`imagination`)", "vag_nmt": "VAG-NMT (`vag_nmt`)"}
EMBEDDINGS = ("random", "word2vec", "glove", "fasttext", "glove6b")
EMBEDDING_NAMES = {"random": "random", "word2vec": "word2vec", "glove": "GloVe", "fasttext": "fastText",
                   "glove6b": "GloVe 6B (Stanford, English source only)"}
DEBIASING = ("none", "lc", "abtt")
DEBIASING_NAMES = {"none": "none", "lc": "localized centering", "abtt": "All-but-the-Top"}
PAIRS = ("en-de", "en-fr")
PAIR_NAMES = {"en-de": "EN→DE", "en-fr": "EN→FR"}
SUBSETS = ("all", "covered")
SUBSET_NAMES = {"all": "all Multi30K pairs (29,000 training pairs; test2016: 1,000)",
                "covered": "image-covered pairs only (6,993 training pairs; test2016: 243)"}

Log = Callable[[str], None]


@dataclass(frozen=True)
class Row:
    """A row of the report's Tables 3–4 (one per data subset): model × initial embeddings × debiasing."""

    subset: str  # "all" or "covered"
    model: str
    embeddings: str  # "random", "glove", … (a label outside EMBEDDINGS gets a row of its own)
    debiasing: str  # "none", "lc" or "abtt"
    subword: str = "none"  # the paper's Tables 3–4 are word level; a BPE run is a row of its own
    init: str = "default"  # initial weights other than nlgkit's (train.weight_init): a row of its own
    table_rows: str = "default"  # the tables' rows rescaled (embeddings.normalize, .match_scale): a row of its own

    def sort_key(self) -> tuple[Any, ...]:
        """The paper's order (models, then embeddings, then debiasing), anything else after, by name."""
        return (_rank(self.subset, SUBSETS), _rank(self.model, MODELS), self.subword != "none", self.subword,
                self.init != "default", self.init, _rank(self.embeddings, EMBEDDINGS), self.table_rows != "default",
                self.table_rows, _rank(self.debiasing, DEBIASING))

    def paper_keys(self, pair: str) -> dict[str, str]:
        return {"pair": pair, "model": self.model, "embeddings": self.embeddings, "debiasing": self.debiasing,
                "subword": self.subword}


def _rank(value: str, order: Sequence[str]) -> tuple[int, str]:
    return (order.index(value), "") if value in order else (len(order), value)


@dataclass(frozen=True)
class Placement:
    """Where one run goes: its row, its column (language pair) and its seed."""

    row: Row
    pair: str
    seed: int


@dataclass(frozen=True)
class TableUse:
    """What a run's provenance says of the table that initialised one side: its file's SHA-256 (None for a package)
    and that of its content (a safetensors header in canonical order; runs before it recorded none), and how many
    of the vocabulary's rows it supplied (the others start from the mean of its unused vectors)."""

    sha256: str | None
    found: int
    rows: int
    content_sha256: str | None = None

    def digests(self) -> set[str]:
        """What names these vectors: two uses sharing one of these read the same table."""
        return {digest for digest in (self.sha256, self.content_sha256) if digest}


@dataclass
class HirasawaRun:
    """A run (directory or record) with its scores; ``meteor`` is None where Java is missing."""

    result: RunResult
    place: Placement
    manifest: dict[str, Any]
    meteor: float | None
    meteor_note: str  # METEOR's signature, or why it was not computed
    tables: dict[str, TableUse] = field(default_factory=dict)  # side → its initial table, where provenance says

    @property
    def name(self) -> str:
        return self.result.run_dir.name


def parse_label(label: str) -> tuple[str, str]:
    """``"glove+abtt"`` → ("glove", "abtt"); ``"glove"`` → ("glove", "none"); ``""`` → ("random", "none")."""
    base, _, debiasing = label.strip().lower().partition("+")
    return base or "random", debiasing or "none"


def embeddings_label(config: Mapping[str, Any]) -> str:
    """A saved config's ``[embeddings]`` label: "random" without the section or tables; without a label, the stem
    of the table it names (as :class:`nlgkit.core.config.EmbeddingsConfig` does)."""
    section = config.get("embeddings") or {}
    if not isinstance(section, Mapping):
        return "random"
    label = str(section.get("label") or "")
    table = str(section.get("source") or section.get("target") or "")
    return label or (Path(table).stem if table else "random")


def initial_scales(config: Mapping[str, Any]) -> tuple[str, str]:
    """How a saved config draws the initial weights and scales the tables' rows, when not as nlgkit does by
    default: ``train.weight_init`` (e.g. "kaiming_normal", else "default") and, where a table initialises a side,
    ``embeddings.normalize`` / ``embeddings.match_scale`` (e.g. "unit table rows", else "default"). A random run
    reads no table, so its rows are "default" whatever those keys say: pre-trained rows at other scales are
    compared with the random run of the same initial weights."""
    train, section = config.get("train") or {}, config.get("embeddings") or {}
    weight_init = str(train.get("weight_init") or "default")
    if not isinstance(section, Mapping) or not (section.get("source") or section.get("target")):
        return weight_init, "default"
    unit, matched = bool(section.get("normalize")), bool(section.get("match_scale"))
    if not unit and not matched:
        return weight_init, "default"
    return weight_init, ("unit " if unit else "") + "table rows" + (" at the model's scale" if matched else "")


def placement(config: Mapping[str, Any], manifest: Mapping[str, Any]) -> Placement:
    """The row, pair and seed of a run from its saved config and its data manifest (read defensively)."""
    data, train, model = (config.get(name) or {} for name in ("data", "train", "model"))
    embeddings, debiasing = parse_label(embeddings_label(config))
    subset = "covered" if manifest.get("covered_only") else "all"
    subword = str(manifest.get("subword") or (data.get("prepare") or {}).get("subword") or "none")
    row = Row(subset, str(model.get("type", "?")), embeddings, debiasing, subword, *initial_scales(config))
    return Placement(row, f"{data.get('src_lang', '?')}-{data.get('tgt_lang', '?')}", int(train.get("seed", 1)))


def data_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest of the data a run trained on: its own copy (kept by records too), else its data directory's."""
    candidates = [run_dir / "manifest.json", run_dir / "data" / "manifest.json"]
    data_dir = (saved_config(run_dir).get("data") or {}).get("dir")
    if data_dir and not is_record(run_dir):
        candidates.append(Path(data_dir) / "manifest.json")
    for path in candidates:
        if path.is_file():
            manifest = read_json(path)
            return manifest if isinstance(manifest, dict) else {}
    return {}


def find_runs(run_dirs: Sequence[str], records: str | None,
              log: Log | None = None) -> tuple[list[Path], list[str]]:
    """Every record under ``records`` and every trained run directory of ``run_dirs`` (which replaces a record of
    the same name), sorted by name; and the names of the given directories neither trained nor recorded."""
    found: dict[str, Path] = {}
    if records and Path(records).is_dir():
        found = {path.name: path for path in Path(records).iterdir() if path.is_dir() and is_record(path)}
    waiting = []
    for run_dir in map(Path, run_dirs):
        try:
            best_meta(run_dir)
        except NlgkitError:
            if run_dir.name in found:
                if log:
                    log(reading_record(run_dir, found[run_dir.name]))
            else:
                waiting.append(run_dir.name)
            continue
        found[run_dir.name] = run_dir
    return [found[name] for name in sorted(found)], sorted(set(waiting))


def load_run(run_dir: Path, device: str = "auto", log: Log | None = None,
             meteor: MeteorSession | None = None) -> HirasawaRun:
    """Collect a run (its kept test outputs, or generated once and kept) and score METEOR on them (in
    ``meteor``'s jar when given: a report scores every run in one)."""
    result = collect_run(run_dir, ("bleu",), device, log)
    manifest = data_manifest(run_dir)
    place = placement(saved_config(run_dir), manifest)
    scored = meteor_score(result.hyps, result.ref_streams, place.pair.split("-")[-1], meteor)
    tables = table_uses(run_dir)
    if scored["available"]:
        return HirasawaRun(result, place, manifest, float(scored["score"]), scored["signature"], tables)
    return HirasawaRun(result, place, manifest, None, f"not computed: {scored['reason']}", tables)


def table_uses(run_dir: Path) -> dict[str, TableUse]:
    """Side → the word-vector table that initialised it, as the run's provenance recorded it (runs trained before
    nlgkit recorded it have none)."""
    path = run_dir / "provenance.json"
    embeddings = (read_json(path) if path.is_file() else {}).get("embeddings") or {}
    return {side: TableUse(entry.get("sha256"), int(entry["found"]), int(entry["rows"]), entry.get("content_sha256"))
            for side, entry in sorted(embeddings.items()) if isinstance(entry, dict)}


def run_word_matches(run: HirasawaRun) -> np.ndarray | None:
    """Word matches per test sentence and training-frequency bucket of a word-level run (word F-score's statistics):
    its outputs and references re-tokenised as its data was prepared, bucketed by the counts of its target
    vocabulary (None for a subword run, whose vocabulary counts pieces, not words)."""
    if run.place.row.subword != "none":
        return None
    lang = run.place.pair.split("-")[-1]
    tokenizer, lowercase = str(run.manifest.get("tokenizer", "spacy")), bool(run.manifest.get("lowercase", True))
    hyps = list(_retokenized(lang, tokenizer, lowercase, tuple(run.result.hyps)))
    refs = list(_references_retokenized(lang, tokenizer, lowercase, tuple(run.result.refs)))
    check_side_counts(run.result.run_dir / "data")  # bucketed by the target side's counts alone
    counts = train_counts(Vocabulary.load(run.result.run_dir / "data" / f"vocab.{lang}.txt"))
    return word_matches(hyps, refs, counts)


def _retokenized(lang: str, tokenizer: str, lowercase: bool, lines: tuple[str, ...]) -> tuple[str, ...]:
    """``lines`` tokenised as a data directory's text was, tokens joined by spaces."""
    return tuple(" ".join(tokens) for tokens in TextPipeline(lang, tokenizer, lowercase).tokenize_many(lines))


@functools.lru_cache(maxsize=4)
def _references_retokenized(lang: str, tokenizer: str, lowercase: bool, lines: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`_retokenized`, kept for the last reference sets: a report's runs of one pair share test2016's."""
    return _retokenized(lang, tokenizer, lowercase, lines)


def planned_models(recipes_dir: Path = RECIPES / "hirasawa") -> dict[str, list[str]]:
    """Which models the recipes train on each data subset (``data.prepare.covered_only``); every model on both
    when there are no recipes."""
    planned: dict[str, list[str]] = {subset: [] for subset in SUBSETS}
    for path in sorted(Path(recipes_dir).glob("*.toml")):
        recipe = tomllib.loads(path.read_text(encoding="utf-8"))
        data = recipe.get("data") or {}
        subset = "covered" if (data.get("prepare") or {}).get("covered_only") else "all"
        model = str((recipe.get("model") or {}).get("type", "rnn"))
        if model not in planned[subset]:
            planned[subset].append(model)
    if not any(planned.values()):
        return {subset: list(MODELS) for subset in SUBSETS}
    return {subset: sorted(models, key=lambda m: _rank(m, MODELS)) for subset, models in planned.items()}


def grid(subset: str, models: Sequence[str]) -> list[Row]:
    """The rows of one subset's table: per model, random and then every table × debiasing."""
    rows = []
    for model in models:
        rows.append(Row(subset, model, "random", "none"))
        rows += [Row(subset, model, embeddings, debiasing) for embeddings in EMBEDDINGS[1:] for debiasing in DEBIASING]
    return rows


Cells = dict[tuple[Row, str], dict[int, HirasawaRun]]  # (row, pair) → seed → run
CAPPED = "†"  # beside a seed count: none of the cell's seeds finished (each stopped by a limit)


def finished(run: HirasawaRun) -> bool:
    """Stopped by the training rule, not by a limit."""
    return run.result.finished


def seed_count(runs: Sequence[HirasawaRun]) -> str:
    """A cell's seed count, marked when none of its seeds finished."""
    return f"{len(runs)} {CAPPED}" if runs and not any(finished(run) for run in runs) else str(len(runs))

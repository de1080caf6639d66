"""Scoring files: what ``nlgkit evaluate --hyp H --ref R`` computes, below the command that prints it."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import read_lines
from nlgkit.data.vocab import Vocabulary
from nlgkit.data.word_counts import check_side_counts, read_word_counts
from nlgkit.evaluate.significance import paired_bootstrap
from nlgkit.metrics.corpus import METRICS, score_all
from nlgkit.metrics.vocabulary import parse_edges, train_counts


def read_nonempty(path: Path, role: str) -> list[str]:
    """Strict UTF-8 lines of ``path``; a file without any line is an error, not a score of 0."""
    lines = read_lines(path)
    if not lines:
        raise DataError(f"{path}: {role} file is empty")
    return lines


def read_aligned(path: Path, role: str, hyp: Path, count: int) -> list[str]:
    """A file that must have exactly as many lines as the hypothesis file."""
    lines = read_nonempty(path, role)
    if len(lines) != count:
        raise DataError(f"{path}: {len(lines)} {role} lines but {hyp} has {count} hypothesis lines")
    return lines


def score_files(hyp: Path, ref: list[Path], metrics: str, *, lowercase: bool = False, lang: str = "en",
                train_vocab: Path | None = None, bins: str | None = None, compare: Path | None = None,
                samples: int = 1000, seed: int = 12345, train_words: Path | None = None) -> dict[str, Any]:
    """Scores of ``hyp`` against every ``ref`` for the comma-separated ``metrics``; with ``compare``, a paired
    bootstrap of that second system against ``hyp`` for each corpus metric asked for. Training frequencies come
    from ``train_vocab`` (a vocabulary: its tokens' counts) or ``train_words`` (``WORD<TAB>COUNT``, the words a
    record keeps: the bins of a subword model's words)."""
    if train_vocab is not None and train_words is not None:
        raise ConfigError("--train-vocab and --train-words both give training frequencies: give one")
    counted = train_vocab or train_words
    names = [name.strip().lower() for name in metrics.split(",") if name.strip()]
    if counted is not None and "vu" not in names:
        names.append("vu")
    edges = _edges(bins, counted)
    tested = [name for name in names if name in METRICS]
    if compare is not None and not tested:
        raise ConfigError(f"--compare needs at least one of {', '.join(METRICS)} in --metrics")

    hyps = read_nonempty(hyp, "hypothesis")
    refs = [read_aligned(path, "reference", hyp, len(hyps)) for path in ref]
    hyps_b = read_aligned(compare, "hypothesis", hyp, len(hyps)) if compare is not None else None
    counts: dict[str, int] | None = None
    if train_vocab is not None:
        check_side_counts(train_vocab.parent)  # a prepared directory's or a run's vocabulary: one language's counts
        counts = train_counts(Vocabulary.load(train_vocab))
    elif train_words is not None:
        counts = dict(read_word_counts(train_words))
    scores: dict[str, Any] = score_all(hyps, refs, names, lowercase, lang, counts, edges)
    if hyps_b is not None:

        scores["paired_bootstrap"] = {
            name: asdict(paired_bootstrap(hyps, hyps_b, refs, name, samples, seed, lowercase))
            for name in tested
        }
    return scores


def _edges(bins: str | None, counted: Path | None) -> tuple[int, ...] | None:
    if bins is None:
        return None
    if counted is None:
        raise ConfigError("--bins needs --train-vocab or --train-words (bins are training frequencies)")

    return parse_edges(bins)

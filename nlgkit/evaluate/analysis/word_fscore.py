"""Word F-score by training frequency (compare-mt's measure; Hirasawa & Komachi's Fig. 1, after Qi et al. 2018).

For each word type, its matches are counted per sentence and clipped (a hypothesis word matches at most as many
occurrences as the reference has), summed over the test set together with its hypothesis and reference
occurrences. The word types of one training-frequency bucket are then pooled: precision = matches / hypothesis
occurrences, recall = matches / reference occurrences, F = 2PR / (P + R), and 0 for a bucket with no match.
The counting is :func:`nlgkit.metrics.vocabulary.word_matches_by_sentence`; this module names the buckets, keeps the
reference token count of each (how much of the test set a point stands for), tests the rare-word difference of two
systems by a paired bootstrap over test sentences, and draws the table and figure.

Buckets of training frequency (compare-mt's default cut-offs): 0 (never seen in training), 1, 2, 3, 4, 5–9,
10–99, 100–999 and ≥ 1000. Tokens are whitespace-separated: give hypotheses, references and the training counts
tokenised alike (the prepared files' tokens, not detokenised text), or "dog." never matches "dog".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean
from typing import TYPE_CHECKING

import numpy as np

from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.significance import BootstrapResult, paired_bootstrap_statistics
from nlgkit.metrics.vocabulary import DEFAULT_EDGES, matched_f1, word_matches_by_sentence

if TYPE_CHECKING:
    from matplotlib.figure import Figure

EDGES: tuple[int, ...] = DEFAULT_EDGES  # (1, 2, 3, 4, 5, 10, 100, 1000): a bucket's lower edge is the one before it
BUCKETS: tuple[str, ...] = ("0", "1", "2", "3", "4", "5–9", "10–99", "100–999", "≥1000")
RARE_BUCKETS: tuple[str, ...] = ("1", "2", "3", "4")  # seen in training under five times: the paper's claim is there
RARE_NAME = "1–4 (pooled)"
PANELS_PER_ROW = 2  # Fig. 1 panels side by side before the figure wraps


@dataclass(frozen=True)
class BucketScore:
    """One training-frequency bucket of one system's test output."""

    bucket: str  # one of BUCKETS
    matches: int  # clipped matches summed over the bucket's word types
    hyp_tokens: int  # hypothesis occurrences of those types
    ref_tokens: int  # reference occurrences of those types
    precision: float
    recall: float
    fscore: float


def word_matches(hyps: Sequence[str], refs: Sequence[str], train_counts: Mapping[str, int]) -> np.ndarray:
    """Per test sentence and bucket of BUCKETS: clipped matches, hypothesis and reference occurrences, shape
    (sentences, buckets, 3); each word bucketed by its count in ``train_counts`` (absent: 0)."""
    return word_matches_by_sentence(hyps, refs, train_counts, EDGES)


def bucket_scores(matches: np.ndarray) -> list[BucketScore]:
    """Per bucket: the pooled word precision, recall and F-score of one system's :func:`word_matches`."""
    scores = []
    for bucket, (both, hyp_n, ref_n) in zip(BUCKETS, matches.sum(axis=0).tolist(), strict=True):
        scores.append(BucketScore(bucket, both, hyp_n, ref_n, *matched_f1(both, hyp_n, ref_n)))
    return scores


def word_fscore_by_frequency(hyps: Sequence[str], refs: Sequence[str],
                             train_counts: Mapping[str, int]) -> list[BucketScore]:
    """Per bucket of BUCKETS: the pooled word precision, recall and F-score of ``hyps`` against ``refs`` (one
    reference per line), each word bucketed by its count in ``train_counts`` (absent: 0)."""
    return bucket_scores(word_matches(hyps, refs, train_counts))


def mean_fscores(runs: Sequence[Sequence[BucketScore]]) -> list[float]:
    """The F-score of each bucket averaged over several runs of one system (its seeds)."""
    if not runs:
        raise ValueError("mean_fscores needs at least one run")
    return [fmean(run[i].fscore for run in runs) for i in range(len(BUCKETS))]


def pooled_fscore(run: Sequence[BucketScore], buckets: Sequence[str] = RARE_BUCKETS) -> float:
    """The F-score of several buckets taken as one (their matches and occurrences summed): each rare bucket holds
    about a hundred test tokens, too few for a difference between two systems to mean much on its own."""
    chosen = [score for score in run if score.bucket in buckets]
    return matched_f1(sum(score.matches for score in chosen), sum(score.hyp_tokens for score in chosen),
                      sum(score.ref_tokens for score in chosen))[2]


def rare_bootstrap(runs_a: Sequence[np.ndarray], runs_b: Sequence[np.ndarray], samples: int = 1000,
                   seed: int = 12345) -> BootstrapResult:
    """Paired bootstrap over test sentences of the RARE_BUCKETS pooled F-score, system B (its seeds'
    :func:`word_matches`) against A: is B's rare-word gain more than which test sentences happen to hold rare words?
    Each system scores the mean over its seeds on every draw, as the report's F-score columns do."""
    rare = [BUCKETS.index(bucket) for bucket in RARE_BUCKETS]

    def pooled(runs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [run[:, rare, :].sum(axis=1) for run in runs]  # (sentences, 3): the rare buckets as one

    return paired_bootstrap_statistics(pooled(runs_a), pooled(runs_b), lambda summed: matched_f1(*summed)[2],
                                       f"word F ({RARE_NAME})", samples, seed)


def fscore_table(ref_tokens: Sequence[int], systems: Mapping[str, Sequence[float]],
                 rare: Mapping[str, float] | None = None) -> list[str]:
    """Markdown: one row per bucket with its reference tokens and each system's F-score (columns in the order of
    ``systems``); ``rare`` (per system, :func:`pooled_fscore` of RARE_BUCKETS) adds a last row."""
    body = [[bucket, f"{tokens:,}", *(f"{scores[i]:.3f}" for scores in systems.values())]
            for i, (bucket, tokens) in enumerate(zip(BUCKETS, ref_tokens, strict=True))]
    if rare is not None:
        tokens = sum(ref_tokens[BUCKETS.index(bucket)] for bucket in RARE_BUCKETS)
        body.append([RARE_NAME, f"{tokens:,}", *(f"{rare[name]:.3f}" for name in systems)])
    return md_table(["training frequency", "reference tokens", *(f"F: {name}" for name in systems)], body)


def fscore_figure(panels: Mapping[str, Mapping[str, Sequence[float]]]) -> Figure:
    """One panel per title (a language pair and model), one line per system: F-score against the
    training-frequency bucket (Hirasawa & Komachi's Fig. 1). Panels wrap after ``PANELS_PER_ROW`` so that many
    models stay legible."""
    from matplotlib.figure import Figure  # imported here: only the figure needs matplotlib

    columns = max(1, min(len(panels), PANELS_PER_ROW))
    rows = max(1, -(-len(panels) // columns))
    figure = Figure(figsize=(6 * columns, 4.6 * rows), layout="constrained")
    for position, (title, systems) in enumerate(panels.items(), start=1):
        axes = figure.add_subplot(rows, columns, position)
        for name, scores in systems.items():
            axes.plot(range(len(BUCKETS)), scores, marker="o", label=name)
        axes.set_xticks(range(len(BUCKETS)), BUCKETS, rotation=30)
        axes.set_xlabel("frequency in the training target text")
        axes.set_ylabel("word F-score")
        axes.set_ylim(0.0, 1.0)
        axes.set_title(title, fontsize="medium")
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
    return figure

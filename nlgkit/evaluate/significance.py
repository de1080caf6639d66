"""Is system B really better than A? Paired bootstrap resampling, and mean ± sd over seeds.

``paired_bootstrap`` follows Koehn (2004): draw ``samples`` test sets of the same size with replacement
(the same draw for both systems), score both systems on each, and count how often B is *not* better than A.
That share is the one-sided p-value of "B is better than A": small means B's advantage survives resampling
(p < 0.05 ⇔ B wins in more than 95 % of the resampled test sets). Ties count against B, so two identical
systems get p = 1. "Better" follows the metric's direction (lower TER is better). The 95 % confidence
interval of ``delta = score_b - score_a`` is the 2.5th and 97.5th percentile of the resampled deltas.

Scores are resampled from sacrebleu's per-sentence sufficient statistics (n-gram matches and lengths for
BLEU, character/word n-gram statistics for chrF, edits and reference lengths for TER), summed over each
resample and turned into a corpus score by sacrebleu itself, so a resample costs no re-tokenisation; with
all sentences once the statistics give exactly ``corpus_score`` (checked whenever a system's statistics are
extracted; ``sentence_statistics`` keeps the last 64 systems', so a baseline compared with many rows is counted once).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from nlgkit.core.errors import ConfigError, DataError, NlgkitError
from nlgkit.metrics.corpus import (
    HIGHER_IS_BETTER,
    METRICS,
    sacrebleu_metric,
    score_from_statistics,
    scorer_with_references,
    segment_statistics,
)


@dataclass(frozen=True)
class BootstrapResult:
    """One paired bootstrap test of B against A on one metric (see the module docstring for definitions)."""

    metric: str
    score_a: float
    score_b: float
    delta: float  # score_b - score_a
    p_value: float  # share of resamples where B is not better than A
    ci_low: float  # 95 % percentile interval of the resampled delta
    ci_high: float
    samples: int
    higher_is_better: bool = True

    def p_text(self) -> str:
        """The p-value as a report prints it: below the resolution of the resamples, a bound, not zero."""
        return f"p < {1 / self.samples:.2g}" if self.p_value == 0 else f"p = {self.p_value:.3f}"


def paired_bootstrap(
    hyps_a: Sequence[str],
    hyps_b: Sequence[str],
    refs: Sequence[Sequence[str]],
    metric: str = "bleu",
    samples: int = 1000,
    seed: int = 12345,
    lowercase: bool = False,
) -> BootstrapResult:
    """Paired bootstrap of ``hyps_b`` against ``hyps_a`` on reference streams ``refs`` (deterministic for
    a seed)."""
    if metric not in METRICS:
        raise ConfigError(
            f"paired bootstrap: metric {metric!r} has no sufficient statistics "
            f"(choose from {', '.join(METRICS)})"
        )
    if not hyps_a or len(hyps_a) != len(hyps_b):
        raise DataError(f"systems A and B have {len(hyps_a)} and {len(hyps_b)} lines: need the same, > 0")
    if not refs or any(len(stream) != len(hyps_a) for stream in refs):
        raise DataError("every reference stream must have as many lines as the hypotheses")
    streams = tuple(tuple(stream) for stream in refs)
    stats_a = sentence_statistics(metric, lowercase, tuple(hyps_a), streams)
    stats_b = sentence_statistics(metric, lowercase, tuple(hyps_b), streams)
    scorer = sacrebleu_metric(metric, lowercase)
    return paired_bootstrap_statistics([stats_a], [stats_b], lambda summed: _score(scorer, summed), metric, samples,
                                       seed, HIGHER_IS_BETTER[metric])


@functools.lru_cache(maxsize=64)
def sentence_statistics(metric: str, lowercase: bool, hyps: tuple[str, ...],
                        refs: tuple[tuple[str, ...], ...]) -> np.ndarray:
    """sacrebleu's per-sentence sufficient statistics of ``hyps`` (segments × statistics, read-only), checked to
    give ``corpus_score``'s score exactly when summed here as floats. Kept for the last systems asked: a report
    that bootstraps every row against one baseline extracts each system's n-grams once, not once per comparison."""
    scorer = scorer_with_references(metric, lowercase, refs)
    stats = np.asarray(segment_statistics(metric, lowercase, hyps, refs), dtype=np.float64)
    direct = float(score_from_statistics(metric, lowercase, hyps, refs).score)
    summed = _score(scorer, stats.sum(axis=0))
    if not math.isclose(direct, summed, rel_tol=1e-9, abs_tol=1e-9):  # the shortcut must be exact
        raise NlgkitError(f"{metric}: sufficient statistics give {summed}, corpus_score {direct}")
    stats.setflags(write=False)
    return stats


def paired_bootstrap_statistics(
    runs_a: Sequence[np.ndarray],
    runs_b: Sequence[np.ndarray],
    score: Callable[[np.ndarray], float],
    metric: str,
    samples: int = 1000,
    seed: int = 12345,
    higher_is_better: bool = True,
) -> BootstrapResult:
    """Paired bootstrap for any corpus score computed from summed per-segment statistics: each run is an array whose
    first axis is the test segments (the same segments for every run), ``score`` maps its sum over the drawn
    segments (flattened to one vector) to a score, and a system with several runs (its seeds) scores their mean on
    each draw, so seed noise is averaged and the interval is the test set's sampling error around that mean."""
    if samples < 1:
        raise ConfigError(f"samples = {samples}: must be positive")
    if not runs_a or not runs_b:
        raise DataError("paired bootstrap: each system needs at least one run")
    n = len(runs_a[0])
    if n == 0 or any(len(run) != n for run in (*runs_a, *runs_b)):
        raise DataError(f"paired bootstrap: runs have {sorted({len(run) for run in (*runs_a, *runs_b)})} segments: "
                        "need the same, > 0")
    flat_a = [np.asarray(run, dtype=np.float64).reshape(n, -1) for run in runs_a]
    flat_b = [np.asarray(run, dtype=np.float64).reshape(n, -1) for run in runs_b]
    if len({run.shape[1] for run in (*flat_a, *flat_b)}) > 1:
        raise DataError("paired bootstrap: runs have different statistics per segment")

    def system(runs: Sequence[np.ndarray], drawn: np.ndarray) -> float:
        return statistics.fmean(score(drawn @ run) for run in runs)

    everything = np.ones(n)
    score_a, score_b = system(flat_a, everything), system(flat_b, everything)
    rng = np.random.default_rng(seed)
    deltas = np.empty(samples)
    for i in range(samples):
        drawn = np.bincount(rng.integers(0, n, size=n), minlength=n).astype(np.float64)  # (n,) draw counts
        deltas[i] = system(flat_b, drawn) - system(flat_a, drawn)
    sign = 1.0 if higher_is_better else -1.0
    low, high = np.percentile(deltas, [2.5, 97.5])
    return BootstrapResult(
        metric=metric,
        score_a=score_a,
        score_b=score_b,
        delta=score_b - score_a,
        p_value=float(np.mean(sign * deltas <= 0.0)),
        ci_low=float(low),
        ci_high=float(high),
        samples=samples,
        higher_is_better=higher_is_better,
    )


def paired_bootstrap_means(scores_a: Sequence[float], scores_b: Sequence[float], metric: str, samples: int = 1000,
                           seed: int = 12345) -> BootstrapResult:
    """Paired bootstrap of B against A for a corpus metric that is the mean of per-segment scores
    (CIDEr-D: the mean of per-image CIDEr), resampling segments as :func:`paired_bootstrap` does."""
    a, b = np.asarray(scores_a, dtype=np.float64), np.asarray(scores_b, dtype=np.float64)
    if a.size == 0 or a.shape != b.shape:
        raise DataError(f"systems A and B have {a.size} and {b.size} scores: need the same, > 0")
    return paired_bootstrap_statistics([a], [b], lambda summed: float(summed[0]) / a.size, metric, samples, seed)


def _score(scorer: object, summed: np.ndarray) -> float:
    return float(scorer._compute_score_from_stats(summed.tolist()).score)  # type: ignore[attr-defined]


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof = 1) of one recipe's scores over several seeds.

    A single value has no spread to estimate: its sd is ``nan`` (not 0, which would claim certainty).
    """
    if not values:
        raise ValueError("mean_sd needs at least one value")
    mean = statistics.fmean(values)
    return mean, statistics.stdev(values) if len(values) > 1 else math.nan

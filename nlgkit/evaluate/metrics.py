"""Corpus-level BLEU, chrF and TER, computed by sacrebleu only.

Scores are only comparable across papers when computed the standard way, so nothing here re-implements a
metric: each score comes with sacrebleu's signature (tokeniser, casing, smoothing, version), which is
what should be reported next to the number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.base import Metric

from nlgkit.errors import ConfigError, DataError

METRICS = ("bleu", "chrf", "ter")


def _metric(name: str, lowercase: bool) -> Metric:
    """A sacrebleu metric with its default settings; ``lowercase`` means case-insensitive for all three.

    (sacrebleu's TER alone ignores case by default; here the one flag decides for every metric, and the
    signature's ``case:`` field records the choice.)
    """
    if name == "bleu":
        return BLEU(lowercase=lowercase)
    if name == "chrf":
        return CHRF(lowercase=lowercase)
    if name == "ter":
        return TER(case_sensitive=not lowercase)
    raise ConfigError(f"unknown metric {name!r} (choose from {', '.join(METRICS)})")


def corpus_scores(
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    metrics: Sequence[str] = METRICS,
    lowercase: bool = False,
) -> dict[str, dict[str, Any]]:
    """Score ``hyps`` against one or more reference streams (each as long as ``hyps``).

    Returns ``{metric: {"score", "signature", …}}``; BLEU adds its n-gram counts, totals, precisions,
    brevity penalty and the system/reference lengths.
    """
    if not refs:
        raise DataError("no reference stream given")
    for number, stream in enumerate(refs, start=1):
        if len(stream) != len(hyps):
            raise DataError(
                f"reference stream {number} has {len(stream)} lines but there are {len(hyps)} hypotheses"
            )
    scorers = {name: _metric(name, lowercase) for name in dict.fromkeys(metrics)}  # validate all names first
    if not scorers:
        raise ConfigError(f"no metric given (choose from {', '.join(METRICS)})")
    results: dict[str, dict[str, Any]] = {}
    for name, scorer in scorers.items():
        score = scorer.corpus_score(list(hyps), [list(stream) for stream in refs])
        entry: dict[str, Any] = {"score": float(score.score), "signature": str(scorer.get_signature())}
        if name == "bleu":
            entry.update(
                counts=list(score.counts),
                totals=list(score.totals),
                precisions=list(score.precisions),
                bp=float(score.bp),
                sys_len=int(score.sys_len),
                ref_len=int(score.ref_len),
            )
        results[name] = entry
    return results


def bleu(hyps: Sequence[str], refs_stream: Sequence[str], lowercase: bool = False) -> float:
    """Corpus BLEU against a single reference stream (e.g. for validation during training)."""
    return float(corpus_scores(hyps, [refs_stream], metrics=("bleu",), lowercase=lowercase)["bleu"]["score"])

"""Corpus-level BLEU, chrF and TER, computed by sacrebleu only, and the dispatcher for every other metric.

Scores are only comparable across papers when computed the standard way, so nothing here re-implements a
metric: each score comes with sacrebleu's signature (tokeniser, casing, smoothing, version), which is
what should be reported next to the number. :func:`score_all` adds METEOR (``meteor``), the COCO caption
metrics (``caption``) and vocabulary usage (``vu``), each from its own module.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, cast

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.base import Metric

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.metrics.names import ALL_METRICS, METRICS
from nlgkit.metrics.vocabulary import DEFAULT_EDGES, vocab_report

HIGHER_IS_BETTER = {"bleu": True, "chrf": True, "ter": False}


def _metric(name: str, lowercase: bool, references: list[list[str]] | None = None) -> Metric:
    """A sacrebleu metric with its default settings; ``lowercase`` means case-insensitive for all three.

    (sacrebleu's TER alone ignores case by default; here the one flag decides for every metric, and the
    signature's ``case:`` field records the choice.)
    """
    if name == "bleu":
        return BLEU(lowercase=lowercase, references=references)
    if name == "chrf":
        return CHRF(lowercase=lowercase, references=references)
    if name == "ter":
        return TER(case_sensitive=not lowercase, references=references)
    raise ConfigError(f"unknown metric {name!r} (choose from {', '.join(METRICS)})")


def sacrebleu_metric(name: str, lowercase: bool = False,
                     references: Sequence[Sequence[str]] | None = None) -> Metric:
    """The sacrebleu metric object ``corpus_scores`` uses for ``name`` (e.g. for its sufficient statistics); with
    ``references`` (streams), holding their preprocessed n-grams for every system scored against them."""
    if references is None:
        return _metric(name, lowercase)
    # sacrebleu's type hints leave out the None that its docstrings and code take for a missing reference
    return _metric(name, lowercase, cast("list[list[str]]", variable_references(references)))


def variable_references(streams: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Reference streams with a blank line of a segment that another stream has a reference for as no reference.

    An item with fewer references than the most leaves blank lines in the later streams (COCO images have 5 to 7
    captions), as the caption metrics read them (:func:`nlgkit.metrics.captions.segment_refs`). sacrebleu takes
    a variable number of references as ``None`` only: an empty string is an empty reference, whose length 0 is
    the closest to a short hypothesis (lifting BLEU's brevity penalty) and lowers TER's average reference length.
    A segment whose every reference is blank keeps them: an empty reference (one stream: an empty segment).
    """
    present = [any(line.strip() for line in lines) for lines in zip(*streams, strict=True)]
    return [[None if has and not line.strip() else line for line, has in zip(stream, present, strict=True)]
            for stream in streams]


@functools.lru_cache(maxsize=8)
def scorer_with_references(name: str, lowercase: bool, refs: tuple[tuple[str, ...], ...]) -> Metric:
    """A sacrebleu metric holding ``refs``' preprocessed n-grams (streams), kept for the last 8 reference sets: every
    system scored against the same references (a report's runs of one test set, a bootstrap's resamples, each
    validation of a training run) reuses their tokenising, a third of scoring a system."""
    return sacrebleu_metric(name, lowercase, refs)


@functools.lru_cache(maxsize=64)
def segment_statistics(name: str, lowercase: bool, hyps: tuple[str, ...],
                       refs: tuple[tuple[str, ...], ...]) -> tuple[tuple[Any, ...], ...]:
    """sacrebleu's sufficient statistics of each segment of ``hyps`` (n-gram matches and lengths, edits…), what its
    ``corpus_score`` sums; kept for the last 64 systems, so a report that scores a system and then bootstraps it
    against others tokenises and counts its n-grams once (three times before: a third of a report's time)."""
    scorer = scorer_with_references(name, lowercase, refs)
    scorer._check_corpus_score_args(list(hyps), None)  # sacrebleu's own messages for bad input
    return tuple(tuple(stats) for stats in scorer._extract_corpus_statistics(list(hyps), None))


def score_from_statistics(name: str, lowercase: bool, hyps: Sequence[str],
                          refs: tuple[tuple[str, ...], ...]) -> Any:
    """sacrebleu's score object for ``hyps``, as ``corpus_score`` computes it (summed segment statistics)."""
    stats = segment_statistics(name, lowercase, tuple(hyps), refs)
    return scorer_with_references(name, lowercase, refs)._aggregate_and_compute([list(s) for s in stats])


def check_streams(hyps: Sequence[str], refs: Sequence[Sequence[str]]) -> None:
    """At least one reference stream, each exactly as long as ``hyps``."""
    if not refs:
        raise DataError("no reference stream given")
    for number, stream in enumerate(refs, start=1):
        if len(stream) != len(hyps):
            raise DataError(
                f"reference stream {number} has {len(stream)} lines but there are {len(hyps)} hypotheses"
            )


def reference_streams(refs: Sequence[Sequence[str]]) -> list[list[str]]:
    """Per-item references (one or more each) as the equally long streams sacrebleu scores against.

    An item with fewer references than the most repeats its first one: for BLEU, chrF and TER a duplicate
    reference changes nothing (clipped counts, the closest length and the best match are the same).
    """
    if not refs or any(not item for item in refs):
        raise DataError("every item needs at least one reference")
    width = max(len(item) for item in refs)
    return [[item[k] if k < len(item) else item[0] for item in refs] for k in range(width)]


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
    check_streams(hyps, refs)
    streams = tuple(tuple(stream) for stream in refs)
    scorers = {name: scorer_with_references(name, lowercase, streams)  # validate all names first
               for name in dict.fromkeys(metrics)}
    if not scorers:
        raise ConfigError(f"no metric given (choose from {', '.join(METRICS)})")
    results: dict[str, dict[str, Any]] = {}
    for name, scorer in scorers.items():
        score = score_from_statistics(name, lowercase, hyps, streams)
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


def score_all(
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    metrics: Sequence[str] = METRICS,
    lowercase: bool = False,
    lang: str = "en",
    train_counts: Mapping[str, int] | None = None,
    edges: Sequence[int] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every requested metric of :data:`ALL_METRICS`, in the order asked, against reference streams ``refs``.

    ``meteor`` is METEOR 1.5 for target language ``lang``; ``caption`` the COCO metrics (one image per
    line, its captions across the streams); ``vu`` vocabulary usage, plus rare share and word F1 by
    training-frequency bin (``edges``) when ``train_counts`` (each training word's count) are given.
    Unavailable scores (no java, SPICE) are entries with ``"available": False`` and a reason, never a number.
    """
    names = list(dict.fromkeys(metrics))
    for name in names:
        if name not in ALL_METRICS:
            raise ConfigError(f"unknown metric {name!r} (choose from {', '.join(ALL_METRICS)})")
    if not names:
        raise ConfigError(f"no metric given (choose from {', '.join(ALL_METRICS)})")
    check_streams(hyps, refs)
    sacre = [name for name in names if name in METRICS]
    results = corpus_scores(hyps, refs, metrics=sacre, lowercase=lowercase) if sacre else {}
    if "meteor" in names:
        # lazy, as the caption scores below: pycocoevalcap only where they are asked for (BLEU during a
        # translation run must not need its 101 MB of jars)
        from nlgkit.metrics.meteor import meteor_score

        results["meteor"] = meteor_score(hyps, refs, lang)
    if "caption" in names:
        from nlgkit.metrics.captions import caption_scores, segment_refs  # lazy: see METEOR above

        results["caption"] = caption_scores(hyps, segment_refs(refs))
    if "vu" in names:

        results["vu"] = vocab_report(hyps, refs, train_counts, edges or DEFAULT_EDGES, lowercase)
    return {name: results[name] for name in names}

"""Which words a system uses: vocabulary usage, rare-word share, and word F1 by training frequency.

Shalev et al. report "VU" (vocabulary usage: distinct words in the test output) because fixed random output
layers made captioners use more, and rarer, words; the per-bin figures show where those words fall. Word
precision/recall/F1 by training-frequency bin follow compare-mt (``FreqWordBucketer`` +
``calc_bucketed_matches``): within each sentence a hypothesis word matches at most as many reference
occurrences as there are (clipped counts); a word's bin is its training count; a bin without any match
scores 0 for P, R and F1.

Tokens are whitespace-separated. Give text tokenised like the training vocabulary (``translate
--no-detokenize`` output and the data directory's ``test.{lang}``), or "dog." never matches "dog". A word
missing from the vocabulary file has count 0, which includes words pruned by ``min_freq``.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nlgkit.core.errors import ConfigError
from nlgkit.data.vocab import SPECIALS, Vocabulary

DEFAULT_EDGES: tuple[int, ...] = (1, 2, 3, 4, 5, 10, 100, 1000)  # compare-mt's default bucket cutoffs


def parse_edges(text: str) -> tuple[int, ...]:
    """``"1,2,5,10"`` → (1, 2, 5, 10): positive, strictly increasing bin edges."""
    try:
        edges = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(
            f"--bins {text!r}: expected comma-separated integers such as 1,2,5,10,100"
        ) from None
    check_edges(edges)
    return edges


def check_edges(edges: Sequence[int]) -> None:
    if not edges or edges[0] < 1 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise ConfigError(f"bin edges {list(edges)}: need positive integers in increasing order")


def bin_labels(edges: Sequence[int]) -> list[str]:
    """compare-mt's labels: ``<1``, ``1`` … for one-count bins, ``[5,10)``, and ``>=1000`` for the last."""
    labels = []
    for i, edge in enumerate(edges):
        if i == 0:
            labels.append(f"<{edge}")
        elif edge - 1 == edges[i - 1]:
            labels.append(f"{edge - 1}")
        else:
            labels.append(f"[{edges[i - 1]},{edge})")
    return labels + [f">={edges[-1]}"]


def frequency_bin(count: int, edges: Sequence[int]) -> int:
    """Index of the bin holding a training count: the number of edges ≤ count."""
    return bisect.bisect_right(edges, count)


def train_counts(vocab: Vocabulary, lowercase: bool = False) -> dict[str, int]:
    """Training counts by token, specials left out; with ``lowercase`` the counts of case variants add up."""
    counts = {token: count for token, count in zip(vocab.tokens, vocab.counts, strict=True) if token not in SPECIALS}
    return lowercased(counts) if lowercase else counts


def lowercased(counts: Mapping[str, int]) -> dict[str, int]:
    """Training counts by lowercased word: the counts of a word's case variants add up."""
    merged: Counter[str] = Counter()
    for word, count in counts.items():
        merged[word.lower()] += count
    return dict(merged)


def vocabulary_usage(hyps: Sequence[str]) -> dict[str, int]:
    """Shalev et al.'s VU: the number of distinct words in the output (``score``), with the token count."""
    counts = Counter(word for line in hyps for word in line.split())
    return {"score": len(counts), "tokens": sum(counts.values())}


def rare_share(
    hyps: Sequence[str], counts: Mapping[str, int], edges: Sequence[int] = DEFAULT_EDGES
) -> list[dict]:
    """Per training-frequency bin: output tokens (and distinct words) in it, and their share of all tokens."""
    check_edges(edges)
    tokens = [0] * (len(edges) + 1)
    types: list[set[str]] = [set() for _ in tokens]
    for line in hyps:
        for word in line.split():
            index = frequency_bin(counts.get(word, 0), edges)
            tokens[index] += 1
            types[index].add(word)
    total = sum(tokens)
    return [
        {"bin": label, "tokens": n, "types": len(words), "share": n / total if total else 0.0}
        for label, n, words in zip(bin_labels(edges), tokens, types, strict=True)
    ]


def matched_f1(matches: int, out_tokens: int, ref_tokens: int) -> tuple[float, float, float]:
    """Precision, recall and F1 from clipped matches and occurrence counts; all 0 where nothing matched."""
    if not matches:
        return 0.0, 0.0, 0.0
    precision, recall = matches / out_tokens, matches / ref_tokens
    return precision, recall, 2 * precision * recall / (precision + recall)


def word_matches_by_sentence(
    hyps: Sequence[str], refs: Sequence[str], counts: Mapping[str, int], edges: Sequence[int] = DEFAULT_EDGES
) -> np.ndarray:
    """Per sentence and training-frequency bin: clipped matches, output and reference occurrences, shape
    (sentences, bins, 3). Word F1's sufficient statistics: a bootstrap resamples sentences without recounting."""
    check_edges(edges)
    if len(hyps) != len(refs):
        raise ValueError("hyps and refs differ in length")
    stats = np.zeros((len(hyps), len(edges) + 1, 3), dtype=np.int64)
    for row, (hyp, ref) in enumerate(zip(hyps, refs, strict=True)):
        out_counts, ref_counts = Counter(hyp.split()), Counter(ref.split())
        for word in out_counts.keys() | ref_counts.keys():
            index = frequency_bin(counts.get(word, 0), edges)
            stats[row, index] += (min(out_counts[word], ref_counts[word]), out_counts[word], ref_counts[word])
    return stats


def word_f1_by_bin(
    hyps: Sequence[str], refs: Sequence[str], counts: Mapping[str, int], edges: Sequence[int] = DEFAULT_EDGES
) -> list[dict]:
    """compare-mt's word precision, recall and F1 per training-frequency bin against one reference stream."""
    totals = word_matches_by_sentence(hyps, refs, counts, edges).sum(axis=0)
    rows = []
    for label, (both, out_n, ref_n) in zip(bin_labels(edges), totals.tolist(), strict=True):
        precision, recall, f1 = matched_f1(both, out_n, ref_n)
        rows.append(
            {
                "bin": label,
                "matches": both,
                "ref": ref_n,
                "out": out_n,
                "precision": precision,
                "recall": recall,
                "f1": f1,
            }
        )
    return rows


def vocab_report(
    hyps: Sequence[str],
    ref_streams: Sequence[Sequence[str]] = (),
    counts: Mapping[str, int] | None = None,
    edges: Sequence[int] = DEFAULT_EDGES,
    lowercase: bool = False,
) -> dict[str, Any]:
    """VU and, given the training counts (:func:`train_counts` of a vocabulary, or the words' counts a record
    keeps), rare share and word F1 (against the first reference stream, since compare-mt's measure is
    single-reference)."""
    if lowercase:
        hyps = [line.lower() for line in hyps]
        ref_streams = [[line.lower() for line in stream] for stream in ref_streams]
    report: dict[str, Any] = vocabulary_usage(hyps)
    report["signature"] = f"distinct whitespace tokens|case:{'lc' if lowercase else 'mixed'}"
    if counts is not None:
        if lowercase:
            counts = lowercased(counts)
        report["rare"] = rare_share(hyps, counts, edges)
        if ref_streams:
            report["word_f1"] = word_f1_by_bin(hyps, ref_streams[0], counts, edges)
            report["word_f1_reference"] = 1
    return report

"""What ``nlgkit embed report`` measures of a table: vocabulary coverage, hubness and nearest neighbours.

Hubness (Radovanović et al. 2010), the problem Hirasawa & Komachi debias against: N_k(x) counts the k-nearest-
neighbour lists (cosine similarity, k = 10) that x appears in. Its mean is exactly k, so a skewed distribution
means a few "hubs" are everybody's neighbours while many words are nobody's ("anti-hubs", N_k = 0). Reported:
the skewness E[(N_k − k)³] / σ³ of N_k, the share of hubs, defined here as words with N_k > 2k (in more than
twice as many lists as the average word; :data:`HUB_FACTOR`), the share of anti-hubs, and the largest hubs.
The special tokens' rows (a table extracted from a model has them) are left out, as neighbours and as words, as
``--neighbours`` and ``nlgkit evaluate`` leave them out (:func:`~nlgkit.wordvectors.knn.special_rows`): they are
not words of the language, and <pad>'s zero row would count as an anti-hub.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from rich.progress import Progress
from torch import Tensor

from nlgkit.core.errors import DataError
from nlgkit.data.vocab import SPECIALS, Vocabulary
from nlgkit.wordvectors.knn import nearest_neighbours, special_rows, top_neighbours

HUB_FACTOR = 2  # a hub occurs in more than HUB_FACTOR · k nearest-neighbour lists


def k_occurrence(vectors: Tensor, k: int = 10, device: str | torch.device = "cpu",
                 progress: Progress | None = None) -> Tensor:
    """N_k (V,) int64: in how many of the other words' k-nearest-neighbour lists each word appears."""
    neighbours, _ = nearest_neighbours(vectors, k, device=device, progress=progress)
    return torch.bincount(neighbours.flatten(), minlength=vectors.size(0))


def skewness(values: Tensor) -> float:
    """The (population) skewness E[(x − μ)³] / σ³; 0 for a constant."""
    x = values.double()
    centred = x - x.mean()
    sigma = centred.pow(2).mean().sqrt()
    return 0.0 if sigma == 0 else float(centred.pow(3).mean() / sigma**3)


@dataclass(frozen=True)
class Hubness:
    """The k-occurrence figures of one table."""

    k: int
    words: int
    skewness: float
    hub_share: float  # share of words with N_k > HUB_FACTOR · k
    antihub_share: float  # share of words with N_k = 0
    max_occurrence: int
    top_hubs: list[tuple[str, int]]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hub_threshold": f"N_k > {HUB_FACTOR * self.k}",
                "top_hubs": [[word, count] for word, count in self.top_hubs]}


def hubness(vectors: Tensor, words: Sequence[str], k: int = 10, device: str | torch.device = "cpu",
            progress: Progress | None = None, top: int = 10) -> Hubness:
    """Skewness of N_k, hub and anti-hub shares and the ``top`` largest hubs of a table, over its words other than
    the special tokens (which are nobody's neighbours either)."""
    keep = ~special_rows(words)
    if not bool(keep.all()):
        vectors, words = vectors[keep], [word for word, kept in zip(words, keep.tolist(), strict=True) if kept]
    counts = k_occurrence(vectors, k, device, progress)
    total = counts.numel()
    best = torch.topk(counts, min(top, total))
    return Hubness(k=k, words=total, skewness=skewness(counts),
                   hub_share=float((counts > HUB_FACTOR * k).sum()) / total,
                   antihub_share=float((counts == 0).sum()) / total, max_occurrence=int(counts.max()),
                   top_hubs=[(words[i], int(c)) for i, c in zip(best.indices.tolist(), best.values.tolist(),
                                                              strict=True)])


@dataclass(frozen=True)
class Coverage:
    """How much of a vocabulary (its specials left out) a table has: types and running tokens (counts)."""

    types: int
    types_found: int
    tokens: int
    tokens_found: int
    missing: list[str]  # the most frequent words the table lacks

    @property
    def type_share(self) -> float:
        return self.types_found / self.types if self.types else 0.0

    @property
    def token_share(self) -> float:
        return self.tokens_found / self.tokens if self.tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "type_share": self.type_share, "token_share": self.token_share}


def coverage(known: dict[str, int] | set[str], vocab: Vocabulary, show_missing: int = 10) -> Coverage:
    """Types and tokens (training counts) of ``vocab`` whose word is ``known`` to the table."""
    entries = [(token, count) for token, count in zip(vocab.tokens, vocab.counts, strict=True) if token not in SPECIALS]
    found = [token in known for token, _ in entries]
    missing = [token for (token, _), hit in zip(entries, found, strict=True) if not hit]  # the vocabulary is by count
    return Coverage(types=len(entries), types_found=sum(found), tokens=sum(count for _, count in entries),
                    tokens_found=sum(count for (_, count), hit in zip(entries, found, strict=True) if hit),
                    missing=missing[:show_missing])


def neighbours_of(vectors: Tensor, words: Sequence[str], index: dict[str, int], queries: Sequence[str],
                  k: int = 10) -> dict[str, list[tuple[str, float]]]:
    """The ``k`` words nearest to each query by cosine similarity, with their similarities, the special tokens'
    rows (a table extracted from a model has them) never among them: ``evaluate neighbours``'s words, by the same
    :func:`top_neighbours` (at most all the other words)."""
    unknown = [query for query in queries if query not in index]
    if unknown:
        raise DataError(f"--neighbours {unknown[0]!r}: not in the table")
    exclude = special_rows(words)
    k = min(k, len(words) - int(exclude.sum()) - 1)
    if not queries or k < 1:
        return {query: [] for query in queries}
    cosines, found = top_neighbours(vectors, torch.tensor([index[query] for query in queries]), k, exclude)  # (n, k)
    return {query: [(words[i], c) for i, c in zip(ids, values, strict=True)]
            for query, ids, values in zip(queries, found.tolist(), cosines.tolist(), strict=True)}

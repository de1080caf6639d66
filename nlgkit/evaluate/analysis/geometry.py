"""Neighbourhood geometry against frequency rank (Tokarchuk & Niculae, Fig. 2).

For each word: the cosine to its 1st and 5th nearest neighbour and those neighbours' frequency ranks,
then aggregated over bins of the word's own rank. In pre-trained spaces rare words sit almost on top of
their (also rare) nearest neighbour; in random spaces the cosine does not depend on rank. Rank 1 is the
most frequent non-special word; equal counts keep vocabulary order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from nlgkit.core.errors import NlgkitError
from nlgkit.data.vocab import Vocabulary
from nlgkit.evaluate.analysis.vectors import special_mask
from nlgkit.wordvectors.knn import DEFAULT_BUDGET, top_neighbours

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass
class Geometry:
    """Per word, in rank order: ranks (n,); cosines and neighbour_ranks (n, len(orders))."""

    orders: tuple[int, ...]
    ranks: Tensor
    cosines: Tensor
    neighbour_ranks: Tensor


def frequency_ranks(vocab: Vocabulary) -> Tensor:
    """(V,) long: 1 for the most frequent non-special word, … n for the rarest; 0 for the specials."""
    specials = special_mask(vocab)
    counts = torch.tensor(vocab.counts, dtype=torch.float64)
    counts[specials] = -1.0  # after every real word
    order = torch.sort(-counts, stable=True).indices  # (V,) most frequent first
    ranks = torch.zeros(len(vocab), dtype=torch.long)
    ranks[order] = torch.arange(1, len(vocab) + 1)
    ranks[specials] = 0
    return ranks


def neighbour_geometry(matrix: Tensor, vocab: Vocabulary, orders: tuple[int, ...] = (1, 5),
                       budget_bytes: int = DEFAULT_BUDGET) -> Geometry:
    """The cosine to, and frequency rank of, each word's n-th nearest neighbour for n in ``orders``."""
    ranks = frequency_ranks(vocab)  # (V,)
    by_rank = torch.sort(ranks).indices
    words = by_rank[ranks[by_rank] > 0]  # (n,) vocabulary rows, most frequent first
    if words.numel() <= max(orders):
        raise NlgkitError(f"{words.numel()} words: too few for a {max(orders)}-th nearest neighbour")
    values, indices = top_neighbours(matrix, words, max(orders), special_mask(vocab), budget_bytes)  # (n, k)
    columns = torch.tensor([order - 1 for order in orders])
    cosines = values.cpu()[:, columns]  # (n, len(orders))
    neighbour_ranks = ranks[indices.cpu()[:, columns]]  # (n, len(orders))
    return Geometry(tuple(orders), ranks[words], cosines, neighbour_ranks)


def rank_bins(words: int, bins: int | None = None, bin_size: int | None = None) -> list[tuple[int, int]]:
    """Inclusive rank ranges: ``bins`` (nearly) equal bins over 1..words, or blocks of ``bin_size``."""
    if bin_size is not None:
        if bin_size < 1:
            raise ValueError("bin_size must be positive")
        return [(lo, min(lo + bin_size - 1, words)) for lo in range(1, words + 1, bin_size)]
    count = min(bins or 10, words)
    if count < 1:
        raise ValueError("bins must be positive")
    edges = [1 + round(i * words / count) for i in range(count + 1)]
    return [(edges[i], edges[i + 1] - 1) for i in range(count)]


def _stats(values: Tensor) -> dict[str, float]:
    values = values.double()
    q25, median, q75 = torch.quantile(values, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).tolist()
    return {"mean": float(values.mean()), "q25": q25, "median": median, "q75": q75}


def bin_geometry(geometry: Geometry, bins: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Per rank bin: word count, and mean/quartiles of cos@n and of the n-th neighbour's rank."""
    rows = []
    for lo, hi in bins:
        inside = (geometry.ranks >= lo) & (geometry.ranks <= hi)  # (n,)
        row: dict[str, Any] = {"ranks": [lo, hi], "words": int(inside.sum())}
        if row["words"]:
            for column, order in enumerate(geometry.orders):
                row[f"cos@{order}"] = _stats(geometry.cosines[inside, column])
                row[f"rank@{order}"] = _stats(geometry.neighbour_ranks[inside, column].float())
        rows.append(row)
    return rows


def geometry_figure(results: dict[str, list[dict[str, Any]]], orders: tuple[int, ...]) -> Figure:
    """Two panels over bin centres: cosine to the n-th neighbour, and its rank; shaded 25–75% band."""
    from matplotlib.figure import Figure  # imported here: only plots need matplotlib

    figure = Figure(figsize=(10, 4))
    cos_axes, rank_axes = figure.subplots(1, 2)
    for name, rows in results.items():
        rows = [row for row in rows if row["words"]]
        centres = [(row["ranks"][0] + row["ranks"][1]) / 2 for row in rows]
        for order in orders:
            for axes, key in ((cos_axes, f"cos@{order}"), (rank_axes, f"rank@{order}")):
                line, = axes.plot(centres, [row[key]["median"] for row in rows], label=f"{name} n={order}")
                low, high = [row[key]["q25"] for row in rows], [row[key]["q75"] for row in rows]
                axes.fill_between(centres, low, high, color=line.get_color(), alpha=0.2)
    cos_axes.set_ylabel("cosine to n-th nearest neighbour")
    rank_axes.set_ylabel("frequency rank of n-th nearest neighbour")
    for axes in (cos_axes, rank_axes):
        axes.set_xlabel("frequency rank (bin centre)")
        axes.legend(fontsize="small")
    return figure

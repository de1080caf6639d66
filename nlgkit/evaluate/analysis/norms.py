"""Target-vector norm against training frequency (Shalev et al., Section 3.2 and Fig. 2).

Learned output layers encode frequency in the length of each word's vector; Shalev et al. report
Spearman correlations of 0.76–0.93 between ‖w_j‖ and the count of word j, and none for fixed random
vectors. Words counted: non-special vocabulary entries with a training count > 0 (specials carry count 0
and are never predicted in the same way; a zero count gives no frequency to rank). The sign of ρ is kept:
a negative ρ means rarer words have longer vectors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nlgkit.data.vocab import Vocabulary
from nlgkit.evaluate.analysis.vectors import special_mask

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass
class NormFrequency:
    """ρ and its p-value (None when undefined: fewer than 3 words or a constant side), plus the data."""

    rho: float | None
    pvalue: float | None
    words: int
    norms: list[float]
    counts: list[int]

    def summary(self) -> dict[str, float | int | None]:
        return {"rho": self.rho, "pvalue": self.pvalue, "words": self.words}


def spearman(x: list[float], y: list[float]) -> tuple[float | None, float | None]:
    """Spearman ρ and p-value, or (None, None) where it is undefined (NaN never reaches JSON)."""
    from scipy.stats import spearmanr  # lazy: scipy.stats takes a second to import, and only ρ needs it

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None, None
    result = spearmanr(x, y)
    rho, pvalue = float(result.statistic), float(result.pvalue)
    return (None, None) if math.isnan(rho) else (rho, pvalue)


def norm_frequency(matrix: Tensor, vocab: Vocabulary) -> NormFrequency:
    """Spearman between row L2 norms of matrix (V, d) and ``vocab.counts`` over counted non-special words."""
    counts = torch.tensor(vocab.counts)  # (V,)
    keep = ~special_mask(vocab) & (counts > 0)  # (V,)
    norms = matrix.detach().float().norm(dim=1).cpu()[keep].tolist()
    kept_counts = counts[keep].tolist()
    rho, pvalue = spearman(norms, [float(c) for c in kept_counts])
    return NormFrequency(rho, pvalue, len(norms), norms, kept_counts)


def norm_figure(results: dict[str, NormFrequency]) -> Figure:
    """One scatter per vector set: ‖w‖ against training count, log x-axis (Shalev et al., Fig. 2)."""
    from matplotlib.figure import Figure  # imported here: only plots need matplotlib

    figure = Figure(figsize=(5 * max(1, len(results)), 4))
    for position, (name, result) in enumerate(results.items(), start=1):
        axes = figure.add_subplot(1, len(results), position)
        axes.scatter(result.counts, result.norms, s=4, alpha=0.4, linewidths=0)
        axes.set_xscale("log")
        axes.set_xlabel("training frequency")
        axes.set_ylabel("vector L2 norm")
        rho = "undefined" if result.rho is None else f"{result.rho:.2f}"
        axes.set_title(f"{name}: Spearman ρ = {rho} ({result.words} words)", fontsize="medium")
    return figure

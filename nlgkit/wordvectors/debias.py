"""Debiasing pre-trained word vectors before they initialise a model (Hirasawa & Komachi 2019, §4).

All-but-the-Top (Mu & Viswanath 2018), Hirasawa & Komachi's eqs. 38-40: subtract the mean of all words, then
each vector's projections on the top D principal components of the centred table (they use D = 3); the
common directions that every word shares (frequency, mostly) go, and with them much of the hubness.

Localized centering (Hara et al. 2015), their eqs. 36-37: x̂ = x − c_k(x), c_k(x) the mean of the k nearest
neighbours of x by cosine similarity (x itself excluded; k = 10), averaged over the original vectors as in
Hirasawa & Komachi's code. Hara et al. assume unit-length vectors and score neighbours with
sim(x, q) − sim(x, c_k(x))^γ, leaving the vectors alone; Hirasawa & Komachi shift the vectors themselves, as
here, so that the shifted table can initialise an embedding. ``unit`` normalises the rows first (Hara et al.'s
setting): on GloVe 6B 50-d (first 20,000 words) it lowers the skewness of N_10 from 1.54 to 0.77, where the
paper's shift of the raw vectors raises it to 2.19 (it still cuts the share of hubs, 9.7 % to 2.9 %).

Both run in blocks of rows (covariance and projections for ABTT, :func:`nlgkit.wordvectors.knn.nearest_neighbours`
for LC), so a 400,000 × 300 float32 table (480 MB) is debiased in a few times its own memory, never a V × V matrix.

LC leaves the special tokens' rows (``exclude``: :func:`nlgkit.wordvectors.knn.special_rows` of the table's words)
out of every neighbour list, as hubness and ``--neighbours`` do, and leaves those rows unshifted: they are not words
(the paper debiases pre-trained tables, which have none), and <pad>'s zero row must stay zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from rich.progress import Progress
from torch import Tensor

from nlgkit.core.devices import select_device
from nlgkit.core.errors import ConfigError
from nlgkit.wordvectors.knn import block_rows, nearest_neighbours, row_blocks

DEBIAS_METHODS = ("abtt", "lc")
ROWS_PER_BLOCK = 65_536  # rows per step of the linear passes (mean, covariance, projections)


def all_but_the_top(vectors: Tensor, components: int = 3, device: str | torch.device = "cpu",
                    progress: Progress | None = None) -> Tensor:
    """x' = x − mean; x̂ = x' − Σ_{i≤D} (u_iᵀ x') u_i, u_i the top ``components`` principal directions of the
    centred table (eigenvectors of its covariance, accumulated block by block in float64)."""
    total, dim = vectors.shape
    if not 0 <= components < dim:
        raise ConfigError(f"--components {components}: expected 0 to {dim - 1} for {dim}-dimensional vectors")
    device = select_device(device, "--device")
    mean = torch.zeros(dim, dtype=torch.float64, device=device)
    for rows in row_blocks(total, ROWS_PER_BLOCK, "mean", progress):
        mean += vectors[rows].to(device, torch.float64).sum(0)
    mean /= total
    scatter = torch.zeros(dim, dim, dtype=torch.float64, device=device)
    for rows in row_blocks(total, ROWS_PER_BLOCK, "covariance", progress):
        centred = vectors[rows].to(device, torch.float64) - mean  # (block, e)
        scatter += centred.T @ centred
    _, eigenvectors = torch.linalg.eigh(scatter)  # ascending eigenvalues
    top = eigenvectors[:, dim - components:].flip(1)  # (e, D), largest first
    out = torch.empty(total, dim, dtype=torch.float32)
    for rows in row_blocks(total, ROWS_PER_BLOCK, "projections", progress):
        centred = vectors[rows].to(device, torch.float64) - mean
        out[rows] = (centred - (centred @ top) @ top.T).float().cpu()
    return out


def localized_centering(vectors: Tensor, k: int = 10, device: str | torch.device = "cpu",
                        progress: Progress | None = None, block: int = 0, unit: bool = False,
                        neighbours: Tensor | None = None, exclude: Tensor | None = None) -> Tensor:
    """x̂ = x − (1/k) Σ_{x' ∈ kNN(x)} x': each vector minus the mean of its ``k`` nearest neighbours (cosine
    similarity, itself and the ``exclude`` rows left out; those rows are not shifted); the neighbours' original
    vectors are averaged (with ``unit``, every vector is first scaled to unit length). ``neighbours`` (V, k), when
    given, are those of :func:`~nlgkit.wordvectors.knn.nearest_neighbours` with the same ``exclude``, computed
    before (hubness measures them too)."""
    if neighbours is None:
        neighbours, _ = nearest_neighbours(vectors, k, block=block, device=device, progress=progress,
                                           exclude=exclude)  # (V, k)
    source = F.normalize(vectors.float(), dim=1) if unit else vectors.float()
    out = torch.empty_like(source)
    for rows in row_blocks(source.size(0), block_rows(k * source.size(1), 1 << 28), "centring", progress):
        out[rows] = source[rows] - source[neighbours[rows]].mean(1)
    if exclude is not None:
        out[exclude] = source[exclude]
    return out


def debias(vectors: Tensor, method: str, components: int = 3, k: int = 10, device: str | torch.device = "cpu",
           progress: Progress | None = None, unit: bool = False, exclude: Tensor | None = None) -> Tensor:
    """``abtt`` (:func:`all_but_the_top`, ``components``) or ``lc`` (:func:`localized_centering`, ``k``,
    ``unit``, ``exclude``: the special tokens' rows)."""
    if method == "abtt":
        return all_but_the_top(vectors, components, device, progress)
    if method == "lc":
        return localized_centering(vectors, k, device, progress, unit=unit, exclude=exclude)
    raise ConfigError(f"--method {method!r}: expected {' or '.join(DEBIAS_METHODS)}")

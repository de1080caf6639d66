"""Cosine similarity without a V×V matrix: rows are compared in chunks sized by a memory budget.

With V = 50k a full similarity matrix is 10 GB of float32; a chunk of rows against all V columns stays
within ``budget_bytes`` (64 MiB by default), so every analysis runs on a laptop as well as on a GPU.
"""

from __future__ import annotations

import torch
from torch import Tensor

DEFAULT_BUDGET = 64 * 2**20  # bytes of one (chunk, V) similarity block


def unit_rows(matrix: Tensor, eps: float = 1e-12) -> Tensor:
    """(V, d) → (V, d) rows divided by their L2 norm; an all-zero row (the padding embedding) stays zero."""
    return matrix / matrix.norm(dim=1, keepdim=True).clamp_min(eps)


def chunk_rows(columns: int, budget_bytes: int = DEFAULT_BUDGET) -> int:
    """How many rows of a (rows, columns) float32 block fit in the budget (at least one)."""
    return max(1, budget_bytes // (4 * max(1, columns)))


def top_neighbours(matrix: Tensor, rows: Tensor, k: int, exclude: Tensor | None = None,
                   budget_bytes: int = DEFAULT_BUDGET) -> tuple[Tensor, Tensor]:
    """The k most cosine-similar rows of ``matrix`` to each row in ``rows``, never the row itself.

    matrix (V, d); rows (n,) indices; exclude (V,) bool columns that may never be neighbours (specials).
    Returns cosines (n, k) in descending order and their indices (n, k). Ties keep torch.topk's order.
    """
    unit = unit_rows(matrix.float())  # (V, d)
    size = unit.size(0)
    banned = exclude.to(unit.device) if exclude is not None else torch.zeros(size, dtype=torch.bool,
                                                                             device=unit.device)
    available = size - int(banned.sum())
    if k < 1 or k > available - 1:
        raise ValueError(f"k = {k}: need 1 <= k <= {available - 1} (candidate rows minus the query)")
    rows = rows.to(unit.device)
    values, indices = [], []
    step = chunk_rows(size, budget_bytes)
    for start in range(0, rows.numel(), step):
        block_rows = rows[start:start + step]  # (c,)
        sims = unit[block_rows] @ unit.t()  # (c, V)
        sims[:, banned] = float("-inf")
        sims[torch.arange(block_rows.numel(), device=unit.device), block_rows] = float("-inf")  # not itself
        top = sims.topk(k, dim=1)
        values.append(top.values)
        indices.append(top.indices)
    if not values:
        empty = unit.new_zeros((0, k))
        return empty, empty.long()
    return torch.cat(values), torch.cat(indices)


def pair_cosines(matrix: Tensor, left: Tensor, right: Tensor) -> Tensor:
    """Cosine of row left[i] with row right[i]: (n,) for index tensors (n,); O(n·d) memory."""
    unit = unit_rows(matrix.float())
    return (unit[left.to(unit.device)] * unit[right.to(unit.device)]).sum(dim=1)

"""k nearest neighbours by cosine similarity, in blocks of rows: of every row of a table, for localized centering
(:mod:`nlgkit.wordvectors.debias`) and hubness (:mod:`nlgkit.wordvectors.hubness`), and of some query rows, for
``embed report --neighbours`` and the analyses of ``nlgkit evaluate`` (one :func:`top_neighbours` for both, so that
they list the same words). Special-token rows (:func:`special_rows`) are never anybody's neighbour in any of them:
a table extracted from a model has them, and they are not words of the language.

A 400,000-word table would need a 640 GB similarity matrix; each block here holds only ``rows × V`` scores
(:data:`BLOCK_BYTES` by default), keeps their ``torch.topk`` and moves on, so memory stays at the table, one
normalised copy of it and one block. The rich progress bar is shown on a terminal only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import Tensor

from nlgkit.core.devices import select_device
from nlgkit.core.errors import ConfigError
from nlgkit.data.vocab import SPECIALS

BLOCK_BYTES = 256 * 2**20  # similarity scores held at once (one block of rows against the whole table)
DEFAULT_BUDGET = 64 * 2**20  # the same for a few query rows (an analysis runs on a laptop as well as on a GPU)


def progress_bar(show: bool = True, console: Console | None = None) -> Progress:
    """A transient rich progress bar on stderr (or ``console``), hidden when ``show`` is false or that is not a
    terminal."""
    console = console or Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,}"),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                    disable=not (show and console.is_terminal), transient=True,
                    redirect_stdout=False)  # stdout stays stdout (rich would move it to this stderr console)


def row_blocks(rows: int, size: int, description: str, progress: Progress | None) -> Iterator[slice]:
    """Slices of ``size`` rows covering ``rows``, advancing a ``progress`` task (rows done) as they are used."""
    task = progress.add_task(description, total=rows) if progress is not None else None
    for start in range(0, rows, size):
        yield slice(start, min(start + size, rows))
        if progress is not None and task is not None:
            progress.update(task, advance=min(size, rows - start))
    if progress is not None and task is not None:
        progress.remove_task(task)


def block_rows(total: int, budget: int = BLOCK_BYTES) -> int:
    """How many rows of float32 scores against ``total`` columns fit in ``budget`` bytes (at least one)."""
    return max(1, budget // (4 * max(total, 1)))


def nearest_neighbours(vectors: Tensor, k: int, block: int = 0, device: str | torch.device = "cpu",
                       progress: Progress | None = None, exclude: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The ``k`` nearest neighbours of every row by cosine similarity, itself and the ``exclude`` rows ((V,) bool:
    :func:`special_rows`) never among them: indices (V, k) int64 and similarities (V, k) float32, most similar
    first. ``block`` rows are scored at a time (0: as many as :data:`BLOCK_BYTES` allows); the result does not
    depend on it."""
    total = vectors.size(0)
    candidates = total - (int(exclude.sum()) if exclude is not None else 0)
    left_out = " (special tokens left out)" if candidates < total else ""
    if candidates < 2:
        raise ConfigError(f"a table of {candidates} word{'s' * (candidates != 1)}{left_out} has no nearest "
                          f"neighbours (k = {k}): at least 2 words are needed")
    if not 0 < k < candidates:
        raise ConfigError(f"--k {k}: expected 1 to {candidates - 1} for a table of {candidates:,} words{left_out}")
    device = select_device(device, "--device")
    banned = exclude.to(device) if exclude is not None and bool(exclude.any()) else None
    unit = F.normalize(vectors.float().to(device), dim=1)  # (V, e)
    size = block or block_rows(total, BLOCK_BYTES if device.type == "cpu" else 8 * BLOCK_BYTES)  # GPUs: larger
    indices = torch.empty(total, k, dtype=torch.long)
    scores = torch.empty(total, k)
    for rows in row_blocks(total, size, f"{k} nearest neighbours", progress):
        sims = unit[rows] @ unit.T  # (block, V)
        own = torch.arange(rows.start, rows.stop, device=device)
        sims[own - rows.start, own] = float("-inf")  # a word is not its own neighbour
        if banned is not None:
            sims[:, banned] = float("-inf")
        best = torch.topk(sims, k, dim=1)
        indices[rows], scores[rows] = best.indices.cpu(), best.values.cpu()
    return indices, scores


def unit_rows(matrix: Tensor, eps: float = 1e-12) -> Tensor:
    """(V, d) → (V, d) rows divided by their L2 norm; an all-zero row (the padding embedding) stays zero."""
    return matrix / matrix.norm(dim=1, keepdim=True).clamp_min(eps)


def special_rows(words: Sequence[str]) -> Tensor:
    """(V,) bool, True for the rows of <unk> <pad> <s> </s>: never anybody's neighbour."""
    return torch.tensor([word in SPECIALS for word in words], dtype=torch.bool)


def top_neighbours(matrix: Tensor, rows: Tensor, k: int, exclude: Tensor | None = None,
                   budget_bytes: int = DEFAULT_BUDGET) -> tuple[Tensor, Tensor]:
    """The k most cosine-similar rows of ``matrix`` to each row in ``rows``, never the row itself.

    matrix (V, d); rows (n,) indices; exclude (V,) bool columns that may never be neighbours (specials:
    :func:`special_rows`). Returns cosines (n, k) in descending order and their indices (n, k). Ties keep
    torch.topk's order.
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
    step = block_rows(size, budget_bytes)
    for start in range(0, rows.numel(), step):
        chunk = rows[start:start + step]  # (c,)
        sims = unit[chunk] @ unit.t()  # (c, V)
        sims[:, banned] = float("-inf")
        sims[torch.arange(chunk.numel(), device=unit.device), chunk] = float("-inf")  # not itself
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

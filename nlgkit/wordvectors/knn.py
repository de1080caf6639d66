"""k nearest neighbours by cosine similarity over a whole table, in blocks of rows, for localized centering
(:mod:`nlgkit.wordvectors.debias`) and hubness (:mod:`nlgkit.wordvectors.hubness`).

A 400,000-word table would need a 640 GB similarity matrix; each block here holds only ``rows × V`` scores
(:data:`BLOCK_BYTES` by default), keeps their ``torch.topk`` and moves on, so memory stays at the table, one
normalised copy of it and one block. The rich progress bar is shown on a terminal only.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import Tensor

from nlgkit.core.devices import select_device
from nlgkit.core.errors import ConfigError

BLOCK_BYTES = 256 * 2**20  # similarity scores held at once (one block of rows against the whole table)


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
                       progress: Progress | None = None) -> tuple[Tensor, Tensor]:
    """The ``k`` nearest neighbours of every row by cosine similarity, itself excluded: indices (V, k) int64
    and similarities (V, k) float32, most similar first. ``block`` rows are scored at a time (0: as many as
    :data:`BLOCK_BYTES` allows); the result does not depend on it."""
    total = vectors.size(0)
    if total < 2:
        raise ConfigError(f"a table of {total} word{'s' * (total != 1)} has no nearest neighbours (k = {k}): "
                          "at least 2 words are needed")
    if not 0 < k < total:
        raise ConfigError(f"--k {k}: expected 1 to {total - 1} for a table of {total:,} words")
    device = select_device(device, "--device")
    unit = F.normalize(vectors.float().to(device), dim=1)  # (V, e)
    size = block or block_rows(total, BLOCK_BYTES if device.type == "cpu" else 8 * BLOCK_BYTES)  # GPUs: larger
    indices = torch.empty(total, k, dtype=torch.long)
    scores = torch.empty(total, k)
    for rows in row_blocks(total, size, f"{k} nearest neighbours", progress):
        sims = unit[rows] @ unit.T  # (block, V)
        own = torch.arange(rows.start, rows.stop, device=device)
        sims[own - rows.start, own] = float("-inf")  # a word is not its own neighbour
        best = torch.topk(sims, k, dim=1)
        indices[rows], scores[rows] = best.indices.cpu(), best.values.cpu()
    return indices, scores

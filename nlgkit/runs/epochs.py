"""The per-epoch checkpoints of a run: ``checkpoints/epoch_NNN/``, which ones are kept, and how to list them.

``best`` and ``last`` are one checkpoint each; checkpoint averaging (``nlgkit average --last N | --best N``)
needs the weights of several epochs. After each validated epoch the trainer writes the epoch's weights and
metadata (no training state) to ``checkpoints/epoch_NNN`` and :func:`prune_epoch_checkpoints` keeps those of
the last ``train.keep_epochs`` epochs and of the ``train.keep_epochs`` best ones by the task's validation
metric (so at most twice that many; usually fewer, as the best epochs are often recent ones).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from nlgkit.core.errors import CheckpointError
from nlgkit.runs.checkpoint import META_FILE, find_checkpoint, load_meta

EPOCH_PATTERN = re.compile(r"^epoch_(\d+)$")


@dataclass(frozen=True)
class EpochCheckpoint:
    """One kept epoch: its directory, number and validation score (``metric``; None when it has none)."""

    path: Path
    epoch: int
    score: float | None


def epoch_dir(run_dir: Path, epoch: int) -> Path:
    """Where the checkpoint of ``epoch`` goes."""
    return Path(run_dir) / "checkpoints" / f"epoch_{epoch:03d}"


def epoch_checkpoints(run_dir: Path, metric: str) -> list[EpochCheckpoint]:
    """The run's complete epoch checkpoints in epoch order, each with its score under ``metric``."""
    root = Path(run_dir) / "checkpoints"
    found = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        match = EPOCH_PATTERN.match(path.name)
        checkpoint = find_checkpoint(path) if match is not None else None
        if match is None or checkpoint is None:
            continue
        found.append(EpochCheckpoint(path, int(match.group(1)), _score(checkpoint, metric)))
    return sorted(found, key=lambda c: c.epoch)


def _score(checkpoint: Path, metric: str) -> float | None:
    """The validation score under ``metric`` (None: not recorded) of a checkpoint directory as found by
    :func:`find_checkpoint`; a meta.json that records it as something other than a number is an error naming the
    file, since the epochs cannot be ranked."""
    metrics = load_meta(checkpoint).get("metrics", {})
    meta = checkpoint / META_FILE
    if not isinstance(metrics, dict):
        raise CheckpointError(f"{meta}: metrics = {metrics!r}: not a table of scores")
    score = metrics.get(metric)
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise CheckpointError(f"{meta}: metrics.{metric} = {score!r}: not a number")
    return None if score is None else float(score)


def last_epochs(checkpoints: list[EpochCheckpoint], n: int) -> list[EpochCheckpoint]:
    """The ``n`` most recent epochs (oldest first)."""
    return checkpoints[-n:] if n > 0 else []


def best_epochs(checkpoints: list[EpochCheckpoint], n: int) -> list[EpochCheckpoint]:
    """The ``n`` epochs with the highest score (best first; a tie goes to the later epoch)."""
    scored = [c for c in checkpoints if c.score is not None]
    return sorted(scored, key=lambda c: (c.score, c.epoch), reverse=True)[:n] if n > 0 else []


def select_epochs(run_dir: Path, metric: str, *, last: int = 0, best: int = 0) -> list[EpochCheckpoint]:
    """``last`` most recent or ``best`` best epoch checkpoints (exactly one of them positive); fewer kept than
    asked for is an error naming what the run has and the recipe key that keeps more, and so are last epochs
    that were not all kept (the last ``last`` epochs, never an older best one in place of a pruned one)."""
    if (last > 0) == (best > 0):
        raise CheckpointError("give exactly one of --last N and --best N (N >= 1)")
    checkpoints = epoch_checkpoints(run_dir, metric)
    wanted = last or best
    chosen = last_epochs(checkpoints, last) if last else best_epochs(checkpoints, best)
    if best and checkpoints and all(c.score is None for c in checkpoints):
        raise CheckpointError(f"{Path(run_dir) / 'checkpoints'}: no epoch checkpoint has a validation {metric} "
                              "(the run validated every N updates, not at epochs' ends): use --last N")
    have = ", ".join(str(c.epoch) for c in checkpoints) or "none"
    if len(chosen) < wanted:
        raise CheckpointError(f"{Path(run_dir) / 'checkpoints'}: {wanted} epoch checkpoints wanted, only "
                              f"{len(chosen)} kept (epochs kept: {have}); train.keep_epochs sets how many a run "
                              f"keeps")
    # the kept best epochs are not the last ones: --last N past train.keep_epochs would mix an old best one in
    missing = sorted(set(range(chosen[0].epoch, chosen[-1].epoch + 1)) - {c.epoch for c in chosen}) if last else []
    if missing:
        raise CheckpointError(f"{Path(run_dir) / 'checkpoints'}: the last {last} epochs are "
                              f"{chosen[-1].epoch - last + 1}-{chosen[-1].epoch}, not all kept (missing: "
                              f"{', '.join(map(str, missing))}; epochs kept: {have}); "
                              f"train.keep_epochs sets how many a run keeps (--best N averages the best ones)")
    return chosen


def prune_epoch_checkpoints(run_dir: Path, keep: int, metric: str) -> list[Path]:
    """Delete the epoch checkpoints that are neither among the last ``keep`` nor the best ``keep``; returns
    the deleted directories. ``keep = 0`` deletes them all."""
    checkpoints = epoch_checkpoints(run_dir, metric)
    kept = {c.path for c in last_epochs(checkpoints, keep)} | {c.path for c in best_epochs(checkpoints, keep)}
    removed = [c.path for c in checkpoints if c.path not in kept]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed

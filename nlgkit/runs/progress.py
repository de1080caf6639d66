"""Where a run's training stands against its stopping rule, read from its last checkpoint and metrics log.

A reproduction that trains for days on a CPU (Shalev et al.'s Table 2: hours a run) needs to be followed and
planned: which runs finished, which are on their way, and at most how long each has left. Training stops after
``train.early_stop_patience`` epochs without a better validation score or at ``train.max_epochs``, whichever comes
first; a better score resets the count, so what is left is an upper bound.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from nlgkit.runs.metrics_log import MetricsLog

RECENT_EPOCHS = 3  # the epochs whose mean length estimates the next ones (later epochs run at today's speed)


@dataclass(frozen=True)
class RunProgress:
    """A run's position: epochs done, its best epoch and score, and what its stopping rule still allows."""

    run_dir: Path
    started: bool
    finished: bool = False
    stop_reason: str = ""
    epochs_done: int = 0
    best_epoch: int = 0
    best_score: float | None = None
    epochs_without_gain: int = 0
    patience: int = 0
    epochs_left: int = 0  # at most, if no epoch gains
    minutes_per_epoch: float | None = None  # the last epochs' mean, validation included
    hours_trained: float = 0.0
    last_logged: float | None = None  # UNIX time of the log's last event

    @property
    def hours_left(self) -> float | None:
        """At most this many hours more (None until an epoch's length is known)."""
        if self.minutes_per_epoch is None:
            return None
        return self.epochs_left * self.minutes_per_epoch / 60


def read_progress(run_dir: Path) -> RunProgress:
    """The progress of the run in ``run_dir`` as its last checkpoint saved it (a run with none has not started)."""
    meta = run_dir / "checkpoints" / "last" / "meta.json"
    if not meta.is_file():
        return RunProgress(run_dir, started=False)
    saved = json.loads(meta.read_text(encoding="utf-8"))
    loop, train = saved.get("loop", {}), saved.get("config", {}).get("train", {})
    finished = bool(loop.get("finished"))
    epoch = int(loop.get("epoch", 1))
    done = epoch if finished else epoch - 1  # a running loop saves the epoch it is in
    patience, max_epochs = int(train.get("early_stop_patience", 0)), int(train.get("max_epochs", 0))
    bad = int(loop.get("bad_epochs", 0))
    limits = [max_epochs - done] if max_epochs else []
    if patience:
        limits.append(patience - bad)
    events = MetricsLog(run_dir / "metrics.jsonl").read()
    walls = [float(e["wall_s"]) for e in events if e["event"] == "valid" and not e.get("partial") and "wall_s" in e]
    recent = [later - earlier for earlier, later in pairwise(walls)][-RECENT_EPOCHS:]
    if walls and not recent:  # one epoch so far: its own length
        recent = walls[:1]
    best = loop.get("best_score", loop.get("best_bleu"))
    return RunProgress(
        run_dir, started=True, finished=finished, stop_reason=str(loop.get("stop_reason", "")), epochs_done=done,
        best_epoch=int(loop.get("best_epoch", 0)), best_score=float(best) if loop.get("best_epoch") else None,
        epochs_without_gain=bad, patience=patience, epochs_left=0 if finished else max(0, min(limits, default=0)),
        minutes_per_epoch=sum(recent) / len(recent) / 60 if recent else None,
        hours_trained=float(loop.get("wall_seconds", 0.0)) / 3600,
        last_logged=float(events[-1]["time"]) if events else None)

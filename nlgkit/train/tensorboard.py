"""TensorBoard events beside ``metrics.jsonl`` (``train.tensorboard = DIR`` or ``nlgkit train --tensorboard DIR``).

``metrics.jsonl`` stays the run's record (reports, resumes and records read it); TensorBoard gets a copy of its
numbers to watch while a run trains: every ``train`` event's loss, learning rate, tokens/s and auxiliary losses,
and every ``valid`` event's loss, perplexity and task scores, each at its update. Only the process that writes
the log (rank 0 under ``torchrun``) opens a writer: the other ranks create no directory and no event file.
The ``tensorboard`` package is an optional extra (``pip install 'nlgkit[tensorboard]'``), imported only when a
run asks for events.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nlgkit.core.errors import ConfigError
from nlgkit.runs.metrics_log import MetricsLog

TRAIN_TAGS = {"loss": "train/loss", "lr": "train/lr", "tokens_per_s": "train/tokens_per_s"}
# fields of a valid event that say when or what, not how well
VALID_CONTEXT = {"epoch", "update", "lr", "wall_s", "best", "partial", "time"}


def scalars(event: str, fields: Mapping[str, Any]) -> dict[str, float]:
    """The TensorBoard scalars (tag → value) of one ``metrics.jsonl`` event; none for events without numbers
    to plot (start, resume, end, …)."""
    if event == "train":
        values = {tag: fields[key] for key, tag in TRAIN_TAGS.items() if key in fields}
        values.update({f"train/{key}": value for key, value in fields.items() if key.startswith("aux_")})
    elif event == "valid":
        prefix = "valid_partial" if fields.get("partial") else "valid"  # a check inside an epoch, not an epoch's
        values = {f"{prefix}/{key}": value for key, value in fields.items() if key not in VALID_CONTEXT}
    else:
        return {}
    return {tag: float(value) for tag, value in values.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


class TensorBoardLog(MetricsLog):
    """A :class:`MetricsLog` that also writes each event's :func:`scalars` to a TensorBoard event file."""

    def __init__(self, path: Path, directory: Path) -> None:
        super().__init__(path, enabled=True)
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # torch's writer needs the tensorboard package, an optional extra
            raise ConfigError(f"train.tensorboard = {str(directory)!r}: TensorBoard events need the tensorboard "
                              "package (pip install 'nlgkit[tensorboard]')") from None
        self.directory = directory
        self.writer = SummaryWriter(log_dir=str(directory))

    def write(self, event: str, **fields: Any) -> None:
        super().write(event, **fields)
        values = scalars(event, fields)
        if not values:
            return
        step = int(fields.get("update", 0))
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)
        self.writer.flush()  # events are minutes apart: each is on disk before the next update starts

    def close(self) -> None:
        self.writer.close()


def open_metrics_log(path: Path, *, is_main: bool, tensorboard: str = "") -> MetricsLog:
    """The run's metrics log: written by the main rank only, mirrored to TensorBoard when ``tensorboard``
    names a directory (relative to the working directory, like ``run.dir``)."""
    if not is_main:
        return MetricsLog(path, enabled=False)
    if tensorboard:
        return TensorBoardLog(path, Path(tensorboard))
    return MetricsLog(path)

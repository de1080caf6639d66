"""A run's ``metrics.jsonl``: written by training, read back by the reports."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from nlgkit.core.errors import DataError
from nlgkit.core.io import read_lines


class MetricsLog:
    """Append-only JSONL: one object per event, flushed at once so a crash loses nothing logged.

    ``enabled=False`` (ranks other than 0 under data parallelism) writes nothing.
    """

    def __init__(self, path: Path, enabled: bool = True) -> None:
        self.path = path
        self.enabled = enabled

    def restart(self) -> None:
        """Begin the log of a new run: the events of an earlier run in the same directory (one stopped before it
        wrote its first ``checkpoints/last``, so that it cannot be resumed) are not this run's."""
        if self.enabled:
            self.path.unlink(missing_ok=True)

    def write(self, event: str, **fields: Any) -> None:
        if not self.enabled:
            return
        record = {"event": event, "time": round(time.time(), 3), **fields}
        if not self._ends_a_line():
            self._drop_cut_line()
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    def read(self) -> list[dict[str, Any]]:
        """The events that describe the run's weights: none when there is no log.

        A run killed mid-epoch has already logged updates past its last checkpoint; the resumed run logs
        those updates again, so each ``resume`` drops what was logged after the update it resumed from.
        """
        if not self.path.is_file():
            return []
        kept: list[dict[str, Any]] = []
        lines = read_lines(self.path)
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                if number == len(lines) and not self._ends_a_line():  # the last write, cut short: no event
                    break
                raise DataError(f"{self.path}: line {number}: not a JSON event ({exc.msg})") from None
            if not isinstance(event, dict) or not isinstance(event.get("event"), str):
                raise DataError(f"{self.path}: line {number}: not an event (an object with an \"event\" name)")
            if event["event"] == "resume":
                kept = [e for e in kept if e["event"] == "start" or e.get("update", 0) <= event["update"]]
            kept.append(event)
        return kept

    def _ends_a_line(self) -> bool:
        """Whether the log is empty, absent or ends with a whole line (not with a write cut short)."""
        if not self.path.is_file():
            return True
        with open(self.path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            return handle.tell() == 0 or (handle.seek(-1, os.SEEK_END), handle.read(1))[1] == b"\n"

    def _drop_cut_line(self) -> None:
        """Cut the log back to its last whole line: the bytes of a write that a full disk or a kill cut short hold
        no event, and the next event glued to them would be lost too."""
        with open(self.path, "r+b") as handle:
            end = handle.seek(0, os.SEEK_END)
            start = max(0, end - (1 << 16))  # (an event is a few hundred bytes)
            handle.seek(start)
            tail = handle.read()
            handle.truncate(start + tail.rfind(b"\n") + 1 if b"\n" in tail else start)

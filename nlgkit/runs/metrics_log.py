"""A run's ``metrics.jsonl``: written by training, read back by the reports."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


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
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            event = json.loads(line)
            if event["event"] == "resume":
                kept = [e for e in kept if e["event"] == "start" or e.get("update", 0) <= event["update"]]
            kept.append(event)
        return kept

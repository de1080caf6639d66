"""One training process per run directory.

Two ``nlgkit train`` processes in one run directory (a resume started while the run still trains, a script started
twice) both trained, appended their events to one ``metrics.jsonl`` and swapped checkpoints through the same
temporary directory, so that ``last`` could hold one process's weights beside the other's training state. The
process that writes a run (rank 0 under ``torchrun``) holds an exclusive ``flock`` on ``RUN_DIR/.train.lock`` while
it trains; a second one is refused in one line. The kernel drops the lock when its process ends, however it ends
(SIGKILL included), so a stale lock never blocks a resume; the file itself stays, empty of meaning.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from nlgkit.core.errors import NlgkitError

LOCK_FILE = ".train.lock"


@contextlib.contextmanager
def training_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s training lock inside the block (creating the directory); a NlgkitError naming the process
    that holds it where another does."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / LOCK_FILE, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            raise NlgkitError(f"{run_dir}: another nlgkit train{f' (process {holder})' if holder else ''} is "
                              "training this run; wait for it to end, or set run.dir to another directory") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

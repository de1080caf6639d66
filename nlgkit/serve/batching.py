"""Dynamic batching: requests that arrive together are searched together, within bounds.

A beam search over 16 sentences costs little more than over one, so a server that searched each request
alone would waste most of its time. Each served model has one worker thread and one bounded queue: the
worker takes the first waiting request, then whatever else arrives within ``max_wait`` seconds (until the
batch holds ``max_batch`` items), and runs requests that ask for the same search (same ``key``: beam,
n-best…) as one call. Answers go back through futures in the order of each request's items.

The queue holds at most ``queue_size`` requests: :meth:`DynamicBatcher.submit` raises :class:`QueueFull` on
the next, which the app answers with a 503, so a burst costs its senders a retry rather than the server its
memory.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger("nlgkit.serve")


class QueueFull(Exception):
    """The model's queue is full: the request is refused now (503), not queued."""


@dataclass
class Job:
    """One request's items, the search they ask for, and the future its answers go to."""

    key: Hashable
    items: Sequence[Any]
    future: Future[list[Any]] = field(default_factory=Future)


# ``process(key, items) -> one answer per item``, called in the worker thread with the items of every job
# of a batch that shares ``key``, in arrival order.
Process = Callable[[Hashable, list[Any]], list[Any]]


class DynamicBatcher:
    """A bounded queue of jobs and the one thread that batches and processes them."""

    def __init__(self, name: str, process: Process, *, max_batch: int, max_wait_s: float, queue_size: int) -> None:
        self.name, self.process = name, process
        self.max_batch, self.max_wait_s = max_batch, max_wait_s
        self._queue: queue.Queue[Job | None] = queue.Queue(maxsize=queue_size)
        self._thread: threading.Thread | None = None
        self.batches = 0  # batches run so far (a figure for /health)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the worker thread (again, after :meth:`stop`: an app may start and stop more than once)."""
        if self.running:
            return
        self._thread = threading.Thread(target=self._loop, name=f"nlgkit-serve-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the jobs already queued, then end the worker thread."""
        if self._thread is None or not self._thread.is_alive():
            return
        self._queue.put(None)  # blocks only while the queue is full: the worker is draining it
        self._thread.join(timeout)

    @property
    def waiting(self) -> int:
        return self._queue.qsize()

    def check_room(self) -> None:
        """Raise QueueFull now when the queue is full (before a request spends time on its input)."""
        if self._queue.full():
            raise self._full()

    def _full(self) -> QueueFull:
        return QueueFull(f"model {self.name!r} has {self._queue.maxsize} requests waiting; try again shortly")

    def submit(self, key: Hashable, items: Sequence[Any]) -> Future[list[Any]]:
        """Queue ``items`` for a search of kind ``key``; the future gets one answer per item (or the error the
        batch raised). Raises QueueFull instead of waiting for room."""
        job = Job(key, items)
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise self._full() from None
        return job.future

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs, stop = self._gather(first)
            self._run(jobs)
            if stop:
                return

    def _gather(self, first: Job) -> tuple[list[Job], bool]:
        """``first`` and the jobs that arrive within the wait, up to ``max_batch`` items; True when the stop
        sentinel was met on the way."""
        jobs, size = [first], len(first.items)
        deadline = time.monotonic() + self.max_wait_s
        while size < self.max_batch:
            remaining = deadline - time.monotonic()
            try:
                job = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            jobs.append(job)
            size += len(job.items)
        return jobs, False

    def _run(self, jobs: list[Job]) -> None:
        """Process the jobs (those whose caller has not given up) one key at a time; a failure goes to the
        futures of that key's jobs and the worker carries on."""
        live = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        groups: dict[Hashable, list[Job]] = {}
        for job in live:
            groups.setdefault(job.key, []).append(job)
        for key, group in groups.items():
            items = [item for job in group for item in job.items]
            try:
                answers = self.process(key, items)
                if len(answers) != len(items):
                    raise RuntimeError(f"{len(answers)} answers for {len(items)} items")
            except Exception as exc:  # noqa: BLE001 - every failure goes back to its requests
                LOG.debug("batch of %s failed: %s", self.name, exc)
                for job in group:
                    job.future.set_exception(exc)
                continue
            start = 0
            for job in group:
                job.future.set_result(answers[start : start + len(job.items)])
                start += len(job.items)
        self.batches += 1

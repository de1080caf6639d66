"""Small pieces of the training loop: stopping cleanly on a signal, and the running sums between log lines."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Mapping
from typing import Any, Self

import torch


class StopOnSignal:
    """Turn SIGINT/SIGTERM into a request to stop after the current update (a second SIGINT aborts).

    Stopping between updates means the saved checkpoint is consistent and ``--resume`` continues exactly.
    """

    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None  # the first signal received: the command's exit status says it (128 + it)
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self.signum = self.signum or signum

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)



class MetricWindow:
    """Running sums between two ``train`` log lines.

    Losses arrive as device tensors and are summed there: converting each to a float would make the host wait for
    the accelerator after every update. :attr:`loss` and :meth:`aux_means` read them, once per log line.
    """

    def __init__(self) -> None:
        self.loss_total: torch.Tensor | float = 0.0
        self.tokens, self.start = 0, time.perf_counter()
        self.aux_sums: dict[str, torch.Tensor | float] = {}
        self.updates = 0

    def add(self, loss_sum: torch.Tensor | float, aux: Mapping[str, torch.Tensor | float], tokens: int) -> None:
        self.loss_total = self.loss_total + loss_sum
        self.tokens += tokens
        self.updates += 1
        for name, value in aux.items():
            self.aux_sums[name] = self.aux_sums.get(name, 0.0) + value

    @property
    def loss_sum(self) -> float:
        return float(self.loss_total)

    @property
    def loss(self) -> float:
        return self.loss_sum / max(self.tokens, 1)

    @property
    def seconds(self) -> float:
        return max(time.perf_counter() - self.start, 1e-9)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    def aux_means(self) -> dict[str, float]:
        return {f"aux_{name}": float(total) / max(self.updates, 1) for name, total in self.aux_sums.items()}

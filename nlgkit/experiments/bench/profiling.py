"""Where the time of a few training updates goes, read off ``torch.profiler``, for the GPU section of ``make bench``.

Target tokens/s alone cannot say why a case is slow: a model can keep the GPU's arithmetic busy, or the GPU can
wait while the host launches thousands of small kernels or blocks on a value it needs back (``.item()``, a mask
read on the host). The figures here tell those apart: kernels launched per update, the host's waits for the GPU
per update, the share of the updates' wall time that kernels ran, and the operators that took the most time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

TOP_OPERATORS = 4
# CUDA runtime calls in which the host waits for the device (torch's .item(), .cpu(), an explicit synchronize)
WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def profile_updates(step: Callable[[list[int]], object], batches: Sequence[list[int]],
                    on_gpu: bool) -> dict[str, Any]:
    """Run ``step`` on each of ``batches`` under the profiler; on a GPU, the kernels, the host's waits and the
    GPU's busy share per update and the operators of the most GPU time; on the CPU, the operators of the most
    CPU time (kernels and waits do not apply there: None)."""

    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_gpu else [])]
    with profile(activities=activities) as profiler:
        start = time.perf_counter()
        for indices in batches:
            step(indices)
        if on_gpu:
            torch.cuda.synchronize()
        wall_s = time.perf_counter() - start
    return summarise_events(profiler.key_averages(), len(batches), wall_s, on_gpu)


def summarise_events(events: Iterable[Any], updates: int, wall_s: float, on_gpu: bool) -> dict[str, Any]:
    """The figures of :func:`profile_updates` from the profiler's averaged events (``key``, ``count``,
    ``device_type`` and the self times in µs of torch's ``FunctionEventAvg``) of ``updates`` updates that took
    ``wall_s`` seconds."""

    events = list(events)
    operators = [e for e in events if e.device_type == DeviceType.CPU and e.key.startswith("aten::")]
    kernels = [e for e in events if e.device_type == DeviceType.CUDA]

    def spent(e: Any) -> float:  # the time an operator is ranked by: its kernels' on a GPU, its own on the CPU
        return float(e.self_device_time_total if on_gpu else e.self_cpu_time_total)

    total = sum(spent(e) for e in (kernels if on_gpu else events))
    ranked = sorted(operators, key=spent, reverse=True)[:TOP_OPERATORS]
    figures: dict[str, Any] = {"updates": updates, "wall_s": wall_s, "kernels_per_update": None,
                               "waits_per_update": None, "device_busy": None,
                               "top_operators": [[e.key, spent(e) / total if total else 0.0] for e in ranked]}
    if on_gpu:
        figures.update(kernels_per_update=sum(e.count for e in kernels) / updates,
                       waits_per_update=sum(e.count for e in events if e.key in WAITS) / updates,
                       device_busy=total / 1e6 / wall_s)
    return figures

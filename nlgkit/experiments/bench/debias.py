"""``make bench``: the cost of debiasing a vocabulary-sized table (:mod:`nlgkit.wordvectors.debias`).

Hirasawa & Komachi debias whole pre-trained tables (GloVe 6B: 400,000 words × 300). All-but-the-Top is two
linear passes and costs seconds anywhere; localized centering needs every word's 10 nearest neighbours, V² · e
multiply-adds (5 · 10¹³ for that table: about 11 minutes on a 2-core CPU, at ~40 % of its matmul rate).
Both are measured on the full table, on the CPU and, where there is one, on the GPU. Each case runs in its own process
(``nlgkit bench --worker debias --case JSON``), so its peak RSS is its own. Localized centering's speed is
also given as a share of this machine's float32 matmul rate, measured in the same process: its neighbour search is
V² · e multiply-adds of matrix products, so the share says how close it runs to the hardware, whatever the CPU.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import torch

from nlgkit.core.seeding import regenerable_generator
from nlgkit.experiments.bench.efficiency import square_matmul_rate
from nlgkit.experiments.bench.process import peak_rss_mib, spawn_json
from nlgkit.wordvectors.debias import debias

FULL = 400_000  # words of GloVe 6B


def debias_cases(cuda: bool) -> list[dict[str, Any]]:
    """What ``make bench`` measures: both methods on the full table on this CPU, and on a GPU when there is one."""
    cases: list[dict[str, Any]] = [{"method": "abtt", "words": FULL}, {"method": "lc", "words": FULL}]
    if cuda:
        cases += [{"method": "abtt", "words": FULL, "device": "cuda"}, {"method": "lc", "words": FULL, "device": "cuda"}]
    return cases


def measure_debias(method: str = "abtt", words: int = FULL, dim: int = 300, k: int = 10, components: int = 3,
                   device: str = "cpu", seed: int = 1) -> dict[str, Any]:
    """Seconds and peak memory of :func:`~nlgkit.wordvectors.debias.debias` on a random ``words`` × ``dim``
    float32 table (standard normal rows: the time does not depend on the values)."""
    table = torch.randn(words, dim, generator=regenerable_generator(seed))
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    out = debias(table, method, components=components, k=k, device=device)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    result = {"method": method, "words": words, "dim": dim, "k": k, "components": components, "device": device,
              "seconds": seconds, "words_per_s": words / seconds, "table_mib": table.nbytes / 2**20,
              "threads": torch.get_num_threads(), "peak_rss_mib": peak_rss_mib(),
              "finite": bool(torch.isfinite(out).all())}
    if device == "cuda":
        result["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
        result["gpu"] = torch.cuda.get_device_name()
    elif method == "lc":  # the neighbour search's products against this CPU's matmul peak
        result["search_gflop"] = 2 * words * words * dim / 1e9
        result["square_matmul_gflops"] = square_matmul_rate()
    return result


def benchmark_debias(spawn: Callable[..., dict[str, Any]] = spawn_json,
                     cases: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every case of :func:`debias_cases` (or ``cases``), each in a process of its own (``spawn`` runs one
    ``nlgkit bench`` worker)."""
    chosen = debias_cases(torch.cuda.is_available()) if cases is None else cases
    return [spawn("--worker", "debias", "--case", json.dumps(case)) for case in chosen]

"""``make bench``: how to spend a CPU's cores on many training runs — one run on every core, or a run per core.

nlgkit's long CPU work is many independent runs (Table 2's eighteen, Hirasawa's seeds). On C cores they can train
one after another with C threads each, or C side by side with one thread each (``make -jC reproduce-table2
TABLE2_SET="--set train.num_threads=1"``). Intra-op threads speed these small recurrent models up less than C
times, so runs side by side train more tokens in all; this section measures by how much on this machine. The
figures are ratios to one process of one thread measured in the same run, which move less with the machine than
tokens/s do.

Every case is the training benchmark's own measurement (:func:`nlgkit.experiments.bench.measure.measure_training`:
real batches of epoch 1 after warm-up updates) in processes of their own. Processes side by side wait for each
other after their set-up and warm-up (:func:`wait_for_all`), so that their timed updates overlap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nlgkit.core.errors import NlgkitError
from nlgkit.evaluate.markdown import md_table

RECIPE = "recipes/multi30k_learned.toml"  # Table 2's model, the bulk of the CPU runs
BARRIER_SECONDS = 600  # a process that has waited this long for the others gives up (one failed to start)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def thread_cases(cores: int) -> list[dict[str, int]]:
    """One process of one thread (the unit), one process of every core's thread, and a one-thread process per core;
    nothing to compare on one core."""
    if cores < 2:
        return []
    return [{"processes": 1, "threads": 1}, {"processes": 1, "threads": cores}, {"processes": cores, "threads": 1}]


def thread_benchmarks(updates: int, warmup: int,
                      spawn_together: Callable[[Sequence[Sequence[str]]], list[dict[str, Any]]],
                      cores: int | None = None) -> dict[str, Any]:
    """Each case of :func:`thread_cases`: its processes' target tokens/s summed (``spawn_together`` runs several
    ``nlgkit bench`` workers at once and returns their figures)."""
    cores = usable_cores() if cores is None else cores
    rows = []
    for case in thread_cases(cores):
        argv = ["--worker", "train", "--recipe", RECIPE, "--updates", str(updates), "--warmup", str(warmup),
                "--threads", str(case["threads"])]
        figures = spawn_together([argv] * case["processes"])
        rows.append({**case, "tokens_per_s": sum(f["tokens_per_s"] for f in figures),
                     "per_process": [f["tokens_per_s"] for f in figures],
                     "peak_rss_mib": max(f["peak_rss_mib"] for f in figures)})
    return {"recipe": RECIPE, "cores": cores, "updates": updates, "warmup": warmup, "rows": rows}


def wait_for_all(barrier: str, timeout: float = BARRIER_SECONDS) -> None:
    """``DIR:N``: say this process is ready (a file in DIR) and wait until N processes are."""
    folder, _, count = barrier.rpartition(":")
    if not folder or not count.isdigit():
        raise NlgkitError(f"--barrier {barrier!r}: expected DIR:N")
    here = Path(folder)
    (here / f"ready.{os.getpid()}").touch()
    deadline = time.monotonic() + timeout
    while len(list(here.glob("ready.*"))) < int(count):
        if time.monotonic() > deadline:
            raise NlgkitError(f"--barrier {barrier}: the other processes were not ready after {timeout:g} s")
        time.sleep(0.05)


def thread_lines(section: dict[str, Any] | None) -> list[str]:
    """The section of BENCHMARKS.md; nothing if it was never measured (JSON written before it existed)."""
    if not section:
        return []
    lines = ["", (f"## Training runs on a CPU's cores (`{Path(section['recipe']).stem}`, real batches of epoch 1 after "
                  f"{section['warmup']} warm-up updates)"), ""]
    stamp = section.get("date")
    if stamp:
        lines += [(f"Measured on {section.get('cpu', 'this CPU')}, {section['cores']} usable cores, on {stamp}, "
                   f"commit {str(section['commit'])[:10]}{' (dirty)' if section.get('dirty') else ''}."), ""]
    rows = section["rows"]
    if not rows:
        return [*lines, "Not measured: one usable core, nothing to compare."]
    unit = next(r["tokens_per_s"] for r in rows if r["processes"] == 1 and r["threads"] == 1)
    lines += [("Target tokens/s of every process together, and as a ratio to one process of one thread measured in "
               "the same run."), "",
              *_table(rows, unit), ""]
    alone = next(r for r in rows if r["processes"] == 1 and r["threads"] > 1)
    side = next(r for r in rows if r["processes"] > 1)
    gain = side["tokens_per_s"] / alone["tokens_per_s"]
    advice = (f"give many runs one thread each (`make -j{side['processes']} reproduce-table2 "
              'TABLE2_SET="--set train.num_threads=1"`)' if gain > 1 else "train one run at a time on every core")
    lines.append(f"{side['processes']} one-thread runs side by side train {gain:.2f}× the tokens of one run on "
                 f"{alone['threads']} threads: on this machine, {advice}.")
    return lines


def _table(rows: list[dict[str, Any]], unit: float) -> list[str]:
    body = [[str(r["processes"]), str(r["threads"]), f"{r['tokens_per_s']:,.0f}",
             " + ".join(f"{v:,.0f}" for v in r["per_process"]) if r["processes"] > 1 else "–",
             f"{r['tokens_per_s'] / unit:.2f}×", f"{r['peak_rss_mib']:,.0f}"] for r in rows]
    return md_table(["processes", "threads each", "target tokens/s", "per process", "× one thread", "peak RSS (MiB)"],
                    body, numeric=[True, True, True, False, True, True])

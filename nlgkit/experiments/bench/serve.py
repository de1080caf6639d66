"""The load test of ``nlgkit serve`` in ``make bench``: K clients against a real server on 127.0.0.1.

The server runs as users run it (``nlgkit serve --port 0`` in a process of its own); the clients are
``httpx`` coroutines in this process, each sending one sentence per request, the next as soon as the last is
answered, for a bounded time. Every answer is checked against the offline ``nlgkit translate`` output for
the same line (same run, same search), and every request must be answered: a lost, failed or different
answer is counted, never hidden. Figures: requests (= sentences) per second, p50 / p99 latency under load,
and the latency of one client alone (one sentence at a time: the cost of a single request).

Nothing here imports torch: the server and the offline translation are other processes, so the figures
are theirs, and BENCHMARKS.md can be written from the JSON alone (:func:`serve_lines`).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from nlgkit.core.errors import NlgkitError

CLIENTS = 8  # concurrent clients of the load test
SECONDS = 30.0  # how long they send
SENTENCES = 500  # the first N source sentences of the run's test split
SINGLE = 50  # sequential requests of the one-client latency


@contextmanager
def running_server(argv: list[str], cwd: Path | None = None, timeout: float = 120.0) -> Iterator[str]:
    """``nlgkit serve ARGV… --port 0`` in a process of its own; yields its URL once it answers /health, and
    stops it (SIGTERM, then SIGKILL) on the way out. Its stderr goes to a file, so it never blocks on a pipe."""
    import httpx

    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen([sys.executable, "-m", "nlgkit", "serve", *argv, "--port", "0"], cwd=cwd,
                                   stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            url = _wait_for_url(process, log, timeout)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    if httpx.get(f"{url}health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise NlgkitError(f"nlgkit serve at {url} did not answer /health within {timeout:.0f} s")
                time.sleep(0.1)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_url(process: subprocess.Popen[str], log: Any, timeout: float) -> str:
    """The ``http://HOST:PORT/`` the server prints once its models are loaded and its port bound."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log.seek(0)
        for line in log.read().splitlines():
            if line.startswith("serving ") and " on http://" in line:
                return line.rsplit(" on ", 1)[1].strip()
        if process.poll() is not None:
            log.seek(0)
            last = log.read().strip().splitlines()[-1:]
            raise NlgkitError(f"nlgkit serve stopped at start: {last[0] if last else process.returncode}")
        time.sleep(0.1)
    raise NlgkitError(f"nlgkit serve did not start within {timeout:.0f} s")


def translate_offline(run_dir: str, lines: list[str], device: str = "cpu", cwd: Path | None = None) -> list[str]:
    """What ``nlgkit translate`` prints for ``lines`` (one output line each), in a process of its own."""
    out = subprocess.run([sys.executable, "-m", "nlgkit", "translate", "--model", run_dir, "--device", device],
                         input="".join(line + "\n" for line in lines), capture_output=True, text=True, cwd=cwd,
                         check=False)
    if out.returncode != 0:
        raise NlgkitError(f"nlgkit translate --model {run_dir} failed: {out.stderr.strip()[-300:]}")
    return out.stdout.splitlines()


async def _load(url: str, lines: list[str], expected: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` coroutines sending one line per request until ``seconds`` have passed; each answer is
    checked against ``expected``."""
    import httpx

    latencies: list[float] = []
    counts = {"sent": 0, "answered": 0, "different": 0, "failed": 0}
    failures: list[str] = []
    next_line = 0
    deadline = time.perf_counter() + seconds

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal next_line
        while time.perf_counter() < deadline:
            i, next_line = next_line % len(lines), next_line + 1
            counts["sent"] += 1
            start = time.perf_counter()
            try:
                answer = await http.post(f"{url}translate", json={"lines": [lines[i]]})
            except httpx.HTTPError as exc:
                counts["failed"] += 1
                failures.append(f"line {i + 1}: {type(exc).__name__}")
                continue
            latencies.append(time.perf_counter() - start)
            if answer.status_code != 200:
                counts["failed"] += 1
                failures.append(f"line {i + 1}: HTTP {answer.status_code} {answer.text[:100]}")
                continue
            counts["answered"] += 1
            if answer.json()["translations"][0]["text"] != expected[i]:
                counts["different"] += 1
                failures.append(f"line {i + 1}: differs from nlgkit translate")

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        elapsed = time.perf_counter() - start
    return {**counts, "seconds": elapsed, "requests_per_s": counts["answered"] / elapsed,
            **_percentiles(latencies), "failures": failures[:10]}


def _percentiles(latencies: list[float]) -> dict[str, float]:
    if len(latencies) < 2:
        return {"p50_ms": 1000 * latencies[0] if latencies else float("nan"), "p99_ms": float("nan")}
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {"p50_ms": 1000 * cuts[49], "p99_ms": 1000 * cuts[98], "mean_ms": 1000 * statistics.fmean(latencies)}


def measure_serving(run_dir: str, lines: list[str], *, clients: int = CLIENTS, seconds: float = SECONDS,
                    single: int = SINGLE, device: str = "cpu", cwd: Path | None = None,
                    url: str | None = None) -> dict[str, Any]:
    """The load test: offline translations of ``lines`` first, then one client alone for ``single``
    requests, then ``clients`` clients for ``seconds``, against one ``nlgkit serve`` of ``run_dir`` (started
    here, or the one already running at ``url`` whose first translation model is ``run_dir``)."""
    import httpx

    if not lines:
        raise NlgkitError(f"{run_dir}: no sentences to send")
    expected = translate_offline(run_dir, lines, device, cwd)
    if len(expected) != len(lines):
        raise NlgkitError(f"nlgkit translate gave {len(expected)} lines for {len(lines)}")
    with running_server(["--model", run_dir, "--device", device], cwd) if url is None else nullcontext(url) as at:
        threads = httpx.get(f"{at}health", timeout=30).json()["search_threads"]
        alone = asyncio.run(_single(at, lines, expected, single))
        loaded = asyncio.run(_load(at, lines, expected, clients, seconds))
    return {"run": run_dir, "device": device, "search_threads": threads, "sentences": len(lines),
            "clients": clients, "seconds_asked": seconds, "single": alone, "load": loaded}


async def _single(url: str, lines: list[str], expected: list[str], count: int) -> dict[str, Any]:
    """One client, one sentence per request, ``count`` requests in turn (after one warm-up request)."""
    import httpx

    latencies, different = [], 0
    async with httpx.AsyncClient(timeout=120) as http:
        await http.post(f"{url}translate", json={"lines": [lines[0]]})
        for k in range(count):
            i = k % len(lines)
            start = time.perf_counter()
            answer = await http.post(f"{url}translate", json={"lines": [lines[i]]})
            latencies.append(time.perf_counter() - start)
            if answer.status_code != 200 or answer.json()["translations"][0]["text"] != expected[i]:
                different += 1
    return {"requests": count, "different": different, **_percentiles(latencies)}


def serve_benchmarks(root: Path, run_dir: str, clients: int = CLIENTS, seconds: float = SECONDS,
                     sentences: int = SENTENCES) -> dict[str, Any]:
    """``make bench``'s serve section: the load test on the first ``sentences`` source sentences of the run's
    test split, or the reason it was not measured."""
    config_file = root / run_dir / "config.json"
    if not (root / run_dir / "checkpoints" / "best").exists() or not config_file.is_file():
        return {"skipped": f"no trained run at `{run_dir}` (train it first)"}
    config = json.loads(config_file.read_text(encoding="utf-8"))
    if config.get("task", {}).get("type", "translation") != "translation":
        return {"skipped": f"`{run_dir}` is a {config['task']['type']} run: the load test sends text"}
    data = config["data"]
    source = root / data["dir"] / f"test.ref.{data['src_lang']}"
    if not source.is_file():
        return {"skipped": f"no `{source.relative_to(root)}` (prepare the run's data first)"}
    lines = source.read_text(encoding="utf-8").splitlines()[:sentences]
    return measure_serving(run_dir, lines, clients=clients, seconds=seconds, cwd=root)


def serve_lines(section: dict[str, Any]) -> list[str]:
    """The section of BENCHMARKS.md: throughput and latency under load, one client's latency, and whether every
    answer arrived and equalled the offline translation."""
    lines = ["", "## Serving (`nlgkit serve`, one sentence per request, clients on 127.0.0.1)", ""]
    if "skipped" in section:
        return lines + [f"Not measured: {section['skipped']}."]
    load, alone = section["load"], section["single"]
    lost = load["sent"] - load["answered"]
    if "date" in section:
        lines += [(f"Measured on {section['date']}, commit {str(section['commit'])[:10]}"
                   f"{' (dirty)' if section.get('dirty') else ''} (`nlgkit bench --only serve` measures it alone)."),
                  ""]
    lines += [
        (f"`{section['run']}` on {section['device']} ({section.get('search_threads', '?')} search threads), its "
         f"recipe's beam; {section['sentences']} test sentences sent "
         f"in turn. {load['sent']:,} requests from {section['clients']} clients in {load['seconds']:.1f} s: "
         f"{load['answered']:,} answered ({lost} lost or failed), {load['different']} different from `nlgkit "
         f"translate`."),
        "",
        "| clients | requests/s | p50 latency (ms) | p99 latency (ms) |",
        "|---:|---:|---:|---:|",
        (f"| 1 (in turn, {alone['requests']} requests) | {1000 / alone['mean_ms']:.1f} | {alone['p50_ms']:.1f} "
         f"| {alone['p99_ms']:.1f} |"),
        f"| {section['clients']} | {load['requests_per_s']:.1f} | {load['p50_ms']:.1f} | {load['p99_ms']:.1f} |",
    ]
    return lines

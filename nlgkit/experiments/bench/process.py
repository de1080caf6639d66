"""One benchmark, one process: each measurement runs in a fresh ``nlgkit bench --worker …`` process, so that its
peak memory (max RSS) is its own, and prints its figures as one JSON line for the parent to read."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nlgkit.core.errors import NlgkitError

ROOT = Path(__file__).resolve().parents[3]  # the repository: recipes/, runs/ and BENCHMARKS.md


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def spawn_json(*argv: str, timeout: float | None = None) -> dict[str, Any]:
    """Run ``python -m nlgkit bench argv…`` in a fresh process in the repository root and return the JSON
    object its last output line prints; a process still running after ``timeout`` seconds is stopped (an error)."""
    try:
        out = subprocess.run([sys.executable, "-m", "nlgkit", "bench", *argv], capture_output=True, text=True,
                             cwd=ROOT, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NlgkitError(f"benchmark {' '.join(argv)} stopped after {timeout:g} s") from None
    return _figures(argv, out.returncode, out.stdout, out.stderr)


def spawn_json_together(argvs: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """Run several ``python -m nlgkit bench argv…`` processes at once, each told to wait for the others before it
    times anything (``--barrier DIR:N``); their figures in order. One process alone runs as :func:`spawn_json`."""
    if len(argvs) == 1:
        return [spawn_json(*argvs[0])]
    with tempfile.TemporaryDirectory(prefix="nlgkit-bench-") as barrier:
        processes = [subprocess.Popen([sys.executable, "-m", "nlgkit", "bench", *argv, "--barrier",
                                       f"{barrier}:{len(argvs)}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=ROOT) for argv in argvs]
        outputs = [process.communicate() for process in processes]
    return [_figures(argv, process.returncode, out, err)
            for argv, process, (out, err) in zip(argvs, processes, outputs)]


def _figures(argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> dict[str, Any]:
    """The JSON object a worker's last output line prints; its last error line if it failed."""
    if returncode != 0:
        last = stderr.strip().splitlines()[-1:]
        raise NlgkitError(f"benchmark {' '.join(argv)} failed: {last[0] if last else f'exit code {returncode}'}")
    return json.loads(stdout.strip().splitlines()[-1])

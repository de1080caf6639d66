"""One benchmark, one process: each measurement runs in a fresh ``nlgkit bench --worker …`` process, so that its
peak memory (max RSS) is its own, and prints its figures as one JSON line for the parent to read."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
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
    if out.returncode != 0:
        last = out.stderr.strip().splitlines()[-1:]
        raise NlgkitError(f"benchmark {' '.join(argv)} failed: {last[0] if last else f'exit code {out.returncode}'}")
    return json.loads(out.stdout.strip().splitlines()[-1])

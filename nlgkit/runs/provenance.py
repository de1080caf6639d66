"""What a run directory records about where it came from: git revision, software and hardware."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

import nlgkit


def git_revision(cwd: Path | None = None) -> dict[str, Any]:
    """Commit hash and whether the working tree had uncommitted changes (None outside a checkout)."""
    root = cwd or Path(nlgkit.__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "nlgkit": getattr(nlgkit, "__version__", "0"),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def thread_count(threads: Any) -> str:
    """"1 thread" / "2 threads": how every table names a CPU's thread count."""
    return f"{threads} thread{'' if threads == 1 else 's'}"


def hardware_label(env: dict[str, Any]) -> str:
    if env.get("gpu"):
        return str(env["gpu"])
    return f"CPU ({thread_count(env.get('threads'))}, {env.get('cpu')})"

"""What a run directory records about where it came from: git revision, software and hardware."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import torch

import nlgkit
from nlgkit.core.version import git_revision

__all__ = ["cpu_name", "environment", "git_revision", "hardware_label", "thread_count"]


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

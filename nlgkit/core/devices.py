"""The one reading of a device name (``auto``, ``cpu``, ``cuda``, ``cuda:N``) for every command and setting, what
a CPU multiplies in bf16, and the autocast context that training and inference both compute in."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from nlgkit.core.errors import ConfigError


def select_device(name: str | torch.device, key: str = "train.device") -> torch.device:
    """``auto`` picks CUDA when available, else CPU; a bad name, or CUDA where there is none, is a one-line
    error naming ``key`` (the setting or option the name came from)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    given = f"{key} {str(name)!r}" if key.startswith("--") else f"{key} = {str(name)!r}"  # an option, a setting
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"{given}: not a device (use auto, cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{given}: CUDA is not available on this machine")
    return device


# CPU features that multiply bf16 in hardware (torch.cpu.get_capabilities' names)
BF16_INSTRUCTIONS = ("amx_bf16", "avx512_bf16")


def cpu_bf16_instructions() -> list[str]:
    """This CPU's bf16 instructions (AMX, AVX512-BF16) as PyTorch reads them; empty where it has none or this
    PyTorch cannot tell."""
    read = getattr(torch.cpu, "get_capabilities", None)
    capabilities = read() if callable(read) else {}
    return [name for name in BF16_INSTRUCTIONS if capabilities.get(name)]


def autocast_to(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager[Any]:
    """Autocast to the 16-bit ``dtype`` on ``device``, or nothing where ``dtype`` is None (float32): the one context
    that training's precision (``nlgkit.train.precision``) and inference's compute type (``TrainedRun.computing``)
    run in, each having chosen its ``dtype`` by its own settings."""
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()

"""The numeric precision of a training step: float32, or 16-bit autocast on CUDA (``train.amp``) or on the CPU
(``train.cpu_amp``), in bf16 or float16 (``train.amp_dtype``).

Autocast runs the matrix products in 16 bits and keeps the weights, the optimizer state, the softmax and the losses
in float32. On a CUDA GPU that is the usual mixed precision. bf16 has float32's range; float16 does not, so small
gradients underflow to zero unless the loss is scaled up before backward and the gradients scaled back before the
step, the scale halved whenever a step overflows (fairseq's ``--fp16``, ``torch.amp.GradScaler``). ``auto`` takes
bf16 on the CPU and on GPUs that compute it natively (Ampere and later), and float16 with that scaling on the GPUs
before (V100, T4), where torch would run a bf16 autocast emulated.
On a CPU it pays where the cores multiply bf16
natively (Intel AMX or AVX512-BF16): on one such Xeon thread Table 2's GRU trained 1.4 times and Pappas et al.'s
LSTM 1.8 times as fast as in float32, the small Transformer and IMAGINATION 1.1-1.2 times (BENCHMARKS.md, CPU
precision: their step time is not all matrix products); where bf16 is emulated it is slower, so it is its own
setting, off by default, and the trainer says when the CPU lacks the instructions. The two settings are apart because a recipe's ``amp`` is a choice for
a GPU (the GRU recipes train faster in float32 on an H100) that says nothing about a CPU.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import torch

from nlgkit.core.config import TrainConfig
from nlgkit.core.devices import autocast_to, cpu_bf16_instructions
from nlgkit.core.errors import ConfigError


def uses_autocast(train: TrainConfig, device: torch.device) -> bool:
    """Whether training on ``device`` runs under autocast (``amp`` on CUDA, ``cpu_amp`` on the CPU)."""
    if device.type == "cuda":
        return train.amp
    return device.type == "cpu" and train.cpu_amp


def autocast_dtype(train: TrainConfig, device: torch.device) -> torch.dtype | None:
    """The 16-bit type training autocasts to on ``device`` (None: float32 throughout)."""
    if not uses_autocast(train, device):
        return None
    if train.amp_dtype == "float16":
        return torch.float16
    native = device.type != "cuda" or torch.cuda.is_bf16_supported(including_emulation=False)
    if train.amp_dtype == "bfloat16" and not native:
        raise ConfigError(f"train.amp_dtype = 'bfloat16': {torch.cuda.get_device_name(device)} does not compute "
                          "bf16 natively; use 'auto' or 'float16' (with loss scaling)")
    return torch.bfloat16 if native else torch.float16


def training_autocast(train: TrainConfig, device: torch.device) -> AbstractContextManager[Any]:
    """The context every training forward (and the validation loss) runs in: autocast to
    :func:`autocast_dtype` on ``device``, or nothing."""
    return autocast_to(device, autocast_dtype(train, device))


def loss_scaler(train: TrainConfig, device: torch.device) -> torch.amp.GradScaler | None:
    """A dynamic loss scaler where training autocasts to float16 (None otherwise: bf16 and float32 need none)."""
    return torch.amp.GradScaler(device.type) if autocast_dtype(train, device) == torch.float16 else None


def precision_label(train: TrainConfig, device: torch.device) -> str:
    """How training computes on ``device``, as the run's ``start`` and ``resume`` events and its log name it."""
    dtype = autocast_dtype(train, device)
    if dtype is None:
        return "float32"
    return "float16 autocast with loss scaling" if dtype == torch.float16 else "bf16 autocast"


def precision_note(train: TrainConfig, device: torch.device) -> str:
    """A line for the training log when ``cpu_amp`` will not pay on this CPU ("" otherwise)."""
    if device.type != "cpu" or not train.cpu_amp or train.amp_dtype == "float16" or cpu_bf16_instructions():
        return ""
    return ("train.cpu_amp: this CPU has no bf16 instructions (AMX, AVX512-BF16): bf16 autocast is emulated here "
            "and trains slower than float32")

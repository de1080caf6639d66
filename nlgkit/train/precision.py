"""The numeric precision of a training step: float32, or bf16 autocast on CUDA (``train.amp``) or on the CPU
(``train.cpu_amp``).

Autocast runs the matrix products in bf16 and keeps the weights, the optimizer state, the softmax and the losses
in float32. On a CUDA GPU that is the usual mixed precision. On a CPU it pays where the cores multiply bf16
natively (Intel AMX or AVX512-BF16): on one such Xeon thread Table 2's GRU trained 1.4 times and Pappas et al.'s
LSTM 1.8 times as fast as in float32, the small Transformer and IMAGINATION 1.1-1.2 times (BENCHMARKS.md, CPU
precision: their step time is not all matrix products); where bf16 is emulated it is slower, so it is its own
setting, off by default, and the trainer says when the CPU lacks the instructions. The two settings are apart because a recipe's ``amp`` is a choice for
a GPU (the GRU recipes train faster in float32 on an H100) that says nothing about a CPU.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from nlgkit.core.config import TrainConfig
from nlgkit.core.devices import cpu_bf16_instructions


def uses_autocast(train: TrainConfig, device: torch.device) -> bool:
    """Whether training on ``device`` runs under bf16 autocast (``amp`` on CUDA, ``cpu_amp`` on the CPU)."""
    if device.type == "cuda":
        return train.amp
    return device.type == "cpu" and train.cpu_amp


def training_autocast(train: TrainConfig, device: torch.device) -> AbstractContextManager[Any]:
    """The context every training forward (and the validation loss) runs in: bf16 autocast on ``device`` where
    :func:`uses_autocast` says so, else nothing."""
    if uses_autocast(train, device):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()


def precision_note(train: TrainConfig, device: torch.device) -> str:
    """A line for the training log when ``cpu_amp`` will not pay on this CPU ("" otherwise)."""
    if device.type != "cpu" or not train.cpu_amp or cpu_bf16_instructions():
        return ""
    return ("train.cpu_amp: this CPU has no bf16 instructions (AMX, AVX512-BF16): bf16 autocast is emulated here "
            "and trains slower than float32")

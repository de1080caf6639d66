"""``train.compile``: what ``torch.compile`` compiles for a run.

A model without a Python loop over target steps (Transformer, ConvS2S, Show-Tell) has its whole training step,
model and head loss together, compiled. A recurrent decoder names the modules its loop calls at every step
(:meth:`~nlgkit.models.base.Generator.step_modules`); each is compiled on its own, in place, with dynamic shapes,
and the loop stays in Python, so one graph serves every target length.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from nlgkit.models.base import Generator


def compile_training(objective: nn.Module, model: Generator) -> nn.Module:
    """The objective to train with: compiled as a whole, or unchanged with ``model``'s step modules compiled
    (validation and search then call the same compiled modules)."""
    parts = model.step_modules()
    if parts is None:
        return cast(nn.Module, torch.compile(objective, dynamic=True))
    for part in parts:
        part.compile(dynamic=True)
    return objective

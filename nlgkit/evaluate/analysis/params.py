"""Parameters and memory of a model by component, and what Adam adds on top (Shalev Table 3).

A fixed head moves its V×d matrix from "trainable" to "buffers": it is still stored and multiplied, but
gets no gradient and no optimizer state. Adam keeps two moments per trainable element, so its state is
2 × trainable × 4 bytes in float32 (plus a step counter per tensor when measured from a real state dict).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nlgkit.runs.build import count_parameters

ADAM_MOMENTS = 2  # exp_avg and exp_avg_sq
FP32_BYTES = 4


def _tensor_bytes(state: Any) -> int:
    """Bytes of every tensor inside a nested dict/list (an optimizer's ``state_dict()['state']``)."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(_tensor_bytes(value) for value in state.values())
    if isinstance(state, (list, tuple)):
        return sum(_tensor_bytes(value) for value in state)
    return 0


def optimizer_state_bytes(state_dict: dict[str, Any]) -> int:
    """Measured bytes of an optimizer's per-parameter state (moments, step counters)."""
    return _tensor_bytes(state_dict.get("state", {}))


def parameter_report(model: nn.Module, optimizer_state: dict[str, Any] | None = None) -> dict[str, Any]:
    """Elements and bytes per top-level module (src_embed, encoder, …, head), totals, and Adam state.

    Counts come from :func:`count_parameters` (a tied weight counted once, under the module that registers
    it first). ``adam_bytes`` is the fp32 estimate; ``adam_bytes_measured`` is filled only when an
    optimizer state dict is given.
    """
    counts = count_parameters(model)
    byte_totals: dict[str, int] = {}
    seen: set[int] = set()
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        part = name.split(".")[0]
        byte_totals[part] = byte_totals.get(part, 0) + tensor.numel() * tensor.element_size()
    components = {name: {**entry, "bytes": byte_totals.get(name, 0)}
                  for name, entry in counts["components"].items()}
    return {
        "trainable": counts["trainable"],
        "frozen": counts["frozen"],
        "buffers": counts["buffers"],
        "bytes": sum(byte_totals.values()),
        "components": components,
        "adam_bytes": ADAM_MOMENTS * counts["trainable"] * FP32_BYTES,
        "adam_bytes_measured": None if optimizer_state is None else optimizer_state_bytes(optimizer_state),
    }

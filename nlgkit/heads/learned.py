"""The standard output layer: a learned Linear(d → V), the paper's "non-fixed" baseline."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from nlgkit.core.registry import HEADS
from nlgkit.heads.base import HeadConfig, HeadContext, LinearHead


@dataclass(frozen=True)
class LearnedHeadConfig(HeadConfig):
    type: str = "learned"
    bias: bool = True


@HEADS.register("learned", LearnedHeadConfig, default=True)
class LearnedHead(LinearHead):
    """logits = W f + b with W (V, d) and b (V,) trained: (d + 1)·V parameters (d·V without bias)."""

    def __init__(self, context: HeadContext, bias: bool = True) -> None:
        super().__init__(context)
        # nn.Linear's initialisation, but the parameters live on the head ("head.weight", "head.bias")
        # so every head exposes its target vectors under the same name.
        linear = nn.Linear(context.feature_dim, context.vocab_size, bias=bias)
        self.weight = linear.weight  # (V, d)
        self.bias = linear.bias  # (V,) or None

    @classmethod
    def from_config(cls, config: LearnedHeadConfig, context: HeadContext) -> LearnedHead:
        return cls(context, bias=config.bias)

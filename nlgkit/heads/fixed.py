"""Randomly drawn, fixed target vectors (Shalev et al.): the classification layer is never trained.

W (V, d) is a persistent buffer, not a Parameter: it is saved with the model, moves with ``.to()``, but
no optimizer sees it and it adds nothing to the trainable-parameter count. It is drawn on a CPU generator
seeded with ``context.seed + seed_offset``, so a seed names one matrix on every device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS
from nlgkit.core.seeding import regenerable_generator
from nlgkit.core.weight_cache import WeightCache
from nlgkit.heads.base import HeadConfig, HeadContext, LinearHead

BiasKind = Literal["fixed", "learned", "none"]


@dataclass(frozen=True)
class FixedHeadConfig(HeadConfig):
    """``init``: how W is drawn.

    - ``uniform``: cells U[-scale, scale] (the paper's captioning setting, scale = 10);
    - ``normal``: cells N(0, scale²);
    - ``l2``: normal rows divided by their L2 norm, times ``row_norm`` (the paper's MT setting);
    - ``rademacher``: cells ±row_norm/√d, so every row has norm ``row_norm``;
    - ``orthogonal``: ``nn.init.orthogonal_`` on (V, d). For V ≤ d the rows are orthonormal; for V > d
      they cannot be, and the columns are orthonormal instead (a tight frame). The matrix is scaled so
      that the root-mean-square row norm is ``row_norm`` (every row exactly when V ≤ d).

    ``bias``: ``fixed`` is a zero buffer (the paper's MT fixed model freezes weight and bias), ``learned``
    a zero-initialised Parameter, ``none`` no bias.
    """

    type: str = "fixed"
    init: Literal["uniform", "normal", "l2", "rademacher", "orthogonal"] = "l2"
    scale: float = 10.0  # uniform half-width / normal standard deviation
    row_norm: float = 1.0  # row L2 norm for l2, rademacher, orthogonal
    bias: BiasKind = "fixed"
    seed_offset: int = 0

    def validate(self, source: str, run_config: Any) -> None:
        super().validate(source, run_config)
        for key in ("scale", "row_norm"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"{source}: head.{key} = {getattr(self, key)}: must be positive")


def attach_bias(head: nn.Module, kind: str, vocab_size: int) -> None:
    """Give ``head.bias`` (V,): a persistent zero buffer, a zero Parameter, or None."""
    if kind == "fixed":
        head.register_buffer("bias", torch.zeros(vocab_size), persistent=True)
    elif kind == "learned":
        head.bias = nn.Parameter(torch.zeros(vocab_size))
    elif kind == "none":
        head.register_parameter("bias", None)
    else:
        raise ConfigError(f"head.bias = {kind!r}: expected 'fixed', 'learned' or 'none'")


def draw_matrix(init: str, vocab_size: int, dim: int, scale: float, row_norm: float,
                generator: torch.Generator) -> Tensor:
    """A (V, d) float32 CPU matrix drawn from ``generator`` as described in FixedHeadConfig."""
    shape = (vocab_size, dim)
    if init == "uniform":
        return torch.empty(shape).uniform_(-scale, scale, generator=generator)
    if init == "normal":
        return torch.randn(shape, generator=generator) * scale
    if init == "l2":
        rows = torch.randn(shape, generator=generator)
        return rows / rows.norm(dim=1, keepdim=True) * row_norm
    if init == "rademacher":
        signs = torch.randint(0, 2, shape, generator=generator).float() * 2 - 1
        return signs * (row_norm / math.sqrt(dim))
    if init == "orthogonal":
        matrix = nn.init.orthogonal_(torch.empty(shape), generator=generator)
        # rows (V ≤ d) or columns (V > d) orthonormal; RMS row norm is sqrt(min(V, d) / V) before scaling
        return matrix * (row_norm * math.sqrt(max(vocab_size, dim) / dim))
    raise ConfigError(f"head.init = {init!r}: expected uniform, normal, l2, rademacher or orthogonal")


@HEADS.register("fixed", FixedHeadConfig)
class FixedHead(LinearHead):
    """logits = W f + b with W (V, d) a fixed random buffer; only the features are optimised."""

    def __init__(self, context: HeadContext, config: FixedHeadConfig) -> None:
        super().__init__(context)
        generator = regenerable_generator(context.seed + config.seed_offset)
        weight = draw_matrix(config.init, context.vocab_size, context.feature_dim, config.scale,
                             config.row_norm, generator)
        self.register_buffer("weight", weight, persistent=True)  # (V, d)
        attach_bias(self, config.bias, context.vocab_size)
        self._zero_bias: WeightCache[bool] = WeightCache()

    @classmethod
    def from_config(cls, config: FixedHeadConfig, context: HeadContext) -> FixedHead:
        return cls(context, config)

    def logits(self, features: Tensor) -> Tensor:
        """W f + b; a fixed bias that is all zeros (``bias = "fixed"``) is left out: the product with a bias
        starts from a copy of it, a whole (…, V) pass that adds nothing (beam search runs this every step)."""
        bias = self.bias
        if isinstance(bias, Tensor) and not isinstance(bias, nn.Parameter):
            fixed = bias  # (V,) re-checked whenever it changes (a checkpoint loaded into it)
            if self._zero_bias.get([fixed], lambda: not bool(fixed.any())):
                bias = None
        return F.linear(features, self.weight, bias)  # (…, d) → (…, V)

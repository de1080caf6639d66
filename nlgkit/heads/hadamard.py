"""A fixed Hadamard classification layer (Hoffer et al. 2018), applied by a fast Walsh–Hadamard transform.

With n the next power of two ≥ max(V, d) and H the n×n Sylvester matrix (H[j, c] = (-1)^popcount(j & c)),
class j's target vector is row j of H restricted to d chosen columns c_0 < … < c_{d-1}, times a ±1 sign
per column and scale/√d (so rows have L2 norm ``scale``). Logits are computed as
``FWHT(scatter(f · signs · scale/√d → n slots))[:V]``: O(n log n) per vector, memory O(n), and no V×d
or n×n matrix ever exists.

Why not simply the first d columns (Hoffer's truncation)? For j < n those columns only see the low bits
of j, so rows j and j + 2^⌈log2 d⌉ coincide: with V > d many words would share one target vector. Here the
columns are the d = n full set when d = n (rows exactly orthogonal), and otherwise every unit column
1, 2, 4, …, n/2 (so any two rows differ: j ⊕ k has a set bit) plus a seeded random choice of the rest,
never column 0 (all ones: a constant added to every logit, useless under softmax). Inner products of
distinct rows are then those of random ±1 vectors, O(√d).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS
from nlgkit.core.seeding import regenerable_generator
from nlgkit.heads.base import HeadConfig, HeadContext, OutputHead
from nlgkit.heads.fixed import BiasKind, attach_bias


@dataclass(frozen=True)
class HadamardHeadConfig(HeadConfig):
    type: str = "hadamard"
    scale: float = 1.0  # L2 norm of every target vector (logits = scale/√d · ±1 row · f)
    bias: BiasKind = "fixed"  # as in the fixed head: zero buffer, learned Parameter, or none
    seed_offset: int = 0  # columns and signs come from context.seed + seed_offset

    def validate(self, source: str, run_config: Any) -> None:
        super().validate(source, run_config)
        if not self.scale > 0:
            raise ConfigError(f"{source}: head.scale = {self.scale}: must be positive")


def fwht(x: Tensor) -> Tensor:
    """Unnormalised Walsh–Hadamard transform over the last dim (n, a power of two): x (…, n) → x Hᵀ."""
    n = x.shape[-1]
    lead = x.shape[:-1]
    h = 1
    while h < n:
        pairs = x.reshape(*lead, n // (2 * h), 2, h)  # butterflies between blocks h apart
        a, b = pairs[..., 0, :], pairs[..., 1, :]
        x = torch.stack((a + b, a - b), dim=-2).reshape(*lead, n)
        h *= 2
    return x


def sylvester_hadamard(n: int) -> Tensor:
    """Dense n×n Sylvester Hadamard matrix: a reference for tests and small analyses only."""
    matrix = torch.ones(1, 1)
    while matrix.shape[0] < n:
        matrix = torch.cat([torch.cat([matrix, matrix], 1), torch.cat([matrix, -matrix], 1)], 0)
    return matrix


def choose_columns(dim: int, order: int, generator: torch.Generator) -> Tensor:
    """d sorted column indices of the order-n Hadamard matrix whose restricted rows are all distinct."""
    if dim == order:
        return torch.arange(order)
    units = [1 << b for b in range(order.bit_length() - 1)]  # 1, 2, …, n/2
    if dim < len(units):
        raise ConfigError(f"head.type = 'hadamard': feature dim {dim} < log2({order}); rows cannot be distinct")
    candidates = torch.tensor([c for c in range(1, order) if c & (c - 1)], dtype=torch.long)  # non-units
    picked = candidates[torch.randperm(len(candidates), generator=generator)[: dim - len(units)]]
    return torch.cat([torch.tensor(units, dtype=torch.long), picked]).sort().values


@HEADS.register("hadamard", HadamardHeadConfig)
class HadamardHead(OutputHead):
    """logits_j = scale/√d · Σ_i signs_i · H[j, columns_i] · f_i + b_j, for j < V; nothing trained."""

    columns: Tensor  # (d,) buffer
    signs: Tensor  # (d,) buffer
    bias: Tensor | None

    def __init__(self, context: HeadContext, config: HadamardHeadConfig) -> None:
        super().__init__(context)
        d, vocab = context.feature_dim, context.vocab_size
        self.order = 1 << (max(d, vocab) - 1).bit_length()  # n: next power of two ≥ max(V, d)
        self.coefficient = config.scale / math.sqrt(d)
        generator = regenerable_generator(context.seed + config.seed_offset)
        columns = choose_columns(d, self.order, generator)  # (d,)
        signs = torch.randint(0, 2, (d,), generator=generator).float() * 2 - 1  # (d,)
        # O(d) buffers, persistent so a checkpoint pins the exact layer
        self.register_buffer("columns", columns, persistent=True)
        self.register_buffer("signs", signs, persistent=True)
        attach_bias(self, config.bias, vocab)

    @classmethod
    def from_config(cls, config: HadamardHeadConfig, context: HeadContext) -> HadamardHead:
        return cls(context, config)

    def transform(self, features: Tensor) -> Tensor:
        """Features (…, d) → bias-free logits (…, V) through one FWHT of length n."""
        # at least float32: the log2(n) butterfly stages would compound bf16 rounding
        x = features.to(torch.promote_types(features.dtype, torch.float32))
        x = x * (self.signs.to(x.dtype) * self.coefficient)  # (…, d)
        padded = x.new_zeros(*x.shape[:-1], self.order).index_copy(-1, self.columns, x)  # (…, n)
        return fwht(padded)[..., : self.vocab_size]  # (…, V)

    def logits(self, features: Tensor) -> Tensor:
        logits = self.transform(features)
        return logits if self.bias is None else logits + self.bias

    def target_vectors(self) -> Tensor:
        """The (V, d) rows, materialised on request (analyses, tests): O(d·n) memory."""
        eye = torch.eye(self.feature_dim, device=self.signs.device)  # unit features pick out W's columns
        return self.transform(eye).t().contiguous()

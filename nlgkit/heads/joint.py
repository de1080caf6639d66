"""Structure-aware joint input–output embedding (Pappas, Miculicich & Henderson 2018, Eq. 12–15).

Weight tying scores a word by ⟨E[w], h⟩; the joint layer first maps both sides into a joint space of size
d_j, each through its own learned projection and non-linearity:

    logits = σ(E·U + b_u) · σ(V·h + b_v)ᵀ + b        (``structure = "full"``, Eq. 15)

with E the decoder's target input embedding (the same Parameter, not a copy), U: E → d_j, V: d → d_j and
σ = tanh by default. The ablations of their Table 3 keep one side at a time: ``output`` (Eq. 7a: σ(E·U + b_u)
· hᵀ, so d_j = d), ``context`` (Eq. 7b: E · σ(V·h + b_v)ᵀ, so d_j = E) and ``bilinear`` (Eq. 6: E·W·hᵀ, one
matrix W: d → E, no non-linearity). With identity projections, zero biases and no activation the full form
is weight tying (their Eq. 18; a test checks it). The output-side table σ(E·U + b_u) depends on no input, so
outside training it is computed once and reused at every decoding step until a weight changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS
from nlgkit.core.weight_cache import WeightCache
from nlgkit.heads.base import HeadConfig, HeadContext, OutputHead, SharesTargetEmbedding

ACTIVATIONS = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "none": lambda x: x}


@dataclass(frozen=True)
class JointHeadConfig(HeadConfig):
    type: str = "joint"
    joint_dim: int = 512  # d_j of the full form (512, 2048, 4096 in the paper); the ablations fix it
    structure: Literal["full", "output", "context", "bilinear"] = "full"
    activation: Literal["tanh", "sigmoid", "relu", "none"] = "tanh"  # σ
    bias: bool = True  # b over V

    def validate(self, source: str, run_config: object) -> None:
        super().validate(source, run_config)
        if self.joint_dim <= 0:
            raise ConfigError(f"{source}: head.joint_dim = {self.joint_dim}: must be positive")


@HEADS.register("joint", JointHeadConfig)
class JointHead(SharesTargetEmbedding, OutputHead):
    def __init__(self, context: HeadContext, joint_dim: int = 512, structure: str = "full",
                 activation: str = "tanh", bias: bool = True) -> None:
        super().__init__(context)
        embedding = context.target_embedding
        if embedding.num_embeddings != context.vocab_size:
            raise ConfigError(f"head.type = 'joint': target embedding has {embedding.num_embeddings} rows, "
                              f"vocabulary has {context.vocab_size}")
        self.weight = cast(nn.Parameter, embedding.weight)  # (V, E): the decoder's own embedding, shared
        emb_dim, d = embedding.embedding_dim, context.feature_dim
        self.structure, self.sigma = structure, ACTIVATIONS[activation]
        self.output_proj: nn.Linear | None = None  # U (with b_u): E → d_j
        self.context_proj: nn.Linear | None = None  # V (with b_v): d → d_j
        if structure == "full":
            self.output_proj, self.context_proj = nn.Linear(emb_dim, joint_dim), nn.Linear(d, joint_dim)
        elif structure == "output":
            self.output_proj = nn.Linear(emb_dim, d)
        elif structure == "context":
            self.context_proj = nn.Linear(d, emb_dim)
        else:  # bilinear: E·W·h
            self.context_proj = nn.Linear(d, emb_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(context.vocab_size)) if bias else None  # (V,)
        self._table: WeightCache[Tensor] = WeightCache()  # inference-time σ(E·U + b_u)

    def train(self, mode: bool = True) -> JointHead:
        if mode:  # optimiser steps follow; fused Adam does not bump version counters (nlgkit.core.weight_cache)
            self._table.clear()
        return super().train(mode)

    @classmethod
    def from_config(cls, config: JointHeadConfig, context: HeadContext) -> JointHead:
        return cls(context, joint_dim=config.joint_dim, structure=config.structure, activation=config.activation,
                   bias=config.bias)

    def output_table(self) -> Tensor:
        """The words in the joint space (V, d_j): σ(E·U + b_u), or E itself without output structure."""
        if self.output_proj is None:
            return self.weight
        if self.training or torch.is_grad_enabled():
            return self.sigma(self.output_proj(self.weight))
        projection = self.output_proj
        return self._table.get([self.weight, *projection.parameters()],
                               lambda: self.sigma(projection(self.weight)))

    def context_features(self, features: Tensor) -> Tensor:
        """The decoder features in the joint space (…, d_j)."""
        if self.context_proj is None:
            return features
        projected = self.context_proj(features)
        return projected if self.structure == "bilinear" else self.sigma(projected)

    def logits(self, features: Tensor) -> Tensor:
        return F.linear(self.context_features(features), self.output_table(), self.bias)  # (…, V)

    def candidate_logits(self, features: Tensor, rows: Tensor) -> Tensor:
        words = self.weight.index_select(0, rows)
        table = self.sigma(self.output_proj(words)) if self.output_proj is not None else words
        bias = None if self.bias is None else self.bias.index_select(0, rows)
        return F.linear(self.context_features(features), table, bias)

    def target_vectors(self) -> Tensor:
        return self.output_table()

"""Weight tying (Press & Wolf 2017): the target vectors are the decoder's input embedding.

The head holds the embedding's own Parameter (same object, same storage), so an update through either
path moves both and nothing has to be re-tied after building or loading. Tying forces the target vectors
into the embedding dimension E; when the features have another dimension d, a learned projection
d → E is applied first (the extra cost the paper points out for tied models).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS
from nlgkit.heads.base import HeadConfig, HeadContext, OutputHead, SharesTargetEmbedding, linear_rows


@dataclass(frozen=True)
class TiedHeadConfig(HeadConfig):
    type: str = "tied"
    bias: bool = True  # own learned bias over V (zero-initialised); the embedding has none
    projection_bias: bool = False  # only used when d ≠ E
    projection_activation: Literal["none", "tanh"] = "none"  # applied after the projection (if any)


@HEADS.register("tied", TiedHeadConfig)
class TiedHead(SharesTargetEmbedding, OutputHead):
    """logits = E_emb · σ(P f) + b, with E_emb the (V, E) target embedding; P only when d ≠ E.

    The shared weight is saved by the embedding only (:class:`SharesTargetEmbedding`).
    """

    def __init__(self, context: HeadContext, bias: bool = True, projection_bias: bool = False,
                 projection_activation: str = "none") -> None:
        super().__init__(context)
        embedding = context.target_embedding
        if embedding.num_embeddings != context.vocab_size:
            raise ConfigError(
                f"head.type = 'tied': target embedding has {embedding.num_embeddings} rows, "
                f"vocabulary has {context.vocab_size}"
            )
        self.weight = cast(nn.Parameter, embedding.weight)  # (V, E): the same Parameter, no copy
        emb_dim = embedding.embedding_dim
        self.projection: nn.Linear | None = None
        if context.feature_dim != emb_dim:
            self.projection = nn.Linear(context.feature_dim, emb_dim, bias=projection_bias)  # d → E
        self.activation = projection_activation
        self.bias = nn.Parameter(torch.zeros(context.vocab_size)) if bias else None  # (V,)

    @classmethod
    def from_config(cls, config: TiedHeadConfig, context: HeadContext) -> TiedHead:
        return cls(context, bias=config.bias, projection_bias=config.projection_bias,
                   projection_activation=config.projection_activation)

    def project(self, features: Tensor) -> Tensor:
        """Features (…, d) → (…, E) in the embedding space (identity when d == E)."""
        if self.projection is None:
            return features
        projected = self.projection(features)
        return torch.tanh(projected) if self.activation == "tanh" else projected

    def logits(self, features: Tensor) -> Tensor:
        return F.linear(self.project(features), self.weight, self.bias)  # (…, V)

    def candidate_logits(self, features: Tensor, rows: Tensor) -> Tensor:
        return linear_rows(self.project(features), self.weight, self.bias, rows)

    def target_vectors(self) -> Tensor:
        return self.weight

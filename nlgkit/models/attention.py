"""Additive (Bahdanau) attention with the source-side projection computed once per sentence.

The energy ``tanh(W [s; h] + b)`` is linear in the concatenation, so ``W`` splits into a query part
(applied to the decoder state every step) and a key part (applied to the encoder outputs once). Same
parameters and same function as the one ``Linear(dec + enc → attn)``, far fewer FLOPs per step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class AdditiveAttention(nn.Module):
    def __init__(self, query_dim: int, key_dim: int, attention_dim: int) -> None:
        super().__init__()
        self.query_dim = query_dim
        self.energy = nn.Linear(query_dim + key_dim, attention_dim)  # over [decoder state; encoder output]
        self.score = nn.Linear(attention_dim, 1, bias=False)

    @property
    def query_weight(self) -> Tensor:
        return self.energy.weight[:, : self.query_dim]  # (A, Dq)

    def project_keys(self, encoder_out: Tensor) -> Tensor:
        """(B, S, Dk) → (B, S, A): the source part of the energy plus its bias, once per sentence."""
        return F.linear(encoder_out, self.energy.weight[:, self.query_dim :], self.energy.bias)

    def project_query(self, state: Tensor) -> Tensor:
        """(B, Dq) → (B, A)."""
        return F.linear(state, self.query_weight)

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, pad_mask: Tensor) -> Tensor:
        """Context (B, Dk) from a projected query (B, A), keys (B, S, A), values (B, S, Dk), pad_mask (B, S)."""
        energy = torch.tanh(keys + query.unsqueeze(1))  # (B, S, A)
        scores = self.score(energy).squeeze(-1)  # (B, S)
        scores = scores.masked_fill(pad_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, S)
        return torch.bmm(weights.unsqueeze(1), values).squeeze(1)  # (B, Dk)

"""Attention over padded source sentences, and the helpers every source-reading model shares.

Additive (Bahdanau) attention computes its source-side projection once per sentence.

The energy ``tanh(W [s; h] + b)`` is linear in the concatenation, so ``W`` splits into a query part
(applied to the decoder state every step) and a key part (applied to the encoder outputs once). Same
parameters and same function as the one ``Linear(dec + enc → attn)``, far fewer FLOPs per step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def padding_mask(lengths: Tensor, width: int) -> Tensor:
    """(B, width): True beyond each sentence's length (from lengths, not token values)."""
    return torch.arange(width, device=lengths.device)[None, :] >= lengths[:, None]


def run_packed(rnn: nn.RNNBase, embedded: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor | tuple[Tensor, Tensor]]:
    """Run ``rnn`` over padded sequences (B, S, E) without reading the padding: outputs (B, S, H), final state."""
    packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
    packed_out, final = rnn(packed)
    output, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=embedded.size(1))
    return output, final


def masked_attention(scores: Tensor, values: Tensor, pad_mask: Tensor) -> tuple[Tensor, Tensor]:
    """softmax over the unmasked scores (B, S), then the weighted sum of values (B, S, D): the context (B, D)
    and the weights (B, S).

    ``scores`` is masked in place: callers pass a tensor they have just computed and do not use again."""
    weights = torch.softmax(scores.masked_fill_(pad_mask, float("-inf")), dim=-1)
    return torch.bmm(weights.unsqueeze(1), values).squeeze(1), weights


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

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, pad_mask: Tensor) -> tuple[Tensor, Tensor]:
        """Context (B, Dk) and weights (B, S) from a projected query (B, A), keys (B, S, A), values (B, S, Dk)
        and pad_mask (B, S)."""
        energy = (keys + query.unsqueeze(1)).tanh_()  # (B, S, A), in place: one (B, S, A) buffer per step, not two
        return masked_attention(self.score(energy).squeeze(-1), values, pad_mask)

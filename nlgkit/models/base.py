"""The generator-model protocol shared by translation and captioning models.

Search knows nothing about architectures: it calls ``encode`` once, then ``step`` and ``reorder``, and
turns features into scores with ``model.head.log_probs``. Training calls ``features`` (teacher forcing)
and ``model.head.loss``. State is a dict of tensors whose first dimension is the batch (or beam) index.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from nlgkit.heads.base import OutputHead

State = dict[str, Tensor]


class Generator(nn.Module):
    """An encoder–decoder that stops at features; its single ``head`` maps them to the vocabulary."""

    head: OutputHead
    feature_dim: int

    def encode(self, *inputs: Any) -> State:
        """Encode a batch of inputs (source tokens and lengths, or images) into the decoder's start state."""
        raise NotImplementedError

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """One decoding step: prev_tokens (B,) → features (B, d) and the next state."""
        raise NotImplementedError

    def reorder(self, state: State, index: Tensor) -> State:
        """Select/duplicate batch rows of the state (beam search): every tensor is indexed on dim 0."""
        return {key: value.index_select(0, index) for key, value in state.items()}

    def features(self, *inputs: Any, prev_tokens: Tensor) -> Tensor:
        """Teacher-forced features (B, T, d) for decoder inputs prev_tokens (B, T)."""
        raise NotImplementedError

"""What the multimodal translation models share (Hirasawa & Komachi 2019, §3 and §5.3).

- :class:`MultimodalRNNConfig`: the paper's sizes (§5.3) for the models built on the text-only ``rnn`` model
  (IMAGINATION, VAG-NMT): one-layer bidirectional GRU encoder of 256 per direction, embeddings and output
  vectors of 300, dropout 0.3, and the tanh of Eqs. 16/23 on the pre-output layer. The paper does not give the
  decoder and attention sizes; 256 and 512 are nmtpytorch's (decoder = encoder size, attention = the 512-d
  annotations), the toolkit the paper used.
- :func:`ranking_loss`: the max-margin loss over cosine similarities with the other examples of the batch as
  contrastive ones (IMAGINATION's Eq. 28, each direction of VAG-NMT's Eq. 35), restricted to the examples that
  have an image.
- :func:`require_complete_images`: models that read the image at test time refuse data where some sentences
  have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from nlgkit.core.errors import ConfigError
from nlgkit.models.base import Inputs, ModelContext
from nlgkit.models.rnn import RNNConfig


@dataclass(frozen=True)
class MultimodalRNNConfig(RNNConfig):
    embedding_dim: int = 300
    encoder_dim: int = 256  # per direction: the bidirectional annotations h_i have 512
    decoder_dim: int = 256
    attention_dim: int = 512
    pre_output_dim: int = 300  # the paper's "output vector size"
    pre_output_activation: Literal["none", "tanh"] = "tanh"
    dropout: float = 0.3


def check_non_negative(config: Any, source: str, keys: tuple[str, ...]) -> None:
    for key in keys:
        if getattr(config, key) < 0:
            raise ConfigError(f"{source}: model.{key} = {getattr(config, key)}: must not be negative")


def require_complete_images(context: ModelContext, model: str) -> None:
    """A model that reads every sentence's image, also when translating, needs data where all have one."""
    if not context.require("image_complete", model):
        raise ConfigError(
            f"model.type = {model!r} reads the image of every sentence, in training and when translating, but "
            "some sentences of this data have no image: prepare the pairs that have one "
            "(`nlgkit prepare multi30k --images DIR --covered-only`), or choose model.type = 'imagination', "
            "which needs images for training only")


def image_mask(inputs: Inputs, like: Tensor) -> Tensor:
    """(B,) 1.0 where the example has an image (all, when the batch does not say)."""
    mask = inputs.get("image_mask")
    return like.new_ones(like.size(0)) if mask is None else mask.to(like.dtype)


def masked_mean(values: Tensor, pad_mask: Tensor) -> Tensor:
    """(B, S, D) → (B, D): the mean over each sentence's real positions (pad_mask (B, S) True on padding)."""
    keep = (~pad_mask).unsqueeze(-1).to(values.dtype)  # (B, S, 1)
    return (values * keep).sum(1) / keep.sum(1).clamp(min=1.0)


def cosine_matrix(anchors: Tensor, others: Tensor) -> Tensor:
    """(B, D), (B, D) → (B, B): cosine similarity of every anchor to every other row (zero rows give 0)."""
    return F.normalize(anchors, dim=-1) @ F.normalize(others, dim=-1).transpose(0, 1)


def ranking_loss(similarity: Tensor, mask: Tensor, margin: float) -> Tensor:
    """Σ_{j ≠ i} max(0, margin − s_ii + s_ij), averaged over the anchors i.

    ``similarity`` (B, B): anchors on the rows, each one's positive on the diagonal, the other examples of the
    batch as its contrastive ones; ``mask`` (B,): only examples with 1 serve as anchors or contrastive
    examples. Fewer than two such examples form no pair: the loss is then a zero still attached to the graph.
    """
    keep = mask.bool()
    pairs = keep.unsqueeze(1) & keep.unsqueeze(0)  # (B, B)
    pairs &= ~torch.eye(similarity.size(0), dtype=torch.bool, device=similarity.device)
    cost = torch.relu(margin - similarity.diagonal().unsqueeze(1) + similarity)  # (B, B)
    anchors = keep.sum().clamp(min=1).to(similarity.dtype)
    return torch.where(pairs, cost, torch.zeros_like(cost)).sum() / anchors

"""VAG-NMT, Visual Attention Grounding NMT (Zhou et al. 2018), as Hirasawa & Komachi describe it (§3.3).

The image decides which source words make up the sentence representation: with the pooled image vector v
as query, z_i = tanh(W_v v) · tanh(W_h h_i) over the annotations h_i, β = softmax(z) over the sentence's
words and t = Σ_i β_i h_i (Eqs. 29–31). The decoder is the ``rnn`` model's (this class inherits it, with its
attention over the annotations h_i and its search tables) and starts from
s_0 = tanh(W_init(ρ t + (1 − ρ) mean_i h_i)), ρ = ``init_ratio`` = 0.5 (Eq. 32; W_init is the inherited
``bridge``, which the text-only model applies to the final encoder states). Training adds the grounding task:
t and v are projected into a shared space of ``shared_dim`` = 512 (t_emb = tanh(W_t t + b_t), v_emb =
tanh(W_v v + b_v), Eqs. 33–34) and ranked against the other examples of the batch in both directions with
margin γ = 0.1 (Eq. 35: each image against the other sentences, each sentence against the other images;
cosine similarity; averaged over the anchors), returned as the auxiliary loss ``grounding``.

Weighting: the paper uses Eq. 26, λ·J_T + (1 − λ)·J_V with λ = 0.5; the trainer adds the auxiliary loss to the
head's per-token loss, so ``grounding_weight`` = (1 − λ)/λ = 1.0 is the same objective up to the factor λ.
(Zhou et al. themselves weight the two tasks unequally; set ``grounding_weight`` = (1 − λ)/λ for their λ.)
The image is read when translating too: the data must give every sentence its image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import MODELS
from nlgkit.data.batching import Batch
from nlgkit.models.base import Inputs, ModelContext, State, check_model_options
from nlgkit.models.grounding import (
    MultimodalRNNConfig,
    check_non_negative,
    cosine_matrix,
    image_mask,
    masked_mean,
    ranking_loss,
    require_complete_images,
)
from nlgkit.models.rnn import RNNModel

NAME = "vag_nmt"


@dataclass(frozen=True)
class VAGConfig(MultimodalRNNConfig):
    needs_image: ClassVar[bool] = True  # translating reads each sentence's image (the task asks for it)
    type: str = NAME
    visual_attention_dim: int = 512  # the space of Eq. 29's dot product (not given: the annotations' size)
    shared_dim: int = 512  # the shared visual–text space (§5.3)
    init_ratio: float = 0.5  # ρ of Eq. 32: the share of t in the decoder's start
    margin: float = 0.1  # γ of Eq. 35
    grounding_weight: float = 1.0  # (1 − λ)/λ for the paper's λ = 0.5; 0 leaves the grounding task out
    training_only: ClassVar[tuple[str, ...]] = (*MultimodalRNNConfig.training_only, "margin", "grounding_weight")

    def validate(self, source: str, run_config: Any) -> None:
        super().validate(source, run_config)
        check_model_options(self, source, ("visual_attention_dim", "shared_dim"))
        check_non_negative(self, source, ("margin", "grounding_weight"))
        if not 0.0 <= self.init_ratio <= 1.0:
            raise ConfigError(f"{source}: model.init_ratio = {self.init_ratio}: must be in [0, 1]")


@MODELS.register(NAME, VAGConfig)
class VAGNMT(RNNModel):
    config: VAGConfig

    def __init__(self, config: VAGConfig, context: ModelContext) -> None:
        pooled_dim = context.require("image_pooled_dim", NAME)
        require_complete_images(context, NAME)
        super().__init__(config, context)
        annotation_dim = (2 if config.bidirectional else 1) * config.encoder_dim
        self.image_query = nn.Linear(pooled_dim, config.visual_attention_dim, bias=False)  # W_v of Eq. 29
        self.annotation_key = nn.Linear(annotation_dim, config.visual_attention_dim, bias=False)  # W_h
        self.text_space = nn.Linear(annotation_dim, config.shared_dim)  # W_t, b_t (Eq. 33)
        self.image_space = nn.Linear(pooled_dim, config.shared_dim)  # W_v, b_v (Eq. 34)

    def visual_attention(self, encoder_out: Tensor, pad_mask: Tensor, image: Tensor) -> tuple[Tensor, Tensor]:
        """The image-weighted sentence representation t (B, C) and its weights β (B, S), from the
        annotations (B, S, C), their padding mask (B, S) and the pooled image vector (B, P)."""
        query = torch.tanh(self.image_query(image.to(encoder_out.dtype))).unsqueeze(1)  # (B, 1, A)
        scores = (torch.tanh(self.annotation_key(encoder_out)) * query).sum(-1)  # (B, S)
        weights = torch.softmax(scores.masked_fill(pad_mask, float("-inf")), dim=-1)  # β (Eq. 30)
        return torch.bmm(weights.unsqueeze(1), encoder_out).squeeze(1), weights  # t (Eq. 31)

    def encode_grounded(self, inputs: Inputs) -> tuple[State, Tensor]:
        """The decoder's start state (Eq. 32) and the sentence representation t (B, C)."""
        state = super().encode(inputs)  # annotations, attention keys, padding mask; its start is replaced
        text, _ = self.visual_attention(state["encoder_out"], state["pad_mask"], inputs["image_pooled"])
        ratio = self.config.init_ratio
        mixed = ratio * text + (1.0 - ratio) * masked_mean(state["encoder_out"], state["pad_mask"])  # (B, C)
        start = torch.tanh(self.bridge(mixed))  # (B, D)
        state["hidden"] = start.unsqueeze(1).expand(-1, self.config.decoder_layers, -1).contiguous()
        return state, text

    def encode(self, inputs: Inputs) -> State:
        """src (B, S), src_lengths (B,), image_pooled (B, P) → decoder start state."""
        return self.encode_grounded(inputs)[0]

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """Teacher-forced features and the weighted grounding loss ``grounding`` (Eq. 35)."""
        state, text = self.encode_grounded(batch.inputs)
        features = self.teacher_forcing(batch.prev_tokens, state)
        if self.config.grounding_weight == 0:
            return features, {}
        image = batch.inputs["image_pooled"].to(text.dtype)
        images = torch.tanh(self.image_space(image))  # (B, shared)
        sentences = torch.tanh(self.text_space(text))  # (B, shared)
        similarity = cosine_matrix(images, sentences)  # (B, B): image p against sentence k
        mask, margin = image_mask(batch.inputs, text), self.config.margin
        loss = ranking_loss(similarity, mask, margin) + ranking_loss(similarity.transpose(0, 1), mask, margin)
        return features, {"grounding": self.config.grounding_weight * loss}

"""IMAGINATION (Elliott & Kádár 2017): the text-only ``rnn`` model that also learns to predict its image.

Translation is the ``rnn`` model's, unchanged (this class inherits its encoder, decoder, ``encode``, ``step``
and search tables), so decoding never reads an image and equals the ``rnn`` model's for the same weights.
Training adds the auxiliary task on the shared encoder (Hirasawa & Komachi's Eqs. 25 and 28): the mean of the
annotations h_i is mapped to v̂ = tanh(W_v · mean_i h_i) in a latent space of ``latent_dim`` (2048, §5.3),
which is the space of the pooled image vector v (ResNet-50 pool5: 2048). For a CNN whose pooled vector has
another size P, a second, linear layer reads v̂ out into P dimensions (v̂ is then a hidden layer). The loss
Σ_{v' ≠ v} max(0, α − cos(v̂, v) + cos(v̂, v')), α = ``margin`` = 0.1, takes the other images of the batch
as the contrastive v', averages over the sentences, and counts only the examples that have an image (a
batch with fewer than two has no pair and a zero loss), returned as the auxiliary loss ``image``.

Weighting: the paper interpolates λ·J_T + (1 − λ)·J_V with λ = 0.5. The trainer adds the auxiliary loss to the
head's per-token loss, so ``image_loss_weight`` = (1 − λ)/λ = 1.0 gives the same objective up to the factor
λ, which Adam's steps do not see (it rescales the gradient clipping threshold only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from torch import Tensor, nn

from nlgkit.core.registry import MODELS
from nlgkit.data.batching import Batch
from nlgkit.models.base import ModelContext, check_model_options
from nlgkit.models.grounding import (
    MultimodalRNNConfig,
    check_non_negative,
    cosine_matrix,
    image_mask,
    masked_mean,
    ranking_loss,
)
from nlgkit.models.rnn import RNNModel


@dataclass(frozen=True)
class ImaginationConfig(MultimodalRNNConfig):
    type: str = "imagination"
    latent_dim: int = 2048  # the latent space of v̂; a readout to the pooled size P when they differ
    margin: float = 0.1  # α of the max-margin loss
    image_loss_weight: float = 1.0  # (1 − λ)/λ for the paper's λ = 0.5; 0 trains the text model alone
    training_only: ClassVar[tuple[str, ...]] = (*MultimodalRNNConfig.training_only, "margin", "image_loss_weight")

    def validate(self, source: str, run_config: Any) -> None:
        super().validate(source, run_config)
        check_model_options(self, source, ("latent_dim",))
        check_non_negative(self, source, ("margin", "image_loss_weight"))


@MODELS.register("imagination", ImaginationConfig)
class Imagination(RNNModel):
    config: ImaginationConfig

    def __init__(self, config: ImaginationConfig, context: ModelContext) -> None:
        pooled_dim = context.require("image_pooled_dim", "imagination")
        super().__init__(config, context)  # the rnn model's layers first: a seed draws the same text model
        annotation_dim = (2 if config.bidirectional else 1) * config.encoder_dim
        layers: list[nn.Module] = [nn.Linear(annotation_dim, config.latent_dim), nn.Tanh()]  # Eq. 25
        if config.latent_dim != pooled_dim:
            layers.append(nn.Linear(config.latent_dim, pooled_dim))  # latent space → the image vector's size
        self.imagine = nn.Sequential(*layers)

    def imagined(self, encoder_out: Tensor, pad_mask: Tensor) -> Tensor:
        """v̂ (B, P): the image the sentence predicts from its annotations (B, S, C)."""
        return self.imagine(masked_mean(encoder_out, pad_mask))

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """The rnn model's teacher-forced features, and the weighted image-prediction loss ``image``."""
        state = self.encode(batch.inputs)
        features = self.teacher_forcing(batch.prev_tokens, state)
        if self.config.image_loss_weight == 0:
            return features, {}
        predicted = self.imagined(state["encoder_out"], state["pad_mask"])  # (B, P)
        images = batch.inputs["image_pooled"].to(predicted.dtype)  # (B, P)
        similarity = cosine_matrix(predicted, images)  # (B, B): sentence i against image j
        loss = ranking_loss(similarity, image_mask(batch.inputs, predicted), self.config.margin)
        return features, {"image": self.config.image_loss_weight * loss}

"""Doubly-attentive NMT (Calixto, Liu & Campbell 2017): a decoder with one attention over the source words and
another over the regions of the image.

Encoder: embeddings → one-layer bidirectional GRU, annotations h_i (Hirasawa & Komachi's Eqs. 1–3); the
decoder starts from tanh(W [→h_N; ←h_1]), as the ``rnn`` model does. Per step t, from the previous state
s_{t−1}: the textual context c_t = attention(s_{t−1}, h) and the visual context
i_t = β_t · attention'(s_{t−1}, a) over the L regions a_l of the spatial image map (C channels), two
independent additive attentions (Eqs. 5–9), with the gating scalar β_t = σ(w · s_{t−1} + b) (Eqs. 10–11);
s_t = GRU([e(y_{t−1}); c_t; i_t], s_{t−1}); features f_t = tanh(L [s_t; c_t; i_t; e(y_{t−1})]) (Eq. 16, the
paper's "output vector" of 300). The head, attached by the builder, owns the output layer.

This is Calixto et al.'s own (Bahdanau-style) decoder, the one the ``rnn`` model follows: both contexts feed
the one GRU cell and the pre-output layer. nmtpytorch's version, which Hirasawa & Komachi ran and describe
(Eqs. 4, 12–15), is a conditional GRU: a first GRU proposes s_j from the previous word, the attentions read
that proposal, and a second GRU combines it with both contexts. The image is read when translating too, so
the data must give every sentence its image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

import torch
from torch import Tensor, nn

from nlgkit.core import alignment
from nlgkit.core.registry import MODELS, PluginConfig
from nlgkit.models.attention import AdditiveAttention, padding_mask, run_packed
from nlgkit.models.base import Generator, Inputs, ModelContext, State, check_model_options
from nlgkit.models.grounding import require_complete_images
from nlgkit.models.rnn import DecoderCell

if TYPE_CHECKING:
    from nlgkit.data.batching import Batch

NAME = "doubly_attentive"


@dataclass(frozen=True)
class DoublyAttentiveConfig(PluginConfig):
    """Hirasawa & Komachi's sizes (§5.3); decoder and attention sizes are nmtpytorch's (not in the paper)."""

    needs_image: ClassVar[bool] = True  # translating reads each sentence's image (the task asks for it)
    type: str = NAME
    embedding_dim: int = 300
    encoder_dim: int = 256  # per direction: the annotations h_i have 512
    decoder_dim: int = 256
    attention_dim: int = 512  # of both attentions
    pre_output_dim: int = 300  # d: the features the head sees
    gate: bool = True  # the gating scalar β_t on the visual context
    dropout: float = 0.3  # on embeddings and on the pre-output input

    def validate(self, source: str, run_config: Any) -> None:
        check_model_options(self, source, ("embedding_dim", "encoder_dim", "decoder_dim", "attention_dim",
                                           "pre_output_dim"))


@MODELS.register(NAME, DoublyAttentiveConfig)
class DoublyAttentive(Generator):
    # from encode, the same for all beams of a sentence
    static_state = frozenset({"encoder_out", "keys", "pad_mask", "regions", "region_keys", "region_mask"})

    def __init__(self, config: DoublyAttentiveConfig, context: ModelContext) -> None:
        super().__init__()
        src_vocab_size = context.require("src_vocab_size", NAME)
        channels = context.require("image_channels", NAME)
        context.require("image_regions", NAME)
        require_complete_images(context, NAME)
        self.config = config
        self.pad_index = context.pad_index
        annotation_dim = 2 * config.encoder_dim
        context_dim = annotation_dim + channels  # [c_t; i_t]
        self.src_embed = nn.Embedding(src_vocab_size, config.embedding_dim, padding_idx=context.pad_index)
        self.tgt_embed = nn.Embedding(context.tgt_vocab_size, config.embedding_dim, padding_idx=context.pad_index)
        self.encoder = nn.GRU(config.embedding_dim, config.encoder_dim, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(annotation_dim, config.decoder_dim)
        self.attention = AdditiveAttention(config.decoder_dim, annotation_dim, config.attention_dim)  # over h
        self.image_attention = AdditiveAttention(config.decoder_dim, channels, config.attention_dim)  # over a
        self.gate = nn.Linear(config.decoder_dim, 1) if config.gate else None  # β_t
        self.decoder = DecoderCell("gru", config.embedding_dim, context_dim, config.decoder_dim, 1)
        self.pre_output = nn.Linear(config.decoder_dim + context_dim + config.embedding_dim, config.pre_output_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.feature_dim = config.pre_output_dim

    def encode(self, inputs: Inputs) -> State:
        """src (B, S), src_lengths (B,), image_spatial (B, L, C) → decoder start state."""
        src, src_lengths = inputs["src"], inputs["src_lengths"]
        embedded = self.dropout(self.src_embed(src))  # (B, S, E)
        encoder_out, final = run_packed(self.encoder, embedded, src_lengths)  # (B, S, 2H), (2, B, H)
        final = cast(Tensor, final)
        start = torch.tanh(self.bridge(torch.cat([final[-2], final[-1]], dim=-1)))  # (B, D)
        regions = inputs["image_spatial"].to(encoder_out.dtype)  # (B, L, C)
        return {
            "hidden": start,
            "encoder_out": encoder_out,
            "keys": self.attention.project_keys(encoder_out),  # (B, S, A), once per sentence
            "pad_mask": padding_mask(src_lengths.to(src.device), src.size(1)),  # (B, S)
            "regions": regions,
            "region_keys": self.image_attention.project_keys(regions),  # (B, L, A), once per image
            "region_mask": regions.new_zeros(regions.shape[:2], dtype=torch.bool),  # (B, L): every region counts
        }

    def contexts(self, state: State) -> tuple[Tensor, Tensor, Tensor]:
        """The textual context c_t (B, 2H), the gated visual context i_t (B, C) and the textual attention
        weights (B, S) for the state s_{t−1}."""
        hidden = state["hidden"]  # (B, D)
        text, weights = self.attention(self.attention.project_query(hidden), state["keys"], state["encoder_out"],
                                       state["pad_mask"])
        image, _ = self.image_attention(self.image_attention.project_query(hidden), state["region_keys"],
                                        state["regions"], state["region_mask"])
        if self.gate is not None:
            image = torch.sigmoid(self.gate(hidden)) * image  # β_t (B, 1): how much the image says now
        return text, image, weights

    def _advance(self, embedding_gates: Tensor, state: State,
                 context_weight: Tensor | None = None) -> tuple[Tensor, Tensor, State]:
        """One step from y_{t−1}'s share of the cell's input gates (B, 3D): s_t, [c_t; i_t] and the next state."""
        text, image, weights = self.contexts(state)
        context = torch.cat([text, image], dim=-1)  # (B, 2H + C)
        (hidden,), _ = self.decoder(embedding_gates, context, [state["hidden"]], [], context_weight=context_weight)
        new_state = {**state, "hidden": hidden}
        alignment.report(new_state, state, weights)
        return hidden, context, new_state

    def _features(self, output: Tensor, context: Tensor, embedded: Tensor) -> Tensor:
        return torch.tanh(self.pre_output(self.dropout(torch.cat([output, context, embedded], dim=-1))))

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """prev_tokens (B,) → features (B, d), next state."""
        embedded = self.dropout(self.tgt_embed(prev_tokens))  # (B, E)
        output, context, state = self._advance(self.decoder.project_embeddings(embedded), state)
        return self._features(output, context, embedded), state

    def step_modules(self) -> tuple[nn.Module, ...]:
        return self.attention, self.image_attention, self.decoder  # what _advance calls at every step

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """Teacher forcing: batch.prev_tokens (B, T) → features (B, T, d); no auxiliary loss.

        The embeddings, their share of the cell's input gates and the pre-output layer run once over all steps.
        """
        state = self.encode(batch.inputs)
        embedded = self.dropout(self.tgt_embed(batch.prev_tokens))  # (B, T, E)
        context_weight = self.decoder.context_weight()  # sliced once per batch (see DecoderCell.context_weight)
        outputs, contexts = [], []
        for step_gates in self.decoder.project_embeddings(embedded).unbind(1):  # (B, 3D) per step
            output, context, state = self._advance(step_gates, state, context_weight)
            outputs.append(output)
            contexts.append(context)
        return self._features(torch.stack(outputs, dim=1), torch.stack(contexts, dim=1), embedded), {}

"""ConvS2S (Gehring et al. 2017, "Convolutional Sequence to Sequence Learning"), with incremental decoding.

Encoder and decoder are stacks of convolution blocks (GLU, residual connections scaled by √½) over word plus
learned position embeddings; every decoder layer attends to the source on its own (multi-step attention);
weight normalisation, initialisation and dropout as in the paper and fairseq's ``fconv``. The model stops at
the decoder's last projection (``output_dim``: fairseq's ``decoder_out_embed_dim``); the head is the output
layer, so every head works with it.

Layers are written as blocks ``[channels, kernel width, repeat]``, e.g. fairseq's ``fconv_wmt_en_de`` is
``[[512, 3, 9], [1024, 3, 4], [2048, 1, 2]]``. The defaults are fairseq's base ``fconv`` (embeddings 512,
20 layers of 512 channels and width 3 on each side, output 256).

Incremental decoding: ``encode`` computes the attention keys and values once per sentence; each ``step``
feeds one position through every decoder layer, which keeps its last ``kernel − 1`` inputs in the state
(``window{i}``, batch-first so the search's ``reorder`` moves them with their beams). Nothing of the prefix
is recomputed, and step-by-step features equal teacher forcing (tested).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from nlgkit.core import alignment
from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import MODELS, PluginConfig
from nlgkit.core.weight_cache import WeightCache
from nlgkit.data.batching import Batch
from nlgkit.models.attention import padding_mask
from nlgkit.models.base import Generator, Inputs, ModelContext, State, check_model_options, source_embedding
from nlgkit.models.convs2s_layers import ConvDecoder, ConvEncoder

Blocks = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class ConvS2SConfig(PluginConfig):
    type: str = "convs2s"
    embedding_dim: int = 512
    encoder_layers: Blocks = ((512, 3, 20),)  # blocks of [channels, kernel width, repeat], bottom first
    decoder_layers: Blocks = ((512, 3, 20),)
    output_dim: int = 256  # the features the head sees (fairseq's decoder_out_embed_dim)
    max_positions: int = 1024  # rows of each learned position table: the longest sentence (tokens + EOS)
    share_embeddings: bool = False  # one table for source and target words (needs one joint vocabulary)
    weight_norm: bool = True
    dropout: float = 0.1

    def layers(self, side: str) -> list[tuple[int, int]]:
        """The (channels, kernel width) of every layer of ``side`` ("encoder" or "decoder"), bottom first."""
        blocks = self.encoder_layers if side == "encoder" else self.decoder_layers
        return [(block[0], block[1]) for block in blocks for _ in range(block[2])]

    def validate(self, source: str, run_config: Any) -> None:
        check_model_options(self, source, ("embedding_dim", "output_dim", "max_positions"))
        for side in ("encoder", "decoder"):
            key = f"{side}_layers"
            blocks = getattr(self, key)
            if not blocks:
                raise ConfigError(f"{source}: model.{key} is empty: give blocks [channels, kernel width, repeat]")
            for i, block in enumerate(blocks):
                if len(block) != 3 or min(block) <= 0:
                    raise ConfigError(f"{source}: model.{key}[{i}] = {list(block)}: expected [channels, kernel "
                                      "width, repeat], three positive integers")


@MODELS.register("convs2s", ConvS2SConfig)
class ConvS2SModel(Generator):
    def __init__(self, config: ConvS2SConfig, context: ModelContext) -> None:
        super().__init__()
        src_vocab_size = context.require("src_vocab_size", "convs2s")
        self.config = config
        dim, pad = config.embedding_dim, context.pad_index
        self.tgt_embed = self._embedding(context.tgt_vocab_size, dim, pad)
        self.src_embed = source_embedding(config.share_embeddings, self.tgt_embed, src_vocab_size,
                                          lambda: self._embedding(src_vocab_size, dim, pad))
        decoder_layers = config.layers("decoder")
        self.encoder = ConvEncoder(dim, config.layers("encoder"), config.max_positions, config.dropout,
                                   config.weight_norm, gradient_scale=1.0 / (2.0 * len(decoder_layers)))
        self.decoder = ConvDecoder(dim, decoder_layers, config.output_dim, config.max_positions, config.dropout,
                                   config.weight_norm)
        self.feature_dim = config.output_dim
        self.static_state = frozenset({"keys", "values", "pad_mask", "scale"})  # from encode, per sentence
        self._weights: WeightCache[list[Tensor]] = WeightCache()  # linearized decoder convolutions (search)

    @staticmethod
    def _embedding(size: int, dim: int, pad_index: int) -> nn.Embedding:
        """N(0, 0.1) rows, the padding row zero (Gehring et al.; fairseq)."""
        embedding = nn.Embedding(size, dim, padding_idx=pad_index)
        nn.init.normal_(embedding.weight, mean=0.0, std=0.1)
        with torch.no_grad():
            embedding.weight[pad_index].zero_()
        return embedding

    def train(self, mode: bool = True) -> ConvS2SModel:
        if mode:  # optimiser steps follow; fused Adam does not bump version counters (nlgkit.core.weight_cache)
            self._weights.clear()
        return super().train(mode)

    def _check_length(self, length: int, side: str) -> None:
        if length > self.config.max_positions:
            raise ConfigError(f"model.max_positions = {self.config.max_positions}: a {side} sequence of "
                              f"{length} tokens is longer")

    # -- encoder ------------------------------------------------------------------------------------------
    def encode(self, inputs: Inputs) -> State:
        """inputs: src (B, S) padded token ids, src_lengths (B,) → keys, values (B, S, E) and the mask."""
        src, lengths = inputs["src"], inputs["src_lengths"].to(inputs["src"].device)
        self._check_length(src.size(1), "source")
        pad_mask = padding_mask(lengths, src.size(1))  # (B, S) True at padding
        keys, values = self.encoder(self.src_embed(src), pad_mask)
        return {"keys": keys, "values": values, "pad_mask": pad_mask,
                "scale": lengths.to(keys.dtype).sqrt(),  # √m: attention outputs scaled by source length
                "step": torch.zeros(src.size(0), dtype=torch.long, device=src.device)} | {
            f"window{i}": keys.new_zeros(src.size(0), layer.kernel - 1, layer.conv.in_channels)
            for i, layer in enumerate(self.decoder.blocks())}

    @staticmethod
    def _memory(state: State) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return state["keys"], state["values"], state["pad_mask"], state["scale"]

    # -- decoder ------------------------------------------------------------------------------------------
    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """Teacher forcing: batch.prev_tokens (B, T) → features (B, T, output_dim); no auxiliary loss."""
        state = self.encode(batch.inputs)
        self._check_length(batch.prev_tokens.size(1), "target")
        return self.decoder(self.tgt_embed(batch.prev_tokens), self._memory(state)), {}

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """prev_tokens (B,) → features (B, output_dim): one position through every layer, from the windows.

        A position past the position table (decoding longer than ``max_positions``) reuses its last row.
        """
        positions = state["step"].clamp(max=self.config.max_positions - 1)[:, None]  # (B, 1)
        names = [f"window{i}" for i in range(len(self.decoder.layers))]
        features, windows, attention = self.decoder.step(self.tgt_embed(prev_tokens[:, None]), positions,
                                                         [state[name] for name in names], self._memory(state),
                                                         self._linearized_weights())
        new_state = {**state, **dict(zip(names, windows)), "step": state["step"] + 1}
        if alignment.requested(state):  # the layers' mean attention, as fairseq's fconv reports it
            alignment.report(new_state, state, torch.stack(attention).mean(dim=0)[:, -1])
        return features.squeeze(1), new_state

    def _linearized_weights(self) -> list[Tensor]:
        """Every decoder layer's convolution as one matrix; at inference computed once for all steps (the
        weight-normalised weight is otherwise recomputed from g and v at every access)."""
        layers = self.decoder.blocks()
        if self.training or torch.is_grad_enabled():
            return [layer.linearized_weight() for layer in layers]
        weights = [p for layer in layers for p in layer.conv.parameters()]
        with torch.no_grad():
            return self._weights.get(weights, lambda: [layer.linearized_weight() for layer in layers])

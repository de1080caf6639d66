"""Stacked LSTM encoder–decoder with Luong et al.'s (2015) global attention and input feeding.

The model of Pappas et al. §4.2: an L-layer LSTM encoder (1–8 layers, 512 wide, dropout 0.3); an L-layer
LSTM decoder that starts from the encoder's final states and reads [e(y_{t−1}); h̃_{t−1}] (input feeding);
attention of the top decoder state h_t over the encoder outputs h̄_s, scored ``dot`` (h_tᵀh̄_s), ``general``
(h_tᵀW_a h̄_s, with W_a h̄_s computed once per sentence) or ``concat`` (v_aᵀ tanh(W_a[h_t; h̄_s])); and the
attentional state h̃_t = tanh(W_c[c_t; h_t]), which is the feature vector every head reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core import alignment
from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import MODELS, PluginConfig
from nlgkit.data.batching import Batch
from nlgkit.models.attention import masked_attention, padding_mask, run_packed
from nlgkit.models.base import Generator, Inputs, ModelContext, State, check_model_options


@dataclass(frozen=True)
class LuongConfig(PluginConfig):
    type: str = "lstm_luong"
    embedding_dim: int = 512
    hidden_dim: int = 512  # encoder, decoder and the features the head sees
    layers: int = 2
    attention: Literal["dot", "general", "concat"] = "general"
    input_feeding: bool = True
    dropout: float = 0.3

    def validate(self, source: str, run_config: Any) -> None:
        check_model_options(self, source, ("embedding_dim", "hidden_dim", "layers"))
        if self.layers > 8:
            raise ConfigError(f"{source}: model.layers = {self.layers}: 1 to 8 layers")


class LuongAttention(nn.Module):
    def __init__(self, kind: str, dim: int) -> None:
        super().__init__()
        self.kind = kind
        if kind == "general":
            self.key_proj = nn.Linear(dim, dim, bias=False)  # W_a, applied to the keys once per sentence
        elif kind == "concat":
            self.query_proj = nn.Linear(dim, dim, bias=False)
            self.key_proj = nn.Linear(dim, dim)  # W_a = [W_q W_k] over [h_t; h̄_s], split so keys run once
            self.v = nn.Linear(dim, 1, bias=False)

    def keys(self, encoder_out: Tensor) -> Tensor:
        return encoder_out if self.kind == "dot" else self.key_proj(encoder_out)  # (B, S, H)

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, pad_mask: Tensor) -> tuple[Tensor, Tensor]:
        """query (B, H), keys/values (B, S, H), pad_mask (B, S) → context (B, H) and weights (B, S)."""
        if self.kind == "concat":
            scores = self.v(torch.tanh(keys + self.query_proj(query).unsqueeze(1))).squeeze(-1)  # (B, S)
        else:
            scores = torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1)  # (B, S)
        return masked_attention(scores, values, pad_mask)


@MODELS.register("lstm_luong", LuongConfig)
class LuongModel(Generator):
    static_state = frozenset({"encoder_out", "keys", "pad_mask"})  # from encode, the same for all beams of a sentence

    def __init__(self, config: LuongConfig, context: ModelContext) -> None:
        super().__init__()
        src_vocab_size = context.require("src_vocab_size", "lstm_luong")
        self.config = config
        dim, layers, drop = config.hidden_dim, config.layers, config.dropout
        self.src_embed = nn.Embedding(src_vocab_size, config.embedding_dim, padding_idx=context.pad_index)
        self.tgt_embed = nn.Embedding(context.tgt_vocab_size, config.embedding_dim, padding_idx=context.pad_index)
        self.encoder = nn.LSTM(config.embedding_dim, dim, num_layers=layers, batch_first=True,
                               dropout=drop if layers > 1 else 0.0)
        feed = dim if config.input_feeding else 0
        self.decoder = nn.LSTM(config.embedding_dim + feed, dim, num_layers=layers, batch_first=True,
                               dropout=drop if layers > 1 else 0.0)
        self.attention = LuongAttention(config.attention, dim)
        self.combine = nn.Linear(2 * dim, dim, bias=False)  # W_c over [c_t; h_t]
        self.dropout = nn.Dropout(drop)
        self.feature_dim = dim
        for parameter in self.parameters():  # Luong et al. §4.1 (and OpenNMT's param_init): U[−0.1, 0.1]
            nn.init.uniform_(parameter, -0.1, 0.1)

    def encode(self, inputs: Inputs) -> State:
        """src (B, S), src_lengths (B,) → the decoder's start: the encoder's final states, layer by layer."""
        src, lengths = inputs["src"], inputs["src_lengths"]
        embedded = self.dropout(self.src_embed(src))
        encoder_out, (h, c) = run_packed(self.encoder, embedded, lengths)
        return {"hidden": h.transpose(0, 1).contiguous(), "cells": c.transpose(0, 1).contiguous(),  # (B, L, H)
                "feed": encoder_out.new_zeros(src.size(0), self.feature_dim),  # h̃_0 = 0
                "encoder_out": encoder_out, "keys": self.attention.keys(encoder_out),
                "pad_mask": padding_mask(lengths.to(src.device), src.size(1))}

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        embedded = self.dropout(self.tgt_embed(prev_tokens))  # (B, E)
        top = torch.cat([embedded, state["feed"]], dim=-1) if self.config.input_feeding else embedded
        hidden, cells = [], []
        for layer in range(self.config.layers):
            if layer:  # nn.LSTM's dropout between layers
                top = F.dropout(top, self.config.dropout, self.training)
            h, c = self._decoder_cell(layer, top, state["hidden"][:, layer], state["cells"][:, layer])
            hidden.append(h)
            cells.append(c)
            top = h
        context, weights = self.attention(top, state["keys"], state["encoder_out"], state["pad_mask"])
        attentional = self.dropout(torch.tanh(self.combine(torch.cat([context, top], dim=-1))))  # h̃_t
        new_state = {**state, "hidden": torch.stack(hidden, dim=1), "cells": torch.stack(cells, dim=1),
                     "feed": attentional}
        alignment.report(new_state, state, weights)
        return attentional, new_state

    def _decoder_cell(self, layer: int, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """One step of the decoder LSTM's ``layer`` with its own weights: a call of ``nn.LSTM`` per token costs
        about 1.4× these few operations on a CPU (input feeding makes decoding one token at a time)."""
        decoder = self.decoder
        gates = (F.linear(x, getattr(decoder, f"weight_ih_l{layer}"), getattr(decoder, f"bias_ih_l{layer}"))
                 + F.linear(h, getattr(decoder, f"weight_hh_l{layer}"), getattr(decoder, f"bias_hh_l{layer}")))
        in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=-1)  # nn.LSTM's order: i, f, g, o
        c = torch.sigmoid(forget_gate) * c + torch.sigmoid(in_gate) * torch.tanh(cell_gate)
        return torch.sigmoid(out_gate) * torch.tanh(c), c

    def step_modules(self) -> tuple[nn.Module, ...]:
        return (self.attention,)  # the step's LSTM runs on the decoder's weights directly (_decoder_cell)

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """Teacher forcing, one step at a time (input feeding makes step t read h̃_{t−1})."""
        state = self.encode(batch.inputs)
        outputs = []
        for prev in batch.prev_tokens.unbind(1):
            features, state = self.step(prev, state)
            outputs.append(features)
        return torch.stack(outputs, dim=1), {}

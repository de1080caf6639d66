"""The additive-attention RNN encoder–decoder of Shalev et al.'s Multi30K experiments.

Encoder: embeddings → bidirectional GRU/LSTM. Decoder (per step t, state s_{t-1}):
context c_t = attention(s_{t-1}, encoder outputs); s_t = cell([e(y_{t-1}); c_t], s_{t-1});
features f_t = pre_output([s_t; c_t; e(y_{t-1})]). The model stops at f_t: its single ``head`` owns the
classification layer (attached by the builder). With the default sizes and the paper's vocabularies the trainable parameter count
is 13,893,381 (DE-EN, learned head) and 10,870,272 (fixed head).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core import alignment
from nlgkit.core.registry import MODELS, PluginConfig
from nlgkit.core.weight_cache import WeightCache
from nlgkit.data.batching import Batch
from nlgkit.models.attention import AdditiveAttention, padding_mask, run_packed
from nlgkit.models.base import Generator, Inputs, ModelContext, State, check_model_options


@dataclass(frozen=True)
class RNNConfig(PluginConfig):
    type: str = "rnn"
    cell: Literal["gru", "lstm"] = "gru"
    embedding_dim: int = 256
    encoder_dim: int = 512  # per direction
    encoder_layers: int = 1
    bidirectional: bool = True
    decoder_dim: int = 512
    decoder_layers: int = 1
    attention_dim: int = 512
    pre_output_dim: int = 512  # d: the dimension of the features f the head sees
    pre_output_activation: Literal["none", "tanh"] = "none"
    dropout: float = 0.0  # on embeddings and on the pre-output input

    def validate(self, source: str, run_config: Any) -> None:
        check_model_options(self, source, ("embedding_dim", "encoder_dim", "encoder_layers", "decoder_dim",
                                           "decoder_layers", "attention_dim", "pre_output_dim"))


class DecoderCell(nn.Module):
    """A stack of GRU/LSTM cells computed gate by gate, so the input projection can be split.

    The input is [embedding; context]: its embedding part is projected for all steps at once before the
    loop (teacher forcing), leaving only the context part per step.
    """

    def __init__(self, cell: str, embedding_dim: int, context_dim: int, hidden_dim: int, layers: int) -> None:
        super().__init__()
        cell_class = nn.GRUCell if cell == "gru" else nn.LSTMCell
        self.is_lstm = cell == "lstm"
        self.embedding_dim = embedding_dim
        self.layers = nn.ModuleList(
            cell_class(embedding_dim + context_dim if i == 0 else hidden_dim, hidden_dim) for i in range(layers)
        )

    def cells(self) -> list[nn.RNNCellBase]:
        """The layers' cells, bottom first (typed: a ModuleList's items are bare Modules)."""
        return [cast(nn.RNNCellBase, layer) for layer in self.layers]

    def project_embeddings(self, embedded: Tensor) -> Tensor:
        """(…, E) → (…, G·H): the embedding part of layer 0's input projection, with its bias."""
        first = self.cells()[0]
        return F.linear(embedded, first.weight_ih[:, : self.embedding_dim], first.bias_ih)

    def context_weight(self) -> Tensor:
        """(G·H, C): the context part of layer 0's input projection.

        Teacher forcing slices it once per batch and passes it to every step: a slice taken inside the
        step would, in backward, zero-fill and copy a full-size weight gradient at every step.
        """
        return self.cells()[0].weight_ih[:, self.embedding_dim :]

    def forward(
        self, embedding_gates: Tensor, context: Tensor, hidden: list[Tensor], cells: list[Tensor],
        top_hidden_gates: Tensor | None = None, context_weight: Tensor | None = None,
        context_gates: Tensor | None = None,
    ) -> tuple[list[Tensor], list[Tensor]]:
        """One step. embedding_gates (B, G·H), context (B, C), hidden/cells: per layer (B, H);
        ``context_gates`` (B, G·H): the context's share of layer 0's input gates, when already computed."""
        new_hidden, new_cells = [], []
        layer_input: Tensor | None = None  # the layer below's new hidden state
        for i, layer in enumerate(self.cells()):
            if i == 0:
                if context_gates is None:
                    weight = self.context_weight() if context_weight is None else context_weight
                    context_gates = F.linear(context, weight)
                gi = embedding_gates + context_gates
            else:
                assert layer_input is not None
                gi = F.linear(layer_input, layer.weight_ih, layer.bias_ih)
            last = i == len(self.layers) - 1
            if last and top_hidden_gates is not None:
                gh = top_hidden_gates
            else:
                gh = F.linear(hidden[i], layer.weight_hh, layer.bias_hh)
            if self.is_lstm:
                i_g, f_g, g_g, o_g = (gi + gh).chunk(4, dim=-1)
                c = torch.sigmoid(f_g) * cells[i] + torch.sigmoid(i_g) * torch.tanh(g_g)
                h = torch.sigmoid(o_g) * torch.tanh(c)
                new_cells.append(c)
            else:
                i_r, i_z, i_n = gi.chunk(3, dim=-1)
                h_r, h_z, h_n = gh.chunk(3, dim=-1)
                r = torch.sigmoid(i_r + h_r)
                z = torch.sigmoid(i_z + h_z)
                n = torch.tanh(i_n + r * h_n)
                h = n + z * (hidden[i] - n)
            new_hidden.append(h)
            layer_input = h
        return new_hidden, new_cells


@dataclass
class SearchTables:
    """What search steps of an :class:`RNNModel` share: per-word tables and fused weights (see _search_step)."""

    word_gates: Tensor  # (V, G·H): embedding share of layer 0's input gates, with its bias
    word_pre: Tensor  # (V, P): embedding share of the pre-output layer, with its bias
    hidden_weight: Tensor  # (G·H + A, D): the top layer's hidden gates and the attention query
    hidden_bias: Tensor
    hidden_split: list[int]
    context_weight: Tensor  # (G·H + P, C): the context's shares of layer 0's input gates and of the pre-output
    context_split: list[int]
    output_weight: Tensor  # (P, D): the decoder output's share of the pre-output layer

    @classmethod
    def of(cls, model: RNNModel) -> SearchTables:
        config, decoder, attention = model.config, model.decoder, model.attention
        top, words = decoder.cells()[-1], model.tgt_embed.weight
        d, c = config.decoder_dim, decoder.context_weight().size(1)
        pre = model.pre_output.weight  # (P, D + C + E) over [output; context; embedded]
        return cls(
            word_gates=decoder.project_embeddings(words),
            word_pre=F.linear(words, pre[:, d + c :], model.pre_output.bias),
            hidden_weight=torch.cat([top.weight_hh, attention.query_weight]),
            hidden_bias=torch.cat([top.bias_hh, top.bias_hh.new_zeros(config.attention_dim)]),
            hidden_split=[top.weight_hh.size(0), config.attention_dim],
            context_weight=torch.cat([decoder.context_weight(), pre[:, d : d + c]]),
            context_split=[decoder.context_weight().size(0), pre.size(0)],
            output_weight=pre[:, :d],
        )


@MODELS.register("rnn", RNNConfig, default=True)
class RNNModel(Generator):
    static_state = frozenset({"encoder_out", "keys", "pad_mask"})  # from encode, the same for all beams of a sentence

    def __init__(self, config: RNNConfig, context: ModelContext) -> None:
        super().__init__()
        src_vocab_size = context.require("src_vocab_size", "rnn")
        tgt_vocab_size, pad_index = context.tgt_vocab_size, context.pad_index
        self.config = config
        self.pad_index = pad_index
        directions = 2 if config.bidirectional else 1
        context_dim = directions * config.encoder_dim
        self.src_embed = nn.Embedding(src_vocab_size, config.embedding_dim, padding_idx=pad_index)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, config.embedding_dim, padding_idx=pad_index)
        rnn_class = nn.GRU if config.cell == "gru" else nn.LSTM
        self.encoder = rnn_class(
            config.embedding_dim, config.encoder_dim, num_layers=config.encoder_layers, batch_first=True,
            bidirectional=config.bidirectional, dropout=config.dropout if config.encoder_layers > 1 else 0.0,
        )
        self.bridge = nn.Linear(context_dim, config.decoder_dim)  # initial decoder state from final encoder states
        self.attention = AdditiveAttention(config.decoder_dim, context_dim, config.attention_dim)
        self.decoder = DecoderCell(config.cell, config.embedding_dim, context_dim, config.decoder_dim,
                                   config.decoder_layers)
        self.pre_output = nn.Linear(config.decoder_dim + context_dim + config.embedding_dim, config.pre_output_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.feature_dim = config.pre_output_dim
        self._search_tables: WeightCache[SearchTables] = WeightCache()

    def train(self, mode: bool = True) -> RNNModel:
        if mode:  # optimiser steps follow; fused Adam does not bump version counters (nlgkit.core.weight_cache)
            self._search_tables.clear()
        return super().train(mode)

    # -- encoder ------------------------------------------------------------------------------------------
    def encode(self, inputs: Inputs) -> State:
        """inputs: src (B, S) padded token ids, src_lengths (B,) → decoder start state."""
        src, src_lengths = inputs["src"], inputs["src_lengths"]
        embedded = self.dropout(self.src_embed(src))  # (B, S, E)
        encoder_out, final = run_packed(self.encoder, embedded, src_lengths)  # (B, S, C)
        final_h = final[0] if isinstance(final, tuple) else final  # (layers·dirs, B, H)
        if self.config.bidirectional:
            last = torch.cat([final_h[-2], final_h[-1]], dim=-1)  # (B, 2H)
        else:
            last = final_h[-1]
        start = torch.tanh(self.bridge(last))  # (B, D)
        hidden = start.unsqueeze(1).expand(-1, self.config.decoder_layers, -1).contiguous()  # (B, L, D)
        state: State = {
            "hidden": hidden,
            "encoder_out": encoder_out,
            "keys": self.attention.project_keys(encoder_out),  # (B, S, A), once per sentence
            "pad_mask": padding_mask(src_lengths.to(src.device), src.size(1)),  # (B, S)
        }
        if self.decoder.is_lstm:
            state["cells"] = torch.zeros_like(hidden)
        return state

    # -- decoder ------------------------------------------------------------------------------------------
    def _features(self, output: Tensor, context: Tensor, embedded: Tensor) -> Tensor:
        features = self.pre_output(self.dropout(torch.cat([output, context, embedded], dim=-1)))
        return torch.tanh(features) if self.config.pre_output_activation == "tanh" else features

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """prev_tokens (B,) → features (B, d), next state."""
        if not (self.training or torch.is_grad_enabled()):
            return self._search_step(prev_tokens, state)
        embedded = self.dropout(self.tgt_embed(prev_tokens))  # (B, E)
        hidden = list(state["hidden"].unbind(1))
        cells = list(state["cells"].unbind(1)) if "cells" in state else []
        query = self.attention.project_query(hidden[-1])
        context, weights = self.attention(query, state["keys"], state["encoder_out"], state["pad_mask"])
        hidden, cells = self.decoder(self.decoder.project_embeddings(embedded), context, hidden, cells)
        return self._features(hidden[-1], context, embedded), self._next_state(state, hidden, cells, weights)

    def _next_state(self, state: State, hidden: list[Tensor], cells: list[Tensor], weights: Tensor) -> State:
        """The state after a step; ``weights``: its attention over the source (B, S), kept when asked for."""
        new_state = dict(state)
        new_state["hidden"] = torch.stack(hidden, dim=1)
        if cells:
            new_state["cells"] = torch.stack(cells, dim=1)
        alignment.report(new_state, state, weights)
        return new_state

    def _search_step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """:meth:`step` at inference (no dropout, no gradients), the same function in fewer products: the
        embedding's shares of the input gates and of the pre-output layer are looked up per word, the top
        state's hidden gates and attention query come from one product, and so do the context's shares."""
        tables = self._tables()
        hidden = list(state["hidden"].unbind(1))
        cells = list(state["cells"].unbind(1)) if "cells" in state else []
        hidden_gates, query = F.linear(hidden[-1], tables.hidden_weight, tables.hidden_bias).split(
            tables.hidden_split, dim=1)
        context, weights = self.attention(query, state["keys"], state["encoder_out"], state["pad_mask"])
        context_gates, context_pre = F.linear(context, tables.context_weight).split(tables.context_split, dim=1)
        hidden, cells = self.decoder(tables.word_gates.index_select(0, prev_tokens), context, hidden, cells,
                                     hidden_gates, context_gates=context_gates)
        features = F.linear(hidden[-1], tables.output_weight).add_(context_pre).add_(
            tables.word_pre.index_select(0, prev_tokens))  # (B, P), summed in place, in the same order
        if self.config.pre_output_activation == "tanh":
            features = torch.tanh(features)
        return features, self._next_state(state, hidden, cells, weights)

    def _tables(self) -> SearchTables:
        """The :class:`SearchTables` of the current weights (recomputed whenever a weight has changed)."""
        weights = [p for p in self.parameters() if p is not self.src_embed.weight]
        with torch.no_grad():
            return self._search_tables.get(weights, lambda: SearchTables.of(self))

    def step_modules(self) -> tuple[nn.Module, ...]:
        return self.attention, self.decoder  # what teacher_forcing's loop calls at every step

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """Teacher forcing: batch.prev_tokens (B, T) → features (B, T, d); no auxiliary loss."""
        return self.teacher_forcing(batch.prev_tokens, self.encode(batch.inputs)), {}

    def teacher_forcing(self, prev_tokens: Tensor, state: State) -> Tensor:
        """Features (B, T, d) for prev_tokens (B, T) from an encoded state (models that also read the state
        for an auxiliary loss call it after their own ``encode``).

        Everything that does not depend on the recurrence — embeddings, their share of the cell's input
        projection, the attention keys, the pre-output layer — runs once over all steps.
        """
        embedded = self.dropout(self.tgt_embed(prev_tokens))  # (B, T, E)
        embedding_gates = self.decoder.project_embeddings(embedded)  # (B, T, G·H)
        hidden = list(state["hidden"].unbind(1))
        cells = list(state["cells"].unbind(1)) if "cells" in state else []
        top = self.decoder.cells()[-1]
        # One matmul per step for both uses of the top state: attention query and the cell's hidden gates.
        fused_weight = torch.cat([top.weight_hh, self.attention.query_weight], dim=0)  # (G·H + A, D)
        fused_bias = torch.cat([top.bias_hh, top.bias_hh.new_zeros(self.config.attention_dim)])
        split = [top.weight_hh.size(0), self.config.attention_dim]
        context_weight = self.decoder.context_weight()
        outputs, contexts = [], []
        # unbind/split rather than indexing: their backward is one concatenation, where indexing
        # would zero-fill a full-size gradient at every step
        for step_gates in embedding_gates.unbind(1):
            hidden_gates, query = F.linear(hidden[-1], fused_weight, fused_bias).split(split, dim=1)
            context, _ = self.attention(query, state["keys"], state["encoder_out"], state["pad_mask"])
            hidden, cells = self.decoder(step_gates, context, hidden, cells, hidden_gates, context_weight)
            outputs.append(hidden[-1])
            contexts.append(context)
        output = torch.stack(outputs, dim=1)  # (B, T, D)
        context = torch.stack(contexts, dim=1)  # (B, T, C)
        return self._features(output, context, embedded)

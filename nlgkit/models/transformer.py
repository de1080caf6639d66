"""The Transformer (Vaswani et al. 2017) on torch's scaled-dot-product attention, with incremental decoding.

Presets: ``base`` (6 + 6 layers, d = 512, FFN 2048, 8 heads) and ``small`` (3 + 3, 256, 1024, 4 heads);
any size can be set explicitly (0 = the preset's value). Options: pre- or post-norm residual blocks,
sinusoidal or learned positions, source/target embeddings shared (one vocabulary size) or separate, and
``output_dim``: a final Linear d → output_dim so that the head sees features of that size (128 for a
continuous head; 0 = d). Decoding is incremental: ``encode`` projects every layer's cross-attention keys and
values once per sentence, and each ``step`` appends the new position's self-attention keys and values to
per-layer caches in the state (batch-first, so the search's ``reorder`` moves them with their beams); no
prefix is recomputed, and step-by-step features equal teacher forcing (a test checks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core import alignment
from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import MODELS, PluginConfig
from nlgkit.data.batching import Batch
from nlgkit.models.attention import padding_mask
from nlgkit.models.base import Generator, Inputs, ModelContext, State, source_embedding

PRESETS = {"base": {"layers": 6, "dim": 512, "ffn_dim": 2048, "heads": 8},
           "small": {"layers": 3, "dim": 256, "ffn_dim": 1024, "heads": 4}}


@dataclass(frozen=True)
class TransformerConfig(PluginConfig):
    type: str = "transformer"
    preset: Literal["base", "small"] = "base"
    encoder_layers: int = 0  # 0 = the preset's
    decoder_layers: int = 0
    dim: int = 0
    ffn_dim: int = 0
    heads: int = 0
    norm: Literal["pre", "post"] = "pre"
    positions: Literal["sinusoidal", "learned"] = "sinusoidal"
    max_positions: int = 1024  # learned positions only
    share_embeddings: bool = False  # needs one vocabulary size for source and target
    output_dim: int = 0  # features the head sees; 0 = dim
    dropout: float = 0.1
    attention_dropout: float = 0.0
    cache: bool = True  # incremental decoding; false recomputes the whole prefix at every step (for benchmarks)

    def size(self, name: str) -> int:
        value = getattr(self, name)
        preset = PRESETS[self.preset]
        return value or preset["layers" if name.endswith("_layers") else name]

    def validate(self, source: str, run_config: Any) -> None:
        for key in ("encoder_layers", "decoder_layers", "dim", "ffn_dim", "heads", "output_dim"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{source}: model.{key} = {getattr(self, key)}: must be positive (0 = preset)")
        if self.size("dim") % self.size("heads"):
            raise ConfigError(f"{source}: model.dim = {self.size('dim')} is not divisible by model.heads = "
                              f"{self.size('heads')}")
        for key in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ConfigError(f"{source}: model.{key} = {getattr(self, key)}: must be in [0, 1)")


def sinusoids(length: int, dim: int) -> Tensor:
    """The fixed sin/cos position table (length, dim)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    rates = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * rates)
    table[:, 1::2] = torch.cos(position * rates[: dim // 2])
    return table


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.query, self.key, self.value, self.out = (nn.Linear(dim, dim) for _ in range(4))

    def split(self, x: Tensor) -> Tensor:  # (B, T, d) → (B, h, T, d/h)
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def keys_values(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.split(self.key(x)), self.split(self.value(x))

    def forward(self, x: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None = None,
                causal: bool = False) -> Tensor:
        q = self.split(self.query(x))
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=causal,
                                             dropout_p=self.dropout if self.training else 0.0)
        return self.out(out.transpose(1, 2).flatten(2))

    def weights(self, x: Tensor, keys: Tensor, mask: Tensor) -> Tensor:
        """The attention weights of queries x (B, T, d) over keys (B, h, S, d/h), averaged over the heads
        (B, T, S): what fairseq reports as alignments (scaled_dot_product_attention does not return them)."""
        q = self.split(self.query(x))  # (B, h, T, d/h)
        scores = torch.matmul(q, keys.transpose(-1, -2)) * q.size(-1) ** -0.5  # (B, h, T, S)
        return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1).mean(dim=1)


class Block(nn.Module):
    """One residual sub-layer: ``x + drop(f(norm(x)))`` (pre-norm) or ``norm(x + drop(f(x)))`` (post-norm)."""

    def __init__(self, dim: int, pre_norm: bool, dropout: float) -> None:
        super().__init__()
        self.norm, self.pre_norm, self.dropout = nn.LayerNorm(dim), pre_norm, nn.Dropout(dropout)

    def forward(self, x: Tensor, f: Any) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(f(self.norm(x)))
        return self.norm(x + self.dropout(f(x)))


class FeedForward(nn.Sequential):
    def __init__(self, dim: int, ffn_dim: int, dropout: float) -> None:
        super().__init__(nn.Linear(dim, ffn_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ffn_dim, dim))


class EncoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        dim, pre = c.size("dim"), c.norm == "pre"
        self.attention = Attention(dim, c.size("heads"), c.attention_dropout)
        self.ffn = FeedForward(dim, c.size("ffn_dim"), c.dropout)
        self.blocks = nn.ModuleList([Block(dim, pre, c.dropout), Block(dim, pre, c.dropout)])

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.blocks[0](x, lambda y: self.attention(y, *self.attention.keys_values(y), mask=mask))
        return self.blocks[1](x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        dim, pre = c.size("dim"), c.norm == "pre"
        self.self_attention = Attention(dim, c.size("heads"), c.attention_dropout)
        self.cross_attention = Attention(dim, c.size("heads"), c.attention_dropout)
        self.ffn = FeedForward(dim, c.size("ffn_dim"), c.dropout)
        self.blocks = nn.ModuleList([Block(dim, pre, c.dropout) for _ in range(3)])

    def forward(self, x: Tensor, self_kv: tuple[Tensor, Tensor] | None, cross_kv: tuple[Tensor, Tensor],
                mask: Tensor, aligned: bool = False) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor | None]:
        """Teacher forcing when ``self_kv`` is None (causal over x); else one step appended to the cache. With
        ``aligned``, also the cross-attention's weights over the source averaged over the heads (B, T, S)."""
        new_kv: tuple[Tensor, Tensor] = (x, x)
        weights: Tensor | None = None

        def attend_self(y: Tensor) -> Tensor:
            nonlocal new_kv
            k, v = self.self_attention.keys_values(y)
            if self_kv is None:
                new_kv = (k, v)
                return self.self_attention(y, k, v, causal=True)
            new_kv = (torch.cat([self_kv[0], k], dim=2), torch.cat([self_kv[1], v], dim=2))
            return self.self_attention(y, *new_kv)

        def attend_source(y: Tensor) -> Tensor:
            nonlocal weights
            if aligned:
                weights = self.cross_attention.weights(y, cross_kv[0], mask)
            return self.cross_attention(y, *cross_kv, mask=mask)

        x = self.blocks[0](x, attend_self)
        x = self.blocks[1](x, attend_source)
        return self.blocks[2](x, self.ffn), new_kv, weights


@MODELS.register("transformer", TransformerConfig)
class TransformerModel(Generator):
    sinusoids: Tensor  # (max_positions, dim) buffer, with sinusoidal positions only

    def __init__(self, config: TransformerConfig, context: ModelContext) -> None:
        super().__init__()
        src_vocab_size = context.require("src_vocab_size", "transformer")
        self.config = config
        dim = config.size("dim")
        self.scale = math.sqrt(dim)
        self.tgt_embed = self._embedding(context.tgt_vocab_size, dim, context.pad_index)
        self.src_embed = source_embedding(config.share_embeddings, self.tgt_embed, src_vocab_size,
                                          lambda: self._embedding(src_vocab_size, dim, context.pad_index))
        if config.positions == "learned":
            self.positions: nn.Embedding | None = nn.Embedding(config.max_positions, dim)
        else:
            self.positions = None
            self.register_buffer("sinusoids", sinusoids(config.max_positions, dim), persistent=False)
        self.encoder = nn.ModuleList([EncoderLayer(config) for _ in range(config.size("encoder_layers"))])
        self.decoder = nn.ModuleList([DecoderLayer(config) for _ in range(config.size("decoder_layers"))])
        pre = config.norm == "pre"
        self.encoder_norm = nn.LayerNorm(dim) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(dim) if pre else nn.Identity()
        self.output = nn.Linear(dim, config.output_dim) if config.output_dim else nn.Identity()
        self.dropout = nn.Dropout(config.dropout)
        self.feature_dim = config.output_dim or dim
        # from encode, the same for all beams of a sentence: the padding mask and cross-attention keys/values
        self.static_state = frozenset({"mask"} | {f"cross_{kv}{i}" for i in range(len(self.decoder)) for kv in "kv"})

    @staticmethod
    def _embedding(size: int, dim: int, pad_index: int) -> nn.Embedding:
        """N(0, 1/d) rows (Vaswani et al.; fairseq): scaled by √d they meet the positions at unit variance."""
        embedding = nn.Embedding(size, dim, padding_idx=pad_index)
        nn.init.normal_(embedding.weight, std=dim**-0.5)
        with torch.no_grad():
            embedding.weight[pad_index].zero_()
        return embedding

    def decoder_layers(self) -> list[DecoderLayer]:
        """The decoder's layers, bottom first (typed: a ModuleList's items are bare Modules)."""
        return [cast(DecoderLayer, layer) for layer in self.decoder]

    def _embed(self, embedding: nn.Embedding, tokens: Tensor, start: Tensor | int = 0) -> Tensor:
        """tokens (B, T) at positions start … start + T − 1 → (B, T, d)."""
        if isinstance(start, int) and start + tokens.size(1) > self.config.max_positions:  # no host sync per step
            raise ConfigError(f"model.max_positions = {self.config.max_positions}: a sequence of "
                              f"{tokens.size(1)} tokens is longer")
        positions = torch.arange(tokens.size(1), device=tokens.device) + (
            start[:, None] if isinstance(start, Tensor) else start)
        table = self.positions(positions) if self.positions is not None else self.sinusoids[positions]
        return self.dropout(embedding(tokens) * self.scale + table)

    def encode(self, inputs: Inputs) -> State:
        src, lengths = inputs["src"], inputs["src_lengths"]
        mask = ~padding_mask(lengths.to(src.device), src.size(1))[:, None, None, :]  # (B, 1, 1, S): may look
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, mask)
        memory = self.encoder_norm(x)
        batch = src.size(0)
        state: State = {"mask": mask, "step": torch.zeros(batch, dtype=torch.long, device=src.device)}
        for i, layer in enumerate(self.decoder_layers()):  # cross-attention keys/values once per sentence
            state[f"cross_k{i}"], state[f"cross_v{i}"] = layer.cross_attention.keys_values(memory)
            heads = self.config.size("heads")
            empty = memory.new_zeros(batch, heads, 0, self.config.size("dim") // heads)  # (B, h, 0, d/h)
            state[f"self_k{i}"], state[f"self_v{i}"] = empty, empty
        return state

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """prev_tokens (B,) → features (B, d); the last layer's cross-attention is the step's alignment (as
        fairseq's), computed only when the search asks for it."""
        layers, asked = self.decoder_layers(), alignment.requested(state)
        weights: Tensor | None = None
        if not self.config.cache:  # the whole prefix again, as decoders without a cache do
            prefix = torch.cat([state["prefix"], prev_tokens[:, None]], dim=1) if "prefix" in state else \
                prev_tokens[:, None]
            x = self._embed(self.tgt_embed, prefix)
            for i, layer in enumerate(layers):
                x, _, weights = layer(x, None, (state[f"cross_k{i}"], state[f"cross_v{i}"]), state["mask"],
                                      aligned=asked and i == len(layers) - 1)
            new_state = {**state, "prefix": prefix}
            x = x[:, -1:]
        else:
            x = self._embed(self.tgt_embed, prev_tokens[:, None], state["step"])  # (B, 1, d)
            new_state = dict(state)
            for i, layer in enumerate(layers):
                x, (k, v), weights = layer(x, (state[f"self_k{i}"], state[f"self_v{i}"]),
                                           (state[f"cross_k{i}"], state[f"cross_v{i}"]), state["mask"],
                                           aligned=asked and i == len(layers) - 1)
                new_state[f"self_k{i}"], new_state[f"self_v{i}"] = k, v
            new_state["step"] = state["step"] + 1
        if weights is not None:
            alignment.report(new_state, state, weights[:, -1])
        return self.output(self.decoder_norm(x)).squeeze(1), new_state

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        state = self.encode(batch.inputs)
        x = self._embed(self.tgt_embed, batch.prev_tokens)
        for i, layer in enumerate(self.decoder_layers()):
            x, _, _ = layer(x, None, (state[f"cross_k{i}"], state[f"cross_v{i}"]), state["mask"])
        return self.output(self.decoder_norm(x)), {}

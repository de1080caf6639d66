"""ConvS2S building blocks (Gehring et al. 2017), laid out as fairseq's ``fconv`` so that parameter counts and
initialisation match it: weight-normalised linear and convolution layers, the convolutional encoder, and one
decoder layer (causal convolution → GLU → multi-step attention → residual).

A decoder layer runs a whole target prefix at once (teacher forcing) or one new position from the last
``kernel − 1`` inputs it has kept (incremental decoding): the convolution at position t reads only positions
t − k + 1 … t, so those inputs are all the state a layer needs and no prefix is ever recomputed.

Initialisation (Gehring et al. §3.5, fairseq): embeddings N(0, 0.1); a layer feeding a GLU N(0, √(4(1−p)/n)),
other layers N(0, √(1/n)) (√((1−p)/n) after dropout), n = fan-in, p = dropout; biases zero. Weight
normalisation (Salimans & Kingma) reparameterises each weight as g · v / ‖v‖ per output unit, starting with
g = ‖v‖, so it changes the parameter count (one g per output unit) but not the initial function.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm as apply_weight_norm

SQRT_HALF = math.sqrt(0.5)  # keeps the variance of a sum of two unit-variance terms at one


def linear(in_features: int, out_features: int, weight_norm: bool, keep: float = 1.0) -> nn.Linear:
    """Linear layer N(0, √(keep/in)) with zero bias; ``keep`` = 1 − dropout when dropout precedes it."""
    layer = nn.Linear(in_features, out_features)
    nn.init.normal_(layer.weight, mean=0.0, std=math.sqrt(keep / in_features))
    nn.init.zeros_(layer.bias)
    return apply_weight_norm(layer) if weight_norm else layer


def glu_conv(in_channels: int, channels: int, kernel: int, weight_norm: bool, keep: float) -> nn.Conv1d:
    """Convolution to 2·channels (a GLU halves them) with N(0, √(4·keep/(kernel·in))); unpadded: callers pad."""
    conv = nn.Conv1d(in_channels, 2 * channels, kernel)
    nn.init.normal_(conv.weight, mean=0.0, std=math.sqrt(4 * keep / (kernel * in_channels)))
    assert conv.bias is not None  # made with bias=True
    nn.init.zeros_(conv.bias)
    return apply_weight_norm(conv) if weight_norm else conv


def positions_table(max_positions: int, dim: int) -> nn.Embedding:
    """Learned position embeddings, N(0, 0.1) like the word embeddings."""
    table = nn.Embedding(max_positions, dim)
    nn.init.normal_(table.weight, mean=0.0, std=0.1)
    return table


def scale_gradient(x: Tensor, scale: float) -> Tensor:
    """x in the forward pass; its gradient times ``scale`` in the backward pass (Gehring et al. scale the
    encoder's gradient by 1/(2·attention layers): every decoder layer's attention reads it twice)."""
    return x * scale + (x * (1.0 - scale)).detach()


class ConvEncoder(nn.Module):
    """Embedded source (B, S, E) → attention keys z (B, S, E) and values (z + e)·√½ (B, S, E).

    Padding positions are zeroed before every convolution, so a sentence's encoding does not depend on the
    padding of the batch it is in.
    """

    def __init__(self, embedding_dim: int, layers: list[tuple[int, int]], max_positions: int, dropout: float,
                 weight_norm: bool, gradient_scale: float) -> None:
        super().__init__()
        keep = 1.0 - dropout
        self.positions = positions_table(max_positions, embedding_dim)
        self.fc1 = linear(embedding_dim, layers[0][0], weight_norm, keep)
        self.projections = nn.ModuleList()
        self.convs = nn.ModuleList()
        self.kernels = [kernel for _, kernel in layers]
        in_channels = layers[0][0]
        for channels, kernel in layers:
            # a residual of another width is projected (fairseq); an identity otherwise
            self.projections.append(linear(in_channels, channels, weight_norm) if in_channels != channels
                                    else nn.Identity())
            self.convs.append(glu_conv(in_channels, channels, kernel, weight_norm, keep))
            in_channels = channels
        self.fc2 = linear(in_channels, embedding_dim, weight_norm)
        self.dropout = nn.Dropout(dropout)
        self.gradient_scale = gradient_scale

    def forward(self, embedded: Tensor, pad_mask: Tensor) -> tuple[Tensor, Tensor]:
        """embedded (B, S, E) token embeddings, pad_mask (B, S) True at padding → keys, values (B, S, E)."""
        positions = torch.arange(embedded.size(1), device=embedded.device)
        embedded = self.dropout(embedded + self.positions(positions))  # e_j = w_j + p_j
        pad = pad_mask.unsqueeze(-1)  # (B, S, 1)
        x = self.fc1(embedded)  # (B, S, C)
        for projection, conv, kernel in zip(self.projections, self.convs, self.kernels):
            residual = projection(x)
            h = self.dropout(x.masked_fill(pad, 0.0)).transpose(1, 2)  # (B, C_in, S)
            h = conv(F.pad(h, ((kernel - 1) // 2, kernel // 2))).transpose(1, 2)  # same length; (B, S, 2C)
            x = (F.glu(h, dim=-1) + residual) * SQRT_HALF
        keys = scale_gradient(self.fc2(x).masked_fill(pad, 0.0), self.gradient_scale)  # z_j (B, S, E)
        return keys, (keys + embedded) * SQRT_HALF


class DecoderLayer(nn.Module):
    """Causal convolution + GLU, then attention over the source, each with a residual connection.

    Attention (multi-step: every layer has its own): d = (W h + b + g)·√½ with g the target embedding of the
    previous word; a = softmax(d · z_j) over the source; c = Σ_j a_j (z_j + e_j), times √m for m source
    words (the scaling of Gehring et al. §3.4, counting only the real words); h' = (W_o c + h)·√½.
    """

    def __init__(self, in_channels: int, channels: int, kernel: int, embedding_dim: int, dropout: float,
                 weight_norm: bool) -> None:
        super().__init__()
        self.kernel = kernel
        self.projection = linear(in_channels, channels, weight_norm) if in_channels != channels else nn.Identity()
        self.conv = glu_conv(in_channels, channels, kernel, weight_norm, 1.0 - dropout)
        self.attention_in = linear(channels, embedding_dim, weight_norm)
        self.attention_out = linear(embedding_dim, channels, weight_norm)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, target_embedding: Tensor, memory: tuple[Tensor, Tensor, Tensor, Tensor]) -> Tensor:
        """Teacher forcing: x (B, T, C_in) → (B, T, C); position t sees inputs up to t only."""
        h = self.dropout(x).transpose(1, 2)  # (B, C_in, T)
        h = self.conv(F.pad(h, (self.kernel - 1, 0))).transpose(1, 2)  # left padding: causal; (B, T, 2C)
        return self._attend_and_add(F.glu(h, dim=-1), self.projection(x), target_embedding, memory)[0]

    def step(self, x: Tensor, window: Tensor, target_embedding: Tensor,
             memory: tuple[Tensor, Tensor, Tensor, Tensor], weight: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One position: x (B, 1, C_in), window (B, k − 1, C_in) the layer's last inputs (zeros before the
        start, as the causal padding), ``weight`` (2C, k·C_in) from :meth:`linearized_weight`.
        Returns the output (B, 1, C), the window for the next position and the attention weights (B, 1, S)."""
        window = torch.cat([window, self.dropout(x)], dim=1)  # (B, k, C_in), oldest first
        h = F.linear(window.flatten(1), weight, self.conv.bias).unsqueeze(1)  # (B, 1, 2C)
        output, weights = self._attend_and_add(F.glu(h, dim=-1), self.projection(x), target_embedding, memory)
        return output, window[:, 1:], weights

    def linearized_weight(self) -> Tensor:
        """The convolution as one matrix (2C, k·C_in) over a window of k inputs laid out oldest first."""
        weight = self.conv.weight  # (2C, C_in, k); weight norm applied
        return weight.permute(0, 2, 1).reshape(weight.size(0), -1)

    def _attend_and_add(self, h: Tensor, residual: Tensor, target_embedding: Tensor,
                        memory: tuple[Tensor, Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """The layer's output (B, T, C) and its attention weights over the source (B, T, S)."""
        keys, values, pad_mask, scale = memory  # (B, S, E), (B, S, E), (B, S), (B,)
        query = (self.attention_in(h) + target_embedding) * SQRT_HALF  # (B, T, E)
        scores = torch.bmm(query, keys.transpose(1, 2)).masked_fill(pad_mask.unsqueeze(1), float("-inf"))
        weights = scores.softmax(dim=-1)  # (B, T, S)
        context = torch.bmm(weights, values) * scale[:, None, None]  # (B, T, E)
        attended = (self.attention_out(context) + h) * SQRT_HALF  # (B, T, C)
        return (attended + residual) * SQRT_HALF, weights


class ConvDecoder(nn.Module):
    """Embedded target prefix → features (B, T, output_dim): positions, fc1, the layers, fc2 and dropout."""

    def __init__(self, embedding_dim: int, layers: list[tuple[int, int]], output_dim: int, max_positions: int,
                 dropout: float, weight_norm: bool) -> None:
        super().__init__()
        self.positions = positions_table(max_positions, embedding_dim)
        self.fc1 = linear(embedding_dim, layers[0][0], weight_norm, 1.0 - dropout)
        blocks, in_channels = [], layers[0][0]
        for channels, kernel in layers:
            blocks.append(DecoderLayer(in_channels, channels, kernel, embedding_dim, dropout, weight_norm))
            in_channels = channels
        self.layers = nn.ModuleList(blocks)
        self.fc2 = linear(in_channels, output_dim, weight_norm)
        self.dropout = nn.Dropout(dropout)

    def blocks(self) -> list[DecoderLayer]:
        """The layers, bottom first (typed: a ModuleList's items are bare Modules)."""
        return [cast(DecoderLayer, layer) for layer in self.layers]

    def forward(self, embedded: Tensor, memory: tuple[Tensor, Tensor, Tensor, Tensor]) -> Tensor:
        """Teacher forcing: embedded (B, T, E) target words at positions 0 … T − 1 → features (B, T, d)."""
        positions = torch.arange(embedded.size(1), device=embedded.device)
        embedded = self.dropout(embedded + self.positions(positions))  # g_i = w_i + p_i
        x = self.fc1(embedded)  # (B, T, C)
        for layer in self.blocks():
            x = layer(x, embedded, memory)
        return self.dropout(self.fc2(x))

    def step(self, embedded: Tensor, positions: Tensor, windows: list[Tensor],
             memory: tuple[Tensor, Tensor, Tensor, Tensor], weights: list[Tensor]
             ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """One position: embedded (B, 1, E) at positions (B, 1), each layer's window and linearized weight
        → features (B, 1, d), the next windows and each layer's attention over the source (B, 1, S)."""
        embedded = self.dropout(embedded + self.positions(positions))
        x = self.fc1(embedded)
        next_windows, attention = [], []
        for layer, window, weight in zip(self.blocks(), windows, weights):
            x, window, attended = layer.step(x, window, embedded, memory, weight)
            next_windows.append(window)
            attention.append(attended)
        return self.dropout(self.fc2(x)), next_windows, attention

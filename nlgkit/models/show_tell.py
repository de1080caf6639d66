"""Show and Tell (Vinyals et al., 2015): the image is the LSTM's first input, then the caption's words.

The pooled CNN vector is projected into the word-embedding space and fed at step −1; the LSTM's state
after it starts the caption. Features are the (dropped-out) LSTM outputs: the single head, attached by
the builder, owns the classification layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from nlgkit.core.registry import MODELS, PluginConfig
from nlgkit.models.base import Generator, Inputs, ModelContext, State, check_model_options

if TYPE_CHECKING:
    from nlgkit.data.batching import Batch


@dataclass(frozen=True)
class ShowTellConfig(PluginConfig):
    type: str = "show_tell"
    embedding_dim: int = 512
    hidden_dim: int = 512  # d: the features the head sees
    layers: int = 1
    dropout: float = 0.5  # on the image/word inputs and on the features

    def validate(self, source: str, run_config: Any) -> None:
        check_model_options(self, source, ("embedding_dim", "hidden_dim", "layers"))


@MODELS.register("show_tell", ShowTellConfig)
class ShowTell(Generator):
    def __init__(self, config: ShowTellConfig, context: ModelContext) -> None:
        super().__init__()
        pooled_dim = context.require("image_pooled_dim", "show_tell")
        self.config = config
        self.image_embed = nn.Linear(pooled_dim, config.embedding_dim)  # W_I: image → word space
        self.tgt_embed = nn.Embedding(context.tgt_vocab_size, config.embedding_dim, padding_idx=context.pad_index)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_dim, num_layers=config.layers, batch_first=True,
                            dropout=config.dropout if config.layers > 1 else 0.0)
        self.dropout = nn.Dropout(config.dropout)
        self.feature_dim = config.hidden_dim

    def encode(self, inputs: Inputs) -> State:
        """image_pooled (B, P) → the LSTM state after reading the image (step −1)."""
        image = self.dropout(self.image_embed(inputs["image_pooled"])).unsqueeze(1)  # (B, 1, E)
        _, (h, c) = self.lstm(image)  # (layers, B, H) each
        return {"h": h.transpose(0, 1).contiguous(), "c": c.transpose(0, 1).contiguous()}  # batch first

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        embedded = self.dropout(self.tgt_embed(prev_tokens)).unsqueeze(1)  # (B, 1, E)
        hidden = (state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous())
        output, (h, c) = self.lstm(embedded, hidden)  # (B, 1, H)
        return self.dropout(output.squeeze(1)), {"h": h.transpose(0, 1), "c": c.transpose(0, 1)}

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """Teacher forcing in one LSTM call over [image; <s> y_1 … y_n]: features (B, T, H), no auxiliary loss."""
        image = self.dropout(self.image_embed(batch.inputs["image_pooled"])).unsqueeze(1)  # (B, 1, E)
        words = self.dropout(self.tgt_embed(batch.prev_tokens))  # (B, T, E)
        output, _ = self.lstm(torch.cat([image, words], dim=1))  # (B, 1 + T, H)
        return self.dropout(output[:, 1:]), {}

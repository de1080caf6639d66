"""Show, Attend and Tell (Xu et al., 2015) with soft attention, as the widely used PyTorch version has it.

Per step t, from the previous state h: α = softmax(w · relu(W_a a_i + U_a h)) over the regions a_i of
the spatial map, context z = β · Σ α_i a_i with the gating scalar β = σ(f_β(h)) (one gate per channel as
in that implementation), h, c = LSTMCell([E y_{t−1}; z], (h, c)). The initial h and c come from the
mean feature. Features are the (dropped-out) h; the head, attached by the builder, owns the output layer.
The doubly stochastic regulariser λ · mean_i (1 − Σ_t α_ti)² (Xu et al.'s Σ_i with λ scaled by 1/L) is
returned as the auxiliary loss ``attention``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import MODELS, PluginConfig
from nlgkit.models.base import Generator, Inputs, ModelContext, State, check_model_options

if TYPE_CHECKING:
    from nlgkit.data.batching import Batch


@dataclass(frozen=True)
class ShowAttendTellConfig(PluginConfig):
    type: str = "show_attend_tell"
    embedding_dim: int = 512
    hidden_dim: int = 512  # d: the features the head sees
    attention_dim: int = 512
    dropout: float = 0.5  # on the features
    gate: bool = True  # the gating scalar β
    attention_reg: float = 1.0  # λ of the doubly stochastic regulariser (0 disables it)
    training_only: ClassVar[tuple[str, ...]] = (*PluginConfig.training_only, "attention_reg")

    def validate(self, source: str, run_config: Any) -> None:
        check_model_options(self, source, ("embedding_dim", "hidden_dim", "attention_dim"))
        if self.attention_reg < 0:
            raise ConfigError(f"{source}: model.attention_reg = {self.attention_reg}: must not be negative")


@MODELS.register("show_attend_tell", ShowAttendTellConfig)
class ShowAttendTell(Generator):
    static_state = frozenset({"regions", "keys"})  # from encode, the same for all beams of a sentence

    def __init__(self, config: ShowAttendTellConfig, context: ModelContext) -> None:
        super().__init__()
        channels = context.require("image_channels", "show_attend_tell")
        context.require("image_regions", "show_attend_tell")
        self.config = config
        self.pad_index = context.pad_index
        self.region_att = nn.Linear(channels, config.attention_dim)  # W_a, once per image
        self.state_att = nn.Linear(config.hidden_dim, config.attention_dim)  # U_a, every step
        self.score = nn.Linear(config.attention_dim, 1)
        self.tgt_embed = nn.Embedding(context.tgt_vocab_size, config.embedding_dim, padding_idx=context.pad_index)
        self.cell = nn.LSTMCell(config.embedding_dim + channels, config.hidden_dim)
        self.init_h = nn.Linear(channels, config.hidden_dim)
        self.init_c = nn.Linear(channels, config.hidden_dim)
        self.f_beta = nn.Linear(config.hidden_dim, channels) if config.gate else None
        self.dropout = nn.Dropout(config.dropout)
        self.feature_dim = config.hidden_dim

    def encode(self, inputs: Inputs) -> State:
        """image_spatial (B, L, C) → initial h, c from the mean feature, and the projected regions."""
        regions = inputs["image_spatial"]  # (B, L, C)
        mean = regions.mean(dim=1)  # (B, C)
        return {"h": self.init_h(mean), "c": self.init_c(mean), "regions": regions,
                "keys": self.region_att(regions)}  # keys (B, L, A)

    def _attend(self, h: Tensor, state: State) -> tuple[Tensor, Tensor]:
        """Context (B, C) and weights α (B, L) for the state h (B, H)."""
        energy = F.relu(state["keys"] + self.state_att(h).unsqueeze(1))  # (B, L, A)
        alpha = torch.softmax(self.score(energy).squeeze(-1), dim=-1)  # (B, L)
        context = torch.bmm(alpha.unsqueeze(1), state["regions"]).squeeze(1)  # (B, C)
        if self.f_beta is not None:
            context = torch.sigmoid(self.f_beta(h)) * context  # β gate
        return context, alpha

    def _advance(self, embedded: Tensor, state: State) -> tuple[Tensor, Tensor, State]:
        """One step from embedded y_{t−1} (B, E): features (B, H), α (B, L) and the next state."""
        context, alpha = self._attend(state["h"], state)
        h, c = self.cell(torch.cat([embedded, context], dim=-1), (state["h"], state["c"]))
        return self.dropout(h), alpha, {**state, "h": h, "c": c}

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        features, alpha, state = self._advance(self.tgt_embed(prev_tokens), state)
        return features, {**state, "alpha": alpha}  # α kept for attention pictures; reorder follows the beam

    def step_modules(self) -> tuple[nn.Module, ...]:
        return (self.cell,)  # the step's attention is made of linear layers called from _attend

    def attention(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """Teacher forcing: features (B, T, H) and attention weights α (B, T, L)."""
        state = self.encode(batch.inputs)
        embedded = self.tgt_embed(batch.prev_tokens)  # (B, T, E)
        outputs, alphas = [], []
        for step_embedded in embedded.unbind(1):
            features, alpha, state = self._advance(step_embedded, state)
            outputs.append(features)
            alphas.append(alpha)
        return torch.stack(outputs, dim=1), torch.stack(alphas, dim=1)

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        features, alphas = self.attention(batch)  # (B, T, H), (B, T, L)
        if self.config.attention_reg == 0:
            return features, {}
        mask = batch.prev_tokens.ne(self.pad_index).unsqueeze(-1).to(alphas.dtype)  # (B, T, 1)
        coverage = (alphas * mask).sum(dim=1)  # (B, L): Σ_t α_ti over the caption's real steps
        return features, {"attention": self.config.attention_reg * ((1.0 - coverage) ** 2).mean()}

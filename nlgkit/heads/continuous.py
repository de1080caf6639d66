"""Continuous output (Kumar & Tsvetkov 2019; Tokarchuk & Niculae 2024): predict a vector, not a distribution.

The features are projected (Linear, no bias) to the dimension e of a frozen target table E (V, e), and
training pulls the prediction ĥ towards the gold word's vector:

- ``cosine`` (default, Tokarchuk & Niculae): Σ 1 − cos(ĥ, E[t]) over the non-padding targets;
- ``smp`` / ``smd``: Bhat et al.'s (2019) max-margin losses with a synthetic negative (their Appendix C.1):
  max(0, γ + cos(ĥ, n) − cos(ĥ, E[t])) with n the part of ĥ orthogonal to E[t] (*by projection*) or
  ĥ − E[t] (*by difference*);
- ``nllvmf``: Kumar & Tsvetkov's von Mises–Fisher NLL with both regularisers,
  −log C_e(‖ĥ‖) − λ₂·ĥᵀE[t] + λ₁·‖ĥ‖ (:mod:`nlgkit.heads.vmf` keeps the Bessel terms finite).

Search scores a word by the Langevin log-likelihood with a fixed concentration κ (Tokarchuk & Niculae,
Appendix D): κ·cos(ĥ, E[t]) + log C_e(κ), higher is better. These are *scores*, not normalised
log-probabilities (``normalized = False``): greedy search is nearest-neighbour lookup by cosine, and the
constant log C_e(κ) shifts every hypothesis of a given length alike (it cancels under length normalisation).

The table is a buffer: ``table = PATH`` reads a ``nlgkit embed`` table (``PATH`` and ``PATH.vocab.txt``, whose
words must be the run's vocabulary in the same order), and ``table = ""`` draws random unit vectors
("random sphere") from the run's seed, which Tokarchuk & Niculae find as good as pre-trained ones. Rows are
unit-normalised once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS
from nlgkit.heads.base import HeadConfig, HeadContext, OutputHead
from nlgkit.heads.vmf import log_vmf_normaliser
from nlgkit.wordvectors.tables import load_table_for, random_table, table_kind


@dataclass(frozen=True)
class ContinuousHeadConfig(HeadConfig):
    input_files = ("table",)
    type: str = "continuous"
    dim: int = 128  # e, when the table is drawn at random (Tokarchuk & Niculae's best, Appendix C.2)
    table: str = ""  # an `nlgkit embed` table; "" = random unit vectors from the seed
    loss: Literal["cosine", "smp", "smd", "nllvmf"] = "cosine"
    margin: float = 0.5  # γ of the max-margin losses
    lambda1: float = 0.02  # NLLvMF: weight of ‖ĥ‖
    lambda2: float = 0.1  # NLLvMF: weight of ĥᵀE[t]
    kappa: float = 1.0  # concentration of the search score

    def validate(self, source: str, run_config: Any) -> None:
        super().validate(source, run_config)
        if self.sampling.share < 1.0:
            raise ConfigError(f"{source}: head.sampling: the continuous head has no softmax to sample")
        for key in ("dim", "kappa"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"{source}: head.{key} = {getattr(self, key)}: must be positive")
        if self.table and not Path(self.table).expanduser().is_file():
            raise ConfigError(f"{source}: head.table = {self.table!r}: file not found (make one with `nlgkit embed`)")

    def target_embeddings(self) -> str:
        """uniform (random sphere, also the default table), hypercube, pretrained, combined, … as the paper
        names them, from the table's recorded kind."""
        if not self.table:
            return "uniform"
        kind = table_kind(Path(self.table).expanduser())
        return {"sphere": "uniform", "cube": "hypercube"}.get(kind, kind or "unknown")


@HEADS.register("continuous", ContinuousHeadConfig)
class ContinuousHead(OutputHead):
    normalized = False
    table: Tensor  # (V, e) buffer: the frozen unit target vectors

    def __init__(self, context: HeadContext, config: ContinuousHeadConfig) -> None:
        super().__init__(context)
        if config.table:
            table = load_table_for(Path(config.table).expanduser(), context.vocab_tokens, context.vocab_source)
        else:
            table = random_table(context.vocab_size, config.dim, "sphere", context.seed)
        if table.size(0) != context.vocab_size:
            raise ConfigError(f"head.table: {table.size(0)} rows for a vocabulary of {context.vocab_size}")
        self.config = config
        self.register_buffer("table", F.normalize(table.float(), dim=1), persistent=True)  # (V, e), frozen
        self.projection = nn.Linear(context.feature_dim, table.size(1), bias=False)  # d → e
        self.log_normaliser = float(log_vmf_normaliser(table.size(1), torch.tensor([config.kappa],
                                                                                  dtype=torch.float64)))

    @classmethod
    def from_config(cls, config: ContinuousHeadConfig, context: HeadContext) -> ContinuousHead:
        return cls(context, config)

    def predict(self, features: Tensor) -> Tensor:
        """ĥ (…, e): the predicted target vector."""
        return self.projection(features)

    def logits(self, features: Tensor) -> Tensor:
        """Cosine similarities (…, V) of ĥ to every target vector."""
        predicted = F.normalize(self.predict(features).float(), dim=-1)
        with torch.autocast(predicted.device.type, enabled=False):  # float32 scores, also under bf16 autocast
            return F.linear(predicted, self.table)

    def log_probs(self, features: Tensor) -> Tensor:
        """Langevin log-likelihood scores κ·cos + log C_e(κ) (not normalised over V)."""
        return self.config.kappa * self.logits(features) + self.log_normaliser

    def loss(self, features: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
        mask = targets.ne(self.pad_index)
        predicted = self.predict(features[mask]).float()  # (n, e)
        gold = self.table.index_select(0, targets[mask])  # (n, e), unit rows
        cosine = F.cosine_similarity(predicted, gold, dim=-1)
        kind = self.config.loss
        if kind == "cosine":
            return (1.0 - cosine).sum()
        if kind in ("smp", "smd"):
            if kind == "smp":  # the part of ĥ orthogonal to the gold vector
                negative = predicted - (predicted * gold).sum(-1, keepdim=True) * gold
            else:
                negative = predicted - gold
            wrong = F.cosine_similarity(predicted, negative, dim=-1)
            return torch.relu(self.config.margin + wrong - cosine).sum()
        norm = predicted.norm(dim=-1).clamp_min(1e-6)  # nllvmf: κ = ‖ĥ‖
        nll = -log_vmf_normaliser(predicted.size(-1), norm) - self.config.lambda2 * (predicted * gold).sum(-1)
        return (nll + self.config.lambda1 * norm).sum()

    def target_vectors(self) -> Tensor:
        return self.table

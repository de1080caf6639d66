"""The output-head protocol: the one place where decoder features meet the target vocabulary.

Every model ends at features f (…, d) and owns exactly one head; training asks the head for a loss
against gold targets and search asks it for log-scores over the vocabulary. Nothing else touches the
classification layer, so a new head (joint input–output, sampled softmax, continuous cosine) is one
new file here and never a change to a model or to the search.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class HeadContext:
    """What a builder knows when it creates a head.

    ``target_embedding`` is the decoder's input embedding, passed in so that tied and joint heads share it
    at construction time instead of being patched afterwards. ``seed`` makes fixed random matrices
    reproducible; ``token_counts`` are training frequencies by vocabulary index (heads may ignore them).
    """

    feature_dim: int
    vocab_size: int
    pad_index: int
    target_embedding: nn.Embedding
    seed: int = 1
    token_counts: tuple[int, ...] | None = None


class OutputHead(nn.Module):
    """Base class of all heads: softmax over ``logits`` unless a subclass overrides ``loss``/``log_probs``."""

    def __init__(self, context: HeadContext) -> None:
        super().__init__()
        self.feature_dim = context.feature_dim
        self.vocab_size = context.vocab_size
        self.pad_index = context.pad_index

    def logits(self, features: Tensor) -> Tensor:
        """Unnormalised scores (…, V) for features (…, d)."""
        raise NotImplementedError

    def log_probs(self, features: Tensor) -> Tensor:
        """Log-scores (…, V) for search; normalised (logsumexp = 0) for every softmax head."""
        return F.log_softmax(self.logits(features).float(), dim=-1)

    def loss(self, features: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
        """Summed training loss over the non-padding targets.

        features: (…, d); targets: (…) token indices, ``pad_index`` where there is no target.
        Padding positions are dropped before the vocabulary projection, so they cost nothing.
        """
        mask = targets.ne(self.pad_index)
        selected = features[mask]  # (n, d)
        gold = targets[mask]  # (n,)
        logits = self.logits(selected).float()
        return F.cross_entropy(logits, gold, reduction="sum", label_smoothing=label_smoothing)

    def target_vectors(self) -> Tensor | None:
        """The (V, d') matrix of target vectors when the head has one (for analyses); else None."""
        return None


def regenerable_generator(seed: int) -> torch.Generator:
    """A CPU generator for fixed random matrices: the same seed gives the same matrix on any device."""
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed)
    return generator

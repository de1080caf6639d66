"""Sampled softmax for any softmax head (Pappas et al. §3.3): ``[head.sampling] share = 0.25``.

In training the softmax runs over V′: every target of the batch plus negatives drawn uniformly (without
replacement) from the rest of the vocabulary, up to ``share · |V|`` classes; if the batch's targets alone
exceed that budget all of them are kept (and the overflow is counted). Targets are remapped into V′ with one
vectorised index map, and the loss is summed over tokens exactly like the full one, so at ``share = 1`` it
equals the full softmax. Validation and search (the head in eval mode) always use the full vocabulary. The
negatives come from torch's global generator on the features' device, whose state every checkpoint saves,
so a seeded run and its resumption draw the same classes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor


def candidate_classes(gold: Tensor, vocab_size: int, share: float) -> tuple[Tensor, bool]:
    """V′ (sorted positives first, then uniform negatives) and whether the positives overflowed the budget."""
    positives = torch.unique(gold)  # (P,) sorted
    budget = max(1, round(share * vocab_size))
    missing = budget - positives.numel()
    if missing <= 0:
        return positives, missing < 0
    weights = torch.ones(vocab_size, device=gold.device)
    weights[positives] = 0.0
    negatives = torch.multinomial(weights, missing, replacement=False)  # uniform over the other classes
    return torch.cat([positives, negatives]), False


def sampled_loss(candidate_logits: Callable[[Tensor, Tensor], Tensor], vocab_size: int, features: Tensor,
                 gold: Tensor, share: float, label_smoothing: float = 0.0) -> tuple[Tensor, bool]:
    """Summed cross-entropy of ``gold`` (n,) over V′ for ``features`` (n, d), with a head's
    ``candidate_logits(features, rows)``; and the overflow flag."""
    rows, overflow = candidate_classes(gold, vocab_size, share)
    index = torch.full((vocab_size,), -1, dtype=torch.long, device=gold.device)
    index[rows] = torch.arange(rows.numel(), device=gold.device)  # class id → its column in V′
    logits = candidate_logits(features, rows).float()  # (n, |V′|)
    return F.cross_entropy(logits, index[gold], reduction="sum", label_smoothing=label_smoothing), overflow

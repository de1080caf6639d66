"""Sampling search: each output draws its words from the model's distribution instead of ranking them.

What fairseq's ``--sampling`` does, for back-translation and diverse captions: every sentence gets ``samples``
independent outputs, each step draws a word from the head's distribution at ``temperature``, restricted to the
``topk`` most likely words and/or to the smallest set whose probability reaches ``topp`` (nucleus sampling).
It runs on the same model protocol and the same masked step scores as the beam (:mod:`nlgkit.search.steps`):
``never`` ids, ``min_len`` and ``no_repeat_ngram_size`` apply, and a sample's log-probability is the model's own
(untempered, unrestricted), so samples of every head rank and score like beam outputs. Outputs are returned
best first. Draws are counter-based, a hash of (seed, item, sample, step) rather than a random stream, so an
input's samples are the same in any batch, order, batch size or stream grouping, on any device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError
from nlgkit.search.steps import Hypothesis, Rules, one_word_at_a_time, search_device

if TYPE_CHECKING:
    from nlgkit.models.base import Generator, State


@dataclass(frozen=True)
class Sampling:
    """How to draw: ``topk`` 0 and ``topp`` 1.0 leave the whole (tempered) distribution."""

    topk: int = 0
    topp: float = 1.0
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.topk < 0:
            raise ConfigError(f"sampling topk = {self.topk}: must be 0 (all words) or positive")
        if not 0.0 < self.topp <= 1.0:
            raise ConfigError(f"sampling topp = {self.topp}: must be in (0, 1]")
        if not (self.temperature > 0.0 and math.isfinite(self.temperature)):
            raise ConfigError(f"sampling temperature = {self.temperature}: must be a positive number")


def restrict(scores: Tensor, sampling: Sampling) -> Tensor:
    """The (B, V) scores tempered, with the words outside top-k / the nucleus at −inf (a new tensor)."""
    logits = scores / sampling.temperature
    if 0 < sampling.topk < logits.size(1):
        kth = logits.topk(sampling.topk, dim=1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, -math.inf)
    if sampling.topp < 1.0:
        ordered, order = logits.sort(dim=1, descending=True)  # (B, V)
        probs = ordered.softmax(dim=1)
        before = probs.cumsum(dim=1) - probs  # mass of the more likely words
        outside = before >= sampling.topp  # the most likely word is always kept (its "before" is 0)
        logits = logits.scatter(1, order, ordered.masked_fill(outside, -math.inf))
    return logits


def _mix(values: Tensor) -> Tensor:
    """A 32-bit integer hash (two xor-shift-multiply rounds) of int64 values in [0, 2³²), staying in that range:
    products stay below 2⁵⁹, so int64 never overflows, on any device."""
    for _ in range(2):
        values = ((values ^ (values >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    return values ^ (values >> 16)


def uniforms(seed: int, items: Tensor, copies: Tensor, step: int) -> Tensor:
    """One uniform draw in (0, 1) per (item, copy) at ``step`` (float64, shape of ``items``), a function of these
    numbers alone: not of the batch, its order or its size."""
    key = _mix(torch.full_like(items, seed & 0xFFFFFFFF))
    for part in (items, copies, torch.full_like(items, step)):
        key = _mix(key ^ (part & 0xFFFFFFFF))
    return (key.double() + 0.5) / 2.0**32


@torch.inference_mode()
def sample_search(model: Generator, state: State, rules: Rules, *, sampling: Sampling, samples: int = 1,
                  item_ids: Tensor | None = None) -> list[list[Hypothesis]]:
    """``samples`` drawn outputs per sentence, best (length-normalised log-probability) first.

    ``item_ids`` (B,) number the sentences for the draws (default: their place in the batch): the k-th sample of
    item i at step t inverts the word distribution's CDF at ``uniforms(seed, i, k, t)``, so an item's samples do
    not depend on what else is in its batch, and the first k of n samples are the k samples of ``samples = k``."""
    rules.check(samples, samples)
    device = search_device(state, rules.max_lens)
    items = (torch.arange(rules.batch_size) if item_ids is None else item_ids).to(device=device, dtype=torch.long)
    if tuple(items.shape) != (rules.batch_size,):
        raise ValueError(f"item_ids has shape {tuple(items.shape)}, expected ({rules.batch_size},)")

    def draw(scores: Tensor, outputs: Tensor, step: int) -> Tensor:
        logits = restrict(scores, sampling)
        stuck = logits.isneginf().all(dim=1)  # every word banned (a tiny vocabulary under the constraints)
        if bool(stuck.any()):
            logits[stuck, rules.eos] = 0.0  # such an output ends, at its −inf log-probability
        cdf = logits.softmax(dim=1).double().cumsum(dim=1)  # (r, V)
        target = uniforms(sampling.seed, items[outputs // samples], outputs % samples, step) * cdf[:, -1]  # (r,)
        # the first word whose CDF passes the target: words without probability have no width and are never hit
        chosen = torch.searchsorted(cdf, target.unsqueeze(1), right=True)  # (r, 1)
        return chosen.clamp(max=cdf.size(1) - 1)

    results = one_word_at_a_time(model, state, draw, rules, copies=samples)
    return [sorted(hyps, key=lambda h: h.score, reverse=True) for hyps in results]

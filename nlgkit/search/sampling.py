"""Sampling search: each output draws its words from the model's distribution instead of ranking them.

What fairseq's ``--sampling`` does, for back-translation and diverse captions: every sentence gets ``samples``
independent outputs, each step draws a word from the head's distribution at ``temperature``, restricted to the
``topk`` most likely words and/or to the smallest set whose probability reaches ``topp`` (nucleus sampling).
It runs on the same model protocol and the same masked step scores as the beam (:mod:`nlgkit.search.steps`):
``never`` ids, ``min_len`` and ``no_repeat_ngram_size`` apply, and a sample's log-probability is the model's own
(untempered, unrestricted), so samples of every head rank and score like beam outputs. Outputs are returned
best first. Draws come from one ``torch.Generator`` seeded with ``seed``: the same input in the same batches
gives the same samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError
from nlgkit.search.steps import Hypothesis, check_options, one_word_at_a_time, search_device

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


@torch.inference_mode()
def sample_search(
    model: Generator,
    state: State,
    *,
    batch_size: int,
    bos: int,
    eos: int,
    max_lens: Tensor,
    sampling: Sampling,
    samples: int = 1,
    length_penalty: float = 1.0,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
    never: tuple[int, ...] = (),
) -> list[list[Hypothesis]]:
    """``samples`` drawn outputs per sentence, best (length-normalised log-probability) first."""
    check_options(batch_size, samples, samples, max_lens, min_len, no_repeat_ngram_size)
    generator = torch.Generator(device=search_device(state, max_lens)).manual_seed(sampling.seed)

    def draw(scores: Tensor) -> Tensor:
        logits = restrict(scores, sampling)
        stuck = logits.isneginf().all(dim=1)  # every word banned (a tiny vocabulary under the constraints)
        if bool(stuck.any()):
            logits[stuck, eos] = 0.0  # such an output ends, at its −inf log-probability
        return torch.multinomial(logits.softmax(dim=1), 1, generator=generator)  # (r, 1)

    results = one_word_at_a_time(model, state, draw, copies=samples, batch_size=batch_size, bos=bos, eos=eos,
                                 max_lens=max_lens, length_penalty=length_penalty, min_len=min_len,
                                 no_repeat_ngram_size=no_repeat_ngram_size, never=never)
    return [sorted(hyps, key=lambda h: h.score, reverse=True) for hyps in results]

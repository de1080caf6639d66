"""Forced decoding: the model's log-score of given outputs (fairseq's ``--score-reference``, Sockeye's
``score``), through the same steps as every search.

Each sentence's target is fed one token at a time, as greedy search feeds its own choices, so a score here
is exactly the ``log_prob`` the search would give that output (the test scores beam outputs again), for every
model and head, ensembles included; nothing is masked, since a reference may hold any word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nlgkit.search.steps import Hypothesis, Rules, one_word_at_a_time, search_device

if TYPE_CHECKING:
    from nlgkit.models.base import Generator, State


@torch.inference_mode()
def forced_hypotheses(model: Generator, state: State, targets: list[list[int]], *, bos: int, eos: int,
                      ended: bool = True) -> list[Hypothesis]:
    """Each target (token ids without BOS/EOS) as the search would have output it, one per sentence of ``state``:
    its log-score (``log_prob``, the sum of the head's per-step log-scores: log-probabilities for softmax heads)
    and each step's (``token_scores``, the EOS's last). ``ended=False`` scores the targets as prefixes, without
    the EOS (as the search scores an output cut at its max_len)."""
    device = search_device(state, torch.empty(0))
    lengths = torch.tensor([len(target) + int(ended) for target in targets], dtype=torch.long)  # steps
    padded = torch.full((len(targets), int(lengths.max()) if targets else 1), eos, dtype=torch.long)  # (B, T)
    for i, target in enumerate(targets):
        padded[i, : len(target)] = torch.tensor(target, dtype=torch.long)
    padded = padded.to(device)

    def feed(_scores: Tensor, outputs: Tensor, step: int) -> Tensor:
        return padded[outputs, step].unsqueeze(1)  # (r, 1): each row's next target token

    rules = Rules(batch_size=len(targets), bos=bos, eos=eos, max_lens=lengths, length_penalty=0.0)
    found: list[list[Hypothesis]] = one_word_at_a_time(model, state, feed, rules, copies=1)
    return [hyps[0] for hyps in found]


def forced_scores(model: Generator, state: State, targets: list[list[int]], *, bos: int, eos: int,
                  ended: bool = True) -> list[float]:
    """The log-score of each target and its EOS (:func:`forced_hypotheses`' ``log_prob``)."""
    return [h.log_prob for h in forced_hypotheses(model, state, targets, bos=bos, eos=eos, ended=ended)]

"""What every search shares: the output record, the rules every strategy obeys (length limits, masks, prefixes,
length normalisation, alignment) with their checks, one step's masked scores and the n-gram ban (greedy and beam in
:mod:`nlgkit.search.beam`, constrained beam in :mod:`nlgkit.search.constrained`, sampling in
:mod:`nlgkit.search.sampling`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nlgkit.core import alignment
from nlgkit.core.errors import ConfigError

if TYPE_CHECKING:
    from nlgkit.models.base import Generator, State


@dataclass
class Hypothesis:
    """One output: tokens without BOS/EOS, the score used for ranking and the raw log-probability; searched
    with ``alignment``, the source position each token's step attended to most; ``token_scores``: each token's
    log-score, then the EOS's when the output ended with one (they sum to ``log_prob``; fairseq's positional
    scores)."""

    tokens: list[int]
    score: float  # log_prob / length ** length_penalty, length counting the EOS when there is one
    log_prob: float
    alignment: list[int] | None = None
    token_scores: list[float] | None = None


@dataclass(frozen=True)
class Rules:
    """What every strategy obeys, whatever picks its words: a batch of ``batch_size`` sentences decoded from
    ``bos`` until ``eos``; each sentence's limit ``max_lens`` (B,) in decoding steps (output tokens, the EOS
    counted); the masks (no EOS before ``min_len`` tokens, no repeated n-gram of ``no_repeat_ngram_size``, never the
    ``never`` ids, the forced words of ``prefix`` (B, P), see :func:`prefix_table`); scores divided by
    length ** ``length_penalty``; with ``alignment``, each token's source position. One record, so that greedy,
    beam, constrained beam and sampling take these the same way and an option is added in one place."""

    batch_size: int
    bos: int
    eos: int
    max_lens: Tensor
    length_penalty: float = 1.0
    min_len: int = 0
    no_repeat_ngram_size: int = 0
    never: tuple[int, ...] = ()
    alignment: bool = False
    prefix: Tensor | None = None

    def check(self, beam_size: int = 1, nbest: int = 1) -> None:
        """Reject options a user can get wrong with one clear message."""
        if beam_size < 1:
            raise ConfigError(f"beam_size = {beam_size}: must be at least 1")
        if not 1 <= nbest <= beam_size:
            raise ConfigError(f"nbest = {nbest}: must be between 1 and beam_size ({beam_size})")
        if self.min_len < 0:
            raise ConfigError(f"min_len = {self.min_len}: must not be negative")
        if self.no_repeat_ngram_size < 0:
            raise ConfigError(f"no_repeat_ngram_size = {self.no_repeat_ngram_size}: must not be negative (0 = off)")
        if tuple(self.max_lens.shape) != (self.batch_size,):
            raise ValueError(f"max_lens has shape {tuple(self.max_lens.shape)}, expected ({self.batch_size},)")

    def begin(self, state: State, results: list[list[Hypothesis]]) -> tuple[State, Tensor, Tensor]:
        """Start a search: sentences with max_len 0 get their empty output in ``results``; returns the state (asked
        for alignment when wanted), ``max_lens`` on the state's device, and the ids (n,) of the sentences that
        decode."""
        device = search_device(state, self.max_lens)
        max_lens = self.max_lens.to(device=device, dtype=torch.long)
        if self.alignment:
            state = ask_alignment(state, self.batch_size, device)
        for i in max_lens.le(0).nonzero().flatten().tolist():
            results[i].append(Hypothesis([], 0.0, 0.0, token_scores=[]))
        return state, max_lens, max_lens.gt(0).nonzero().flatten()

    def scores(self, model: Generator, features: Tensor, tokens: Tensor, sentences: Tensor,
               step: int) -> tuple[Tensor, Tensor]:
        """:func:`step_scores` at ``step`` for rows (R,) of these ``sentences`` holding ``tokens`` (R, t)."""
        return step_scores(model, features, self.eos, step < self.min_len, self.never, tokens,
                           self.no_repeat_ngram_size, forced_words(self.prefix, sentences, step))

    def hypothesis(self, tokens: list[int], log_prob: float, length: int, positions: list[int] | None,
                   token_scores: list[float]) -> Hypothesis:
        """An ended output of ``length`` steps, its score length-normalised."""
        return Hypothesis(tokens, normalise(log_prob, length, self.length_penalty), log_prob, positions, token_scores)


def ask_alignment(state: State, rows: int, device: torch.device) -> State:
    """``state`` with the request that each step report its attention over the source (nlgkit.core.alignment)."""
    return {**state, alignment.ALIGNMENT: torch.zeros(rows, 0, device=device)}


def aligned_positions(model: Generator, state: State) -> Tensor:
    """The source position (B,) each row's last step attended to most, or a ConfigError naming the model."""
    weights = state.get(alignment.ALIGNMENT)
    if weights is None or weights.size(1) == 0:
        raise ConfigError(f"{type(model).__name__}: this model's decoder reports no attention over source "
                          "positions, so its outputs cannot be aligned to the source (--replace-unk)")
    return weights.argmax(dim=1)


def normalise(log_prob: float, length: int, length_penalty: float) -> float:
    """Length-normalised score; an empty output (max_len 0) has nothing to divide by and stays raw."""
    if length_penalty == 0.0 or length == 0:
        return log_prob
    return log_prob / length**length_penalty


def step_scores(model: Generator, features: Tensor, eos: int, forbid_eos: bool, never: tuple[int, ...],
                tokens: Tensor, no_repeat_ngram_size: int, forced: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Float32 word scores (B, V) and offsets (B,) whose difference is the head's log-scores
    (``OutputHead.search_scores``); the ``never`` ids, EOS before ``min_len`` tokens and the words that would repeat
    an n-gram of the row's ``tokens`` (B, t) are masked out in place (the scores are the search's own tensor, see
    ``search_scores``): no copy of a (B, V) matrix per step. ``forced`` (B,): a row whose entry is a word id
    (not −1) may take that word alone, at its own score, whatever the masks (a target prefix)."""
    word_scores, offset = model.head.search_scores(features)
    if forced is not None:  # the forced words' own scores, before any mask
        rows = forced.ge(0).nonzero().flatten()
        kept = word_scores[rows, forced[rows]]
    masked = (*never, eos) if forbid_eos else never
    if masked:
        word_scores.index_fill_(1, torch.tensor(masked, device=word_scores.device), -math.inf)
    ban_repeated_ngrams(word_scores, tokens, no_repeat_ngram_size)
    if forced is not None:
        word_scores[rows] = -math.inf
        word_scores[rows, forced[rows]] = kept
    return word_scores, offset


def prefix_table(prefixes: Sequence[Sequence[int]] | None, batch_size: int, device: torch.device) -> Tensor | None:
    """Target prefixes as a (B, P) table of word ids, −1 past each sentence's prefix (None: no prefix at all)."""
    if prefixes is None or not any(prefixes):
        return None
    if len(prefixes) != batch_size:
        raise ValueError(f"{len(prefixes)} prefixes for a batch of {batch_size}")
    table = torch.full((batch_size, max(len(prefix) for prefix in prefixes)), -1, dtype=torch.long)
    for i, prefix in enumerate(prefixes):
        table[i, : len(prefix)] = torch.tensor(list(prefix), dtype=torch.long)
    return table.to(device)


def forced_words(prefix: Tensor | None, sentences: Tensor, step: int) -> Tensor | None:
    """The word each row must take at ``step`` (−1: free), for rows of these sentences (R,); None once past every
    prefix."""
    if prefix is None or step >= prefix.size(1):
        return None
    return prefix[:, step].index_select(0, sentences)


def ban_repeated_ngrams(word_scores: Tensor, tokens: Tensor, size: int) -> None:
    """Mask, in place, each row's words that would complete an n-gram of ``size`` tokens the row already holds.

    Every complete earlier window of the row's tokens (R, t) whose first size − 1 tokens equal the row's last
    size − 1 bans its last token: one comparison over (R, t, size), no Python loop over hypotheses."""
    if size <= 0 or tokens.size(1) < size:
        return  # no complete n-gram yet, so nothing to repeat
    windows = tokens.unfold(1, size, 1)  # (R, t − size + 1, size)
    tail = tokens[:, tokens.size(1) - size + 1 :]  # (R, size − 1)
    matches = windows[:, :, :-1].eq(tail.unsqueeze(1)).all(dim=2)  # (R, t − size + 1); all true when size is 1
    rows, starts = matches.nonzero(as_tuple=True)
    word_scores[rows, windows[rows, starts, -1]] = -math.inf


def one_word_at_a_time(
    model: Generator,
    state: State,
    choose: Callable[[Tensor, Tensor, int], Tensor],
    rules: Rules,
    *,
    copies: int,
) -> list[list[Hypothesis]]:
    """``copies`` outputs per sentence, each extended by the one word ``choose`` picks from its row of masked
    scores: ``choose(scores (R, V), outputs (R,), step) → (R, 1)``, ``outputs`` numbering each row's output
    (sentence · copies + copy, sentences of the batch in order): argmax for greedy search, a draw for sampling.
    Outputs stop at their EOS or max_len and leave the batch; each sentence's outputs in the order they ended."""
    results: list[list[Hypothesis]] = [[] for _ in range(rules.batch_size)]
    state, max_lens, active = rules.begin(state, results)  # (n,) sentence ids still decoding
    device = max_lens.device
    rows = active.repeat_interleave(copies) if copies > 1 else active  # (r,) the sentence of each output
    if rows.numel() != rules.batch_size or copies > 1:  # (one row per sentence and none left out: nothing moves)
        state = model.reorder(state, rows)
    ids = rows.tolist()
    outputs = rows * copies + torch.arange(len(ids), device=device) % copies  # (r,)
    tokens = torch.empty(len(ids), 0, dtype=torch.long, device=device)  # (r, t)
    positions = torch.empty(len(ids), 0, dtype=torch.long, device=device)  # (r, t) with alignment
    token_scores = torch.empty(len(ids), 0, device=device)  # (r, t) float32: each step's log-score
    log_prob = torch.zeros(len(ids), device=device)  # (r,) float32
    prev = torch.full((len(ids),), rules.bos, dtype=torch.long, device=device)  # (r,)
    step = 0
    while ids:
        features, state = model.step(prev, state)  # (r, d)
        if rules.alignment:
            positions = torch.cat([positions, aligned_positions(model, state).unsqueeze(1)], dim=1)
        word_scores, offset = rules.scores(model, features, tokens, rows, step)  # (r, V), (r,)
        chosen = choose(word_scores, outputs, step)  # (r, 1)
        chosen_score = word_scores.gather(1, chosen).squeeze(1) - offset  # (r,)
        log_prob = log_prob + chosen_score
        token_scores = torch.cat([token_scores, chosen_score.unsqueeze(1)], dim=1)
        prev = chosen.squeeze(1)
        tokens = torch.cat([tokens, chosen], dim=1)
        step += 1
        ended = prev.eq(rules.eos) | max_lens[rows].le(step)  # (r,)
        if not bool(ended.any()):
            continue
        ended_positions = positions[ended].tolist() if rules.alignment else None
        for k, (pos, row, lp, scores) in enumerate(zip(ended.nonzero().flatten().tolist(), tokens[ended].tolist(),
                                                       log_prob[ended].tolist(), token_scores[ended].tolist())):
            if row and row[-1] == rules.eos:
                row = row[:-1]
            found = ended_positions[k][: len(row)] if ended_positions is not None else None
            results[ids[pos]].append(rules.hypothesis(row, lp, step, found, scores))
        live = (~ended).nonzero().flatten()  # (r',)
        rows, outputs, tokens, log_prob, prev = rows[live], outputs[live], tokens[live], log_prob[live], prev[live]
        positions, token_scores = positions[live], token_scores[live]
        ids = rows.tolist()
        if ids:
            state = model.reorder(state, live)
    return results


def search_device(state: State, max_lens: Tensor) -> torch.device:
    """Decode where the state lives (max_lens may come from the CPU)."""
    for value in state.values():
        return value.device
    return max_lens.device

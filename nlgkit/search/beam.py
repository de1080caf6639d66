"""Batched beam and greedy search over an already encoded state.

Search knows nothing about architectures: it calls only ``model.step``, ``model.reorder`` and
``model.head.search_scores`` (the head's log-scores as word scores minus a per-row offset; see
``nlgkit.heads.base``), so translation and captioning models and every head share it.
The caller runs ``model.encode`` and passes the state in.

The beam follows fairseq's sequence generator: each step takes the top 2·beam candidates of every
sentence (found among each hypothesis's own top 2·beam words, so no (beam × vocabulary) matrix is
written), moves the EOS ones ranked within the top beam to the finished list, and keeps the first beam
non-EOS ones active, so a slot whose hypothesis ended is refilled instead of lost. A sentence stops once
it has ``beam_size`` finished hypotheses, or after ``max_len`` steps; finished sentences leave the batch
so that one long sentence does not keep the others computing.

``max_lens`` counts decoding steps, i.e. output tokens with the EOS included: an output that reaches it
without choosing EOS is kept as it is (no EOS, ``max_len`` tokens).

Constraints mask words before ranking, so a constrained beam is the best the model allows under them:
``min_len`` forbids EOS before that many tokens; ``no_repeat_ngram_size`` n forbids any word that would
repeat an n-gram the hypothesis already holds (fairseq's ``--no-repeat-ngram-size``; the BOS is not a
token of it, and EOS never repeats anything, so a hypothesis can always end once ``min_len`` allows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError

if TYPE_CHECKING:
    from nlgkit.models.base import Generator, State


@dataclass
class Hypothesis:
    """One output: tokens without BOS/EOS, the score used for ranking and the raw log-probability."""

    tokens: list[int]
    score: float  # log_prob / length ** length_penalty, length counting the EOS when there is one
    log_prob: float


def normalise(log_prob: float, length: int, length_penalty: float) -> float:
    """Length-normalised score; an empty output (max_len 0) has nothing to divide by and stays raw."""
    if length_penalty == 0.0 or length == 0:
        return log_prob
    return log_prob / length**length_penalty


def search(
    model: Generator,
    state: State,
    *,
    batch_size: int,
    bos: int,
    eos: int,
    beam_size: int,
    max_lens: Tensor,
    length_penalty: float = 1.0,
    nbest: int = 1,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
    never: tuple[int, ...] = (),
) -> list[list[Hypothesis]]:
    """Beam search, or greedy search when ``beam_size`` is 1 (same result, less work).

    ``never``: token ids that are not words (padding, BOS) and are never output. A softmax head learns to give
    them no mass, but a score head ranks every row of its table: continuous output against targets extracted
    from a softmax model (whose padding and BOS rows were never trained) would otherwise emit them."""
    _check(batch_size, beam_size, nbest, max_lens, min_len, no_repeat_ngram_size)
    shared = {"batch_size": batch_size, "bos": bos, "eos": eos, "max_lens": max_lens,
              "length_penalty": length_penalty, "min_len": min_len,
              "no_repeat_ngram_size": no_repeat_ngram_size, "never": never}
    if beam_size == 1:
        return greedy_search(model, state, **shared)  # type: ignore[arg-type]
    return beam_search(model, state, beam_size=beam_size, nbest=nbest, **shared)  # type: ignore[arg-type]


@torch.inference_mode()
def greedy_search(
    model: Generator,
    state: State,
    *,
    batch_size: int,
    bos: int,
    eos: int,
    max_lens: Tensor,
    length_penalty: float = 1.0,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
    never: tuple[int, ...] = (),
) -> list[list[Hypothesis]]:
    """Argmax decoding, batched; each sentence stops at its EOS or its max_len and leaves the batch."""
    _check(batch_size, 1, 1, max_lens, min_len, no_repeat_ngram_size)
    device = _device(state, max_lens)
    max_lens = max_lens.to(device=device, dtype=torch.long)
    results: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    active = _start(results, max_lens)  # (n,) sentence ids still decoding
    if active.numel() < batch_size:
        state = model.reorder(state, active)
    ids = active.tolist()
    n = len(ids)
    tokens = torch.empty(n, 0, dtype=torch.long, device=device)  # (n, t)
    log_prob = torch.zeros(n, device=device)  # (n,) float32
    prev = torch.full((n,), bos, dtype=torch.long, device=device)  # (n,)
    step = 0
    while n:
        features, state = model.step(prev, state)  # (n, d)
        word_scores, offset = _step_scores(model, features, eos, step < min_len, never)  # (n, V), (n,)
        _ban_repeated_ngrams(word_scores, tokens, no_repeat_ngram_size)
        best_score, best = word_scores.max(dim=1)  # (n,), (n,)
        log_prob = log_prob + (best_score - offset)
        tokens = torch.cat([tokens, best.unsqueeze(1)], dim=1)
        step += 1
        ended = best.eq(eos) | max_lens[active].le(step)  # (n,)
        prev = best
        if not bool(ended.any()):
            continue
        for pos, row, lp in zip(
            ended.nonzero().flatten().tolist(), tokens[ended].tolist(), log_prob[ended].tolist()
        ):
            if row and row[-1] == eos:
                row = row[:-1]
            results[ids[pos]].append(Hypothesis(row, normalise(lp, step, length_penalty), lp))
        live = (~ended).nonzero().flatten()  # (n',)
        active, tokens, log_prob, prev = active[live], tokens[live], log_prob[live], prev[live]
        ids = active.tolist()
        n = len(ids)
        if n:
            state = model.reorder(state, live)
    return results


@torch.inference_mode()
def beam_search(
    model: Generator,
    state: State,
    *,
    batch_size: int,
    bos: int,
    eos: int,
    beam_size: int,
    max_lens: Tensor,
    length_penalty: float = 1.0,
    nbest: int = 1,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
    never: tuple[int, ...] = (),
) -> list[list[Hypothesis]]:
    """Batched beam search; returns per sentence its ``nbest`` best hypotheses, best first."""
    _check(batch_size, beam_size, nbest, max_lens, min_len, no_repeat_ngram_size)
    k = beam_size
    device = _device(state, max_lens)
    max_lens = max_lens.to(device=device, dtype=torch.long)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    active = _start(finished, max_lens)  # (n,) sentence ids still decoding
    ids = active.tolist()
    n = len(ids)
    beam_range = torch.arange(k, device=device)
    # The first step extends one hypothesis per sentence (the k copies would propose the same words), so
    # it runs on n rows and the state grows to n·k rows after it. A vocabulary smaller than the beam
    # cannot fill k beams from one row: then all k rows run from the start, beams 1… at −inf.
    beams = 1 if model.head.vocab_size >= k else k
    if beams > 1 or len(ids) < batch_size:  # (with one row per sentence and none left out, nothing moves)
        state = model.reorder(state, active.repeat_interleave(beams))  # every tensor (n·beams, …)
    scores = torch.full((n, beams), -math.inf, device=device)  # (n, beams) float32 cumulative log-probs
    scores[:, 0] = 0.0
    tokens = torch.empty(n * beams, 0, dtype=torch.long, device=device)  # (n·beams, t)
    prev = torch.full((n * beams,), bos, dtype=torch.long, device=device)  # (n·beams,)
    step = 0
    while n:
        features, state = model.step(prev, state)  # (n·beams, d)
        word_scores, offset = _step_scores(model, features, eos, step < min_len, never)  # (n·beams, V), (n·beams,)
        _ban_repeated_ngrams(word_scores, tokens, no_repeat_ngram_size)
        # A sentence's best 2k extensions are among each of its rows' best 2k words: rank those only.
        row_width = min(2 * k, word_scores.size(1))
        row_scores, row_words = word_scores.topk(row_width, dim=1)  # (n·beams, w)
        candidates = (scores.view(-1, 1) + (row_scores - offset.unsqueeze(1))).view(n, beams * row_width)
        top_scores, top_index = candidates.topk(min(2 * k, beams * row_width), dim=1)  # (n, 2k)
        top_beams = torch.div(top_index, row_width, rounding_mode="floor")  # (n, 2k)
        top_words = row_words.view(n, beams * row_width).gather(1, top_index)  # (n, 2k)
        top_rows = top_beams + torch.arange(n, device=device).unsqueeze(1) * beams  # (n, 2k) rows of n·beams
        is_eos = top_words.eq(eos)  # (n, 2k)
        step += 1

        # EOS candidates within the top k end their hypothesis (at most k finished per sentence).
        ending = is_eos[:, :k] & top_scores[:, :k].isfinite()  # (n, k)
        if bool(ending.any()):
            sent, rank = ending.nonzero(as_tuple=True)
            rows = top_rows[sent, rank]
            for pos, row, lp in zip(sent.tolist(), tokens[rows].tolist(), top_scores[sent, rank].tolist()):
                if len(finished[ids[pos]]) < k:
                    finished[ids[pos]].append(Hypothesis(row, normalise(lp, step, length_penalty), lp))

        # The first k non-EOS candidates stay active: EOS ones are pushed behind all others.
        width = top_scores.size(1)
        order = torch.arange(width, device=device) + is_eos.long() * width  # (n, 2k)
        keep = order.topk(k, dim=1, largest=False).indices  # (n, k), in rank order
        scores = top_scores.gather(1, keep)  # (n, k)
        keep_rows = top_rows.gather(1, keep).view(-1)  # (n·k,) the row of n·beams each new hypothesis extends
        prev = top_words.gather(1, keep).view(-1)  # (n·k,)
        tokens = torch.cat([tokens[keep_rows], prev.unsqueeze(1)], dim=1)  # (n·k, t+1)

        full = torch.tensor([len(finished[i]) >= k for i in ids], device=device)  # (n,)
        at_limit = max_lens[active].le(step)  # (n,)
        done = full | at_limit
        same_sentences = beams == k  # rows only move among the beams of each sentence (until one leaves)
        beams = k
        if bool(done.any()):
            same_sentences = False
            _finalise_at_limit(finished, ids, at_limit & ~full, tokens, scores, step, length_penalty)
            live = (~done).nonzero().flatten()  # (n',)
            live_rows = (live.unsqueeze(1) * k + beam_range).view(-1)  # (n'·k,)
            active, scores = active[live], scores[live]
            keep_rows, tokens, prev = keep_rows[live_rows], tokens[live_rows], prev[live_rows]
            ids = active.tolist()
            n = len(ids)
        if n:  # state rows follow their hypotheses
            state = _reorder(model, state, keep_rows, same_sentences)
    return [sorted(hyps, key=lambda h: h.score, reverse=True)[:nbest] for hyps in finished]


def _reorder(model: Generator, state: State, rows: Tensor, same_sentences: bool) -> State:
    """``model.reorder``; while rows only move among the beams of the same sentences, the model's static
    entries (equal across a sentence's beams) are kept as they are instead of being copied."""
    # getattr: a model may follow the protocol without subclassing Generator
    static: frozenset[str] = getattr(model, "static_state", frozenset()) if same_sentences else frozenset()
    if not static:
        return model.reorder(state, rows)
    moved = model.reorder({key: value for key, value in state.items() if key not in static}, rows)
    return {**moved, **{key: value for key, value in state.items() if key in static}}


def _finalise_at_limit(
    finished: list[list[Hypothesis]],
    ids: list[int],
    mask: Tensor,
    tokens: Tensor,
    scores: Tensor,
    step: int,
    length_penalty: float,
) -> None:
    """Sentences that reached max_len keep their live active hypotheses as they are, without EOS."""
    k = scores.size(1)
    for pos in mask.nonzero().flatten().tolist():
        rows = tokens[pos * k : (pos + 1) * k].tolist()
        for row, lp in zip(rows, scores[pos].tolist()):
            if math.isfinite(lp):
                finished[ids[pos]].append(Hypothesis(row, normalise(lp, step, length_penalty), lp))


def _step_scores(model: Generator, features: Tensor, eos: int, forbid_eos: bool,
                 never: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Float32 word scores (B, V) and offsets (B,) whose difference is the head's log-scores
    (``OutputHead.search_scores``); the ``never`` ids, and EOS before ``min_len`` tokens, are masked out in
    place (the scores are the search's own tensor, see ``search_scores``): no copy of a (B, V) matrix per step."""
    word_scores, offset = model.head.search_scores(features)
    masked = (*never, eos) if forbid_eos else never
    if masked:
        word_scores.index_fill_(1, torch.tensor(masked, device=word_scores.device), -math.inf)
    return word_scores, offset


def _ban_repeated_ngrams(word_scores: Tensor, tokens: Tensor, size: int) -> None:
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


def _start(results: list[list[Hypothesis]], max_lens: Tensor) -> Tensor:
    """Give sentences with max_len 0 their empty output; return the ids of the others (n,)."""
    for i in max_lens.le(0).nonzero().flatten().tolist():
        results[i].append(Hypothesis([], 0.0, 0.0))
    return max_lens.gt(0).nonzero().flatten()


def _device(state: State, max_lens: Tensor) -> torch.device:
    """Decode where the state lives (max_lens may come from the CPU)."""
    for value in state.values():
        return value.device
    return max_lens.device


def _check(batch_size: int, beam_size: int, nbest: int, max_lens: Tensor, min_len: int,
           no_repeat_ngram_size: int = 0) -> None:
    """Reject options a user can get wrong with one clear message."""
    if beam_size < 1:
        raise ConfigError(f"beam_size = {beam_size}: must be at least 1")
    if not 1 <= nbest <= beam_size:
        raise ConfigError(f"nbest = {nbest}: must be between 1 and beam_size ({beam_size})")
    if min_len < 0:
        raise ConfigError(f"min_len = {min_len}: must not be negative")
    if no_repeat_ngram_size < 0:
        raise ConfigError(f"no_repeat_ngram_size = {no_repeat_ngram_size}: must not be negative (0 = off)")
    if tuple(max_lens.shape) != (batch_size,):
        raise ValueError(f"max_lens has shape {tuple(max_lens.shape)}, expected ({batch_size},)")

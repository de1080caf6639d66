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

With ``alignment``, each hypothesis also carries the source position every token's step attended to most
(:data:`nlgkit.core.alignment.ALIGNMENT`; ``translate --replace-unk``), tracked like its tokens.

Constraints mask words before ranking, so a constrained beam is the best the model allows under them:
``min_len`` forbids EOS before that many tokens; ``no_repeat_ngram_size`` n forbids any word that would
repeat an n-gram the hypothesis already holds (fairseq's ``--no-repeat-ngram-size``; the BOS is not a
token of it, and EOS never repeats anything, so a hypothesis can always end once ``min_len`` allows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError
from nlgkit.search.constrained import constrained_search
from nlgkit.search.sampling import Sampling, sample_search
from nlgkit.search.steps import (
    Hypothesis,
    Rules,
    aligned_positions,
    one_word_at_a_time,
    prefix_table,
    search_device,
)

if TYPE_CHECKING:
    from nlgkit.models.base import Generator, State


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
    sampling: Sampling | None = None,
    item_ids: Tensor | None = None,
    alignment: bool = False,
    prefixes: Sequence[Sequence[int]] | None = None,
    constraints: Sequence[Sequence[Sequence[int]]] | None = None,
) -> list[list[Hypothesis]]:
    """Beam search, or greedy search when ``beam_size`` is 1 (same result, less work); with ``sampling``,
    ``nbest`` drawn outputs per sentence instead (:mod:`nlgkit.search.sampling`, whose draws ``item_ids`` key;
    ``beam_size`` unused). ``alignment``: each hypothesis with its tokens' source positions. ``prefixes``: word ids
    each sentence's outputs must start with (a target prefix, fairseq's ``--prefix-size``, CTranslate2's
    ``target_prefix``), forced whatever the constraints, their log-probabilities counted in the scores.
    ``constraints``: per sentence, phrases (word ids) each of its outputs must contain
    (:mod:`nlgkit.search.constrained`; not with sampling).

    ``never``: token ids that are not words (padding, BOS) and are never output. A softmax head learns to give
    them no mass, but a score head ranks every row of its table: continuous output against targets extracted
    from a softmax model (whose padding and BOS rows were never trained) would otherwise emit them."""
    rules = Rules(batch_size, bos, eos, max_lens, length_penalty, min_len, no_repeat_ngram_size, never, alignment,
                  prefix_table(prefixes, batch_size, search_device(state, max_lens)))
    if constraints is not None and any(constraints):
        if sampling is not None:
            raise ConfigError("lexical constraints need beam search: not with sampling")
        return constrained_search(model, state, rules, beam_size=beam_size, nbest=nbest, constraints=constraints)
    if sampling is not None:
        return sample_search(model, state, rules, sampling=sampling, samples=nbest, item_ids=item_ids)
    rules.check(beam_size, nbest)
    if beam_size == 1:
        return greedy_search(model, state, rules)
    return beam_search(model, state, rules, beam_size=beam_size, nbest=nbest)


@torch.inference_mode()
def greedy_search(model: Generator, state: State, rules: Rules) -> list[list[Hypothesis]]:
    """Argmax decoding, batched; each sentence stops at its EOS or its max_len and leaves the batch."""
    rules.check()
    return one_word_at_a_time(model, state, lambda scores, _outputs, _step: scores.argmax(dim=1, keepdim=True), rules,
                              copies=1)


@torch.inference_mode()
def beam_search(model: Generator, state: State, rules: Rules, *, beam_size: int,
                nbest: int = 1) -> list[list[Hypothesis]]:
    """Batched beam search; returns per sentence its ``nbest`` best hypotheses, best first. While a sentence is
    inside its prefix (``rules.prefix``) one beam holds it and the others stay at −inf."""
    rules.check(beam_size, nbest)
    k, eos = beam_size, rules.eos
    finished: list[list[Hypothesis]] = [[] for _ in range(rules.batch_size)]
    state, max_lens, active = rules.begin(state, finished)  # (n,) sentence ids still decoding
    device = max_lens.device
    ids = active.tolist()
    n = len(ids)
    beam_range = torch.arange(k, device=device)
    # The first step extends one hypothesis per sentence (the k copies would propose the same words), so
    # it runs on n rows and the state grows to n·k rows after it. A vocabulary smaller than the beam
    # cannot fill k beams from one row: then all k rows run from the start, beams 1… at −inf.
    beams = 1 if model.head.vocab_size >= k else k
    if beams > 1 or len(ids) < rules.batch_size:  # (with one row per sentence and none left out, nothing moves)
        state = model.reorder(state, active.repeat_interleave(beams))  # every tensor (n·beams, …)
    scores = torch.full((n, beams), -math.inf, device=device)  # (n, beams) float32 cumulative log-probs
    scores[:, 0] = 0.0
    tokens = torch.empty(n * beams, 0, dtype=torch.long, device=device)  # (n·beams, t)
    positions = torch.empty(n * beams, 0, dtype=torch.long, device=device)  # (n·beams, t) with alignment
    token_scores = torch.empty(n * beams, 0, device=device)  # (n·beams, t) float32: each step's log-score
    prev = torch.full((n * beams,), rules.bos, dtype=torch.long, device=device)  # (n·beams,)
    step = 0
    while n:
        features, state = model.step(prev, state)  # (n·beams, d)
        looked = aligned_positions(model, state) if rules.alignment else None  # (n·beams,)
        sentences = active.repeat_interleave(beams) if beams > 1 else active  # (n·beams,)
        word_scores, offset = rules.scores(model, features, tokens, sentences, step)  # (n·beams, V), (n·beams,)
        # A sentence's best 2k extensions are among each of its rows' best 2k words: rank those only.
        row_width = min(2 * k, word_scores.size(1))
        row_scores, row_words = word_scores.topk(row_width, dim=1)  # (n·beams, w)
        row_scores = row_scores - offset.unsqueeze(1)  # the head's log-scores of those words
        candidates = (scores.view(-1, 1) + row_scores).view(n, beams * row_width)
        top_scores, top_index = candidates.topk(min(2 * k, beams * row_width), dim=1)  # (n, 2k)
        top_token_scores = row_scores.view(n, beams * row_width).gather(1, top_index)  # (n, 2k)
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
            ended_positions = positions[rows].tolist() if rules.alignment else None
            ended_scores = torch.cat([token_scores[rows], top_token_scores[sent, rank].unsqueeze(1)], dim=1)
            for j, (pos, row, lp, per_token) in enumerate(zip(sent.tolist(), tokens[rows].tolist(),
                                                              top_scores[sent, rank].tolist(), ended_scores.tolist())):
                if len(finished[ids[pos]]) < k:
                    found = ended_positions[j] if ended_positions is not None else None
                    finished[ids[pos]].append(rules.hypothesis(row, lp, step, found, per_token))

        # The first k non-EOS candidates stay active: EOS ones are pushed behind all others.
        width = top_scores.size(1)
        order = torch.arange(width, device=device) + is_eos.long() * width  # (n, 2k)
        keep = order.topk(k, dim=1, largest=False).indices  # (n, k), in rank order
        scores = top_scores.gather(1, keep)  # (n, k)
        keep_rows = top_rows.gather(1, keep).view(-1)  # (n·k,) the row of n·beams each new hypothesis extends
        prev = top_words.gather(1, keep).view(-1)  # (n·k,)
        tokens = torch.cat([tokens[keep_rows], prev.unsqueeze(1)], dim=1)  # (n·k, t+1)
        token_scores = torch.cat([token_scores[keep_rows], top_token_scores.gather(1, keep).view(-1, 1)], dim=1)
        if looked is not None:
            positions = torch.cat([positions[keep_rows], looked[keep_rows].unsqueeze(1)], dim=1)  # (n·k, t+1)

        full = torch.tensor([len(finished[i]) >= k for i in ids], device=device)  # (n,)
        at_limit = max_lens[active].le(step)  # (n,)
        done = full | at_limit
        same_sentences = beams == k  # rows only move among the beams of each sentence (until one leaves)
        beams = k
        if bool(done.any()):
            same_sentences = False
            _finalise_at_limit(finished, ids, at_limit & ~full, tokens, scores, token_scores, step, rules,
                               positions if rules.alignment else None)
            live = (~done).nonzero().flatten()  # (n',)
            live_rows = (live.unsqueeze(1) * k + beam_range).view(-1)  # (n'·k,)
            active, scores = active[live], scores[live]
            keep_rows, tokens, prev = keep_rows[live_rows], tokens[live_rows], prev[live_rows]
            token_scores = token_scores[live_rows]
            positions = positions[live_rows] if rules.alignment else positions
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
    token_scores: Tensor,
    step: int,
    rules: Rules,
    positions: Tensor | None = None,
) -> None:
    """Sentences that reached max_len keep their live active hypotheses as they are, without EOS, with their
    tokens' log-scores ``token_scores`` (n·k, t) (and source positions when ``positions`` (n·k, t) is given)."""
    k = scores.size(1)
    for pos in mask.nonzero().flatten().tolist():
        rows = tokens[pos * k : (pos + 1) * k].tolist()
        per_token = token_scores[pos * k : (pos + 1) * k].tolist()
        aligned = positions[pos * k : (pos + 1) * k].tolist() if positions is not None else [None] * k
        for row, lp, found, row_scores in zip(rows, scores[pos].tolist(), aligned, per_token):
            if math.isfinite(lp):
                finished[ids[pos]].append(rules.hypothesis(row, lp, step, found, row_scores))

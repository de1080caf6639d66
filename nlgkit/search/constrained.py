"""Lexically constrained beam search: every output contains each of its sentence's constraint phrases (word-id
sequences, in any order), as fairseq's ``--constraints`` and Sockeye's do.

This is Post & Vilar's dynamic beam allocation (2018) in the form of Hu et al. (2019): each hypothesis tracks how
many constraint words it has met; candidates are the unconstrained beam's (each sentence's top 2·beam), each
hypothesis's best word, and every word that would advance one of its constraints; they are grouped in *banks* by
words met, and the beam is filled round-robin across the banks (the best of each bank first, the bank with more
met first), so that hypotheses that spend a few steps placing a constraint are not crowded out by ones that do
not. EOS is masked until all of a hypothesis's constraints are met, so every output that ends holds them all; a
sentence that reaches its length limit first returns its live hypotheses, those that met the most first.

A phrase is met once it occurs anywhere in the output as a contiguous run of words: each phrase keeps its own
match (Knuth–Morris–Pratt: a word that does not continue a partial match falls back to the longest part of it that
is still a start of the phrase, so ``a a b`` is met in ``a a a b``), and one word can advance several phrases.
A phrase the search itself could never place (a ``never`` id such as ``<unk>`` under ``no_unk``, or an n-gram twice
under ``no_repeat_ngram_size``) is refused with a ConfigError (:func:`unmeetable`) instead of running to the length
limit; phrases that are each placeable but clash with each other or with the target prefix are not checked up
front: such a sentence runs to its limit, and :func:`missing_phrases` tells its caller what its output lacks.

Search still knows nothing about architectures: it calls ``model.step``, ``model.reorder`` and the head's scores
through :func:`nlgkit.search.steps.step_scores`, as beam search does, with the same length limits, n-gram ban,
target prefixes, alignment and token scores; with no constraint it selects exactly as beam search does.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError
from nlgkit.search.steps import Hypothesis, Rules, aligned_positions

if TYPE_CHECKING:
    from nlgkit.models.base import Generator, State

Phrases = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Progress:
    """How far a hypothesis is into each of its sentence's constraint ``phrases``: ``depths[i]`` words of phrase i
    matched by the hypothesis's last words (its length once met: a met phrase stays met)."""

    phrases: Phrases
    depths: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.depths:  # the start: nothing matched
            object.__setattr__(self, "depths", (0,) * len(self.phrases))

    @property
    def words_met(self) -> int:
        """The hypothesis's bank: the words of the phrases met, plus the deepest partial match (one word that
        advances two phrases is counted once)."""
        met = sum(d for d, phrase in zip(self.depths, self.phrases) if d == len(phrase))
        return met + max((d for d, phrase in zip(self.depths, self.phrases) if d < len(phrase)), default=0)

    @property
    def complete(self) -> bool:
        return all(d == len(phrase) for d, phrase in zip(self.depths, self.phrases))

    def wanted(self) -> set[int]:
        """The words that would advance a constraint: the next word of every phrase not met yet."""
        return {phrase[d] for d, phrase in zip(self.depths, self.phrases) if d < len(phrase)}

    def advance(self, word: int) -> Progress:
        """The progress after ``word``."""
        depths = tuple(d if d == len(phrase) else _next_depth(phrase, d, word)
                       for d, phrase in zip(self.depths, self.phrases))
        return self if depths == self.depths else Progress(self.phrases, depths)


def _next_depth(phrase: tuple[int, ...], depth: int, word: int) -> int:
    """The words of ``phrase`` matched after ``word`` follows a match of ``depth`` words: on a mismatch, fall back
    to the longest proper prefix of the match that is also its suffix (KMP), so an overlapping occurrence counts."""
    fallback = _fallbacks(phrase)
    while depth and phrase[depth] != word:
        depth = fallback[depth - 1]
    return depth + 1 if phrase[depth] == word else 0


@functools.lru_cache(maxsize=4096)
def _fallbacks(phrase: tuple[int, ...]) -> tuple[int, ...]:
    """KMP's failure function: for each i, the length of the longest proper prefix of ``phrase[: i + 1]`` that is
    also its suffix."""
    table = [0] * len(phrase)
    depth = 0
    for i in range(1, len(phrase)):
        while depth and phrase[i] != phrase[depth]:
            depth = table[depth - 1]
        if phrase[i] == phrase[depth]:
            depth += 1
        table[i] = depth
    return tuple(table)


def unmeetable(phrase: Sequence[int], eos: int, never: Collection[int], no_repeat_ngram_size: int,
               show: Callable[[Sequence[int]], str] = lambda words: str(list(words))) -> str | None:
    """Why the search could never output ``phrase`` (None when it could): it holds the end of the output or a word
    the search never outputs, or it repeats an n-gram that ``no_repeat_ngram_size`` forbids (any output holding
    the phrase would hold the repeat). ``show`` writes words in the reason (word ids by default)."""
    if not phrase:
        return "it has no words"
    if eos in phrase:
        return "it holds the end-of-sentence token"
    if banned := [word for word in phrase if word in never]:
        return f"it holds {show(banned[:1])}, which the search never outputs (padding, BOS; <unk> under no_unk)"
    size = no_repeat_ngram_size
    if size > 0:
        seen: set[tuple[int, ...]] = set()
        for start in range(len(phrase) - size + 1):
            gram = tuple(phrase[start : start + size])
            if gram in seen:
                return f"it repeats the {size}-gram {show(gram)}, and no_repeat_ngram_size = {size} forbids that"
            seen.add(gram)
    return None


def missing_phrases(tokens: Sequence[int], phrases: Sequence[Sequence[int]]) -> list[Sequence[int]]:
    """The ``phrases`` that ``tokens`` do not hold as a contiguous run: none for an output the search ended, some
    for one it returned at the length limit (phrases that clash with each other, with the target prefix or with the
    n-gram ban, which :func:`unmeetable` does not check, or that did not fit)."""
    progress = Progress(tuple(tuple(phrase) for phrase in phrases))  # the search's own matching
    for word in tokens:
        progress = progress.advance(word)
    return [phrase for phrase, depth in zip(phrases, progress.depths, strict=True) if depth < len(phrase)]


def phrases_of(constraints: Sequence[Sequence[int]], rules: Rules) -> Phrases:
    """One sentence's constraints as phrases, checked: each one is a phrase the search can output
    (:func:`unmeetable`), or a ConfigError says why not."""
    for phrase in constraints:
        if reason := unmeetable(phrase, rules.eos, rules.never, rules.no_repeat_ngram_size):
            raise ConfigError(f"constraint {list(phrase)} can never be met: {reason}")
    return tuple(tuple(phrase) for phrase in constraints)


def constraint_words(phrases: Sequence[Sequence[int]]) -> int:
    """A sentence's count of constraint words (what its length limit must leave room for)."""
    return sum(len(phrase) for phrase in phrases)


@dataclass
class _Candidate:
    row: int  # the hypothesis (row of n·k) it extends
    word: int
    score: float  # cumulative log-score
    word_score: float  # this word's log-score
    progress: Progress


def _round_robin(candidates: list[_Candidate], count: int) -> list[_Candidate]:
    """Up to ``count`` candidates, the banks taking turns: every bank's best (the bank with more words met
    first), then every bank's second best, …; a bank with fewer candidates leaves its turns to the others."""
    banks: dict[int, list[_Candidate]] = {}
    for candidate in sorted(candidates, key=lambda c: -c.score):
        banks.setdefault(candidate.progress.words_met, []).append(candidate)
    turns = sorted(((rank, -bank, candidate.score, candidate) for bank, members in banks.items()
                    for rank, candidate in enumerate(members)), key=lambda t: t[:3])
    return [turn[3] for turn in turns[:count]]


@torch.inference_mode()
def constrained_search(model: Generator, state: State, rules: Rules, *, beam_size: int,
                       constraints: Sequence[Sequence[Sequence[int]]], nbest: int = 1) -> list[list[Hypothesis]]:
    """Beam search whose outputs contain each sentence's ``constraints`` (phrases of word ids, any order); returns
    per sentence its ``nbest`` best hypotheses: those that met more constraint words first, then the best first."""
    rules.check(beam_size, nbest)
    if len(constraints) != rules.batch_size:
        raise ValueError(f"{len(constraints)} constraint lists for a batch of {rules.batch_size}")
    phrases = [phrases_of(sentence, rules) for sentence in constraints]  # checked before any step
    k, eos = beam_size, rules.eos
    empty: list[list[Hypothesis]] = [[] for _ in range(rules.batch_size)]
    state, max_lens, active = rules.begin(state, empty)  # (n,) sentence ids still decoding
    device = max_lens.device
    finished: list[list[tuple[int, Hypothesis]]] = [[(0, h) for h in hyps] for hyps in empty]  # words met
    ids = active.tolist()
    n = len(ids)
    # As in beam search, the first step runs one row per sentence (its k rows would propose the same words),
    # unless the vocabulary is smaller than the beam; then rows follow their hypotheses, k per sentence.
    beams = 1 if model.head.vocab_size >= k else k
    state = model.reorder(state, active.repeat_interleave(beams))  # (n·beams, …)
    progress = [Progress(phrases[i]) for i in ids for _ in range(beams)]  # per row
    scores = torch.full((n * beams,), -math.inf, device=device)  # (n·beams,) float32 cumulative log-scores
    scores[::beams] = 0.0  # one live hypothesis per sentence at first
    tokens = torch.empty(n * beams, 0, dtype=torch.long, device=device)  # (n·beams, t)
    positions = torch.empty(n * beams, 0, dtype=torch.long, device=device)  # (n·beams, t) with alignment
    token_scores = torch.empty(n * beams, 0, device=device)  # (n·beams, t)
    prev = torch.full((n * beams,), rules.bos, dtype=torch.long, device=device)  # (n·beams,)
    step = 0
    while n:
        features, state = model.step(prev, state)  # (n·beams, d)
        looked = aligned_positions(model, state) if rules.alignment else None  # (n·beams,)
        word_scores, offset = rules.scores(model, features, tokens, active.repeat_interleave(beams), step)
        unmet = [row for row, p in enumerate(progress) if not p.complete]
        if unmet:  # no output ends before it holds every constraint
            word_scores[torch.tensor(unmet, device=device), eos] = -math.inf
        step += 1
        chosen = _choose(word_scores, offset, scores, progress, n, beams, k, eos)
        keep_rows, words, kept_scores, word_kept, kept_progress = [], [], [], [], []
        for pos, (ending, staying) in enumerate(chosen):
            sentence = ids[pos]
            for c in ending:
                if len(finished[sentence]) < k:
                    found = positions[c.row].tolist() if rules.alignment else None
                    finished[sentence].append((c.progress.words_met, rules.hypothesis(
                        tokens[c.row].tolist(), c.score, step, found, [*token_scores[c.row].tolist(), c.word_score])))
            dead = _Candidate(pos * beams, eos, -math.inf, -math.inf, progress[pos * beams])
            for c in staying + [dead] * (k - len(staying)):  # dead slots (−inf) keep the shapes
                keep_rows.append(c.row)
                words.append(c.word)
                kept_scores.append(c.score)
                word_kept.append(c.word_score)
                kept_progress.append(c.progress)
        progress, beams = kept_progress, k
        rows = torch.tensor(keep_rows, device=device)  # (n·k,)
        prev = torch.tensor(words, device=device)
        scores = torch.tensor(kept_scores, device=device)
        tokens = torch.cat([tokens[rows], prev.unsqueeze(1)], dim=1)
        token_scores = torch.cat([token_scores[rows], torch.tensor(word_kept, device=device).unsqueeze(1)], dim=1)
        if looked is not None:
            positions = torch.cat([positions[rows], looked[rows].unsqueeze(1)], dim=1)

        full = [len(finished[i]) >= k for i in ids]
        at_limit = max_lens[active].le(step).tolist()
        for pos in range(n):
            if at_limit[pos] and not full[pos]:
                _keep_at_limit(finished[ids[pos]], pos, k, tokens, scores, token_scores, progress, step, rules,
                               positions if rules.alignment else None)
        live = [pos for pos in range(n) if not (full[pos] or at_limit[pos])]
        if len(live) < n:
            live_rows = [pos * k + j for pos in live for j in range(k)]
            index = torch.tensor(live_rows, dtype=torch.long, device=device)
            active = active[torch.tensor(live, dtype=torch.long, device=device)]
            rows, prev, scores, tokens = rows[index], prev[index], scores[index], tokens[index]
            token_scores = token_scores[index]
            positions = positions[index] if rules.alignment else positions
            progress = [progress[row] for row in live_rows]
            ids = active.tolist()
            n = len(ids)
        if n:
            state = model.reorder(state, rows)
    results = []
    for sentence in finished:
        ranked = sorted(sentence, key=lambda kept: (kept[0], kept[1].score), reverse=True)
        results.append([h for _, h in ranked[:nbest]])
    return results


def _choose(word_scores: Tensor, offset: Tensor, scores: Tensor, progress: list[Progress], n: int, beams: int,
            k: int, eos: int) -> list[tuple[list[_Candidate], list[_Candidate]]]:
    """Per sentence (``beams`` rows each), the EOS candidates that end a hypothesis and the k (or fewer) that
    stay active."""
    row_width = min(2 * k, word_scores.size(1))
    row_scores, row_words = word_scores.topk(row_width, dim=1)  # (n·beams, w)
    row_scores = row_scores - offset.unsqueeze(1)  # the head's log-scores of those words
    totals = (scores.unsqueeze(1) + row_scores).view(n, beams * row_width)
    top_scores, top_index = totals.topk(min(2 * k, beams * row_width), dim=1)  # (n, 2k): the unconstrained beam's
    live = scores.tolist()
    wanted_scores: list[float] = []
    wanted = [(row, word) for row, p in enumerate(progress) if math.isfinite(live[row]) for word in p.wanted()]
    if wanted:  # the words that advance a constraint, at their own scores
        wanted_rows = torch.tensor([row for row, _ in wanted], device=word_scores.device)
        wanted_words = torch.tensor([word for _, word in wanted], device=word_scores.device)
        wanted_scores = (word_scores[wanted_rows, wanted_words] - offset[wanted_rows]).tolist()
    row_scores_list, row_words_list = row_scores[:, 0].tolist(), row_words[:, 0].tolist()
    top_scores_list, top_index_list = top_scores.tolist(), top_index.tolist()
    flat_scores, flat_words = row_scores.tolist(), row_words.tolist()
    by_sentence: list[dict[tuple[int, int], tuple[float, float]]] = [{} for _ in range(n)]
    for pos in range(n):
        for total, index in zip(top_scores_list[pos], top_index_list[pos]):
            row = pos * beams + index // row_width
            by_sentence[pos][(row, flat_words[row][index % row_width])] = (total, flat_scores[row][index % row_width])
        for row in range(pos * beams, (pos + 1) * beams):
            by_sentence[pos].setdefault((row, row_words_list[row]), (live[row] + row_scores_list[row],
                                                                     row_scores_list[row]))
    for (row, word), word_score in zip(wanted, wanted_scores, strict=True):
        by_sentence[row // beams].setdefault((row, word), (live[row] + word_score, word_score))
    chosen = []
    for pos in range(n):
        candidates = [_Candidate(row, word, total, word_score, progress[row].advance(word))
                      for (row, word), (total, word_score) in by_sentence[pos].items() if math.isfinite(total)]
        ending = [c for c in _round_robin(candidates, k) if c.word == eos]
        staying = _round_robin([c for c in candidates if c.word != eos], k)
        chosen.append((ending, staying))
    return chosen


def _keep_at_limit(finished: list[tuple[int, Hypothesis]], pos: int, k: int, tokens: Tensor, scores: Tensor,
                   token_scores: Tensor, progress: list[Progress], step: int, rules: Rules,
                   positions: Tensor | None) -> None:
    """A sentence at its length limit keeps its live hypotheses as they are (no EOS), with their constraint words
    met."""
    for row in range(pos * k, (pos + 1) * k):
        log_prob = float(scores[row])
        if math.isfinite(log_prob):
            found = positions[row].tolist() if positions is not None else None
            finished.append((progress[row].words_met, rules.hypothesis(
                tokens[row].tolist(), log_prob, step, found, token_scores[row].tolist())))

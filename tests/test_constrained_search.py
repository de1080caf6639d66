"""Lexically constrained beam search (nlgkit.search.constrained): every output holds its sentence's phrases, the
scores stay the model's, and without constraints it selects exactly as beam search does."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from test_search import (
    BOS,
    EOS,
    GREEDY_TRAP,
    PAD,
    A,
    B,
    C,
    Script,
    ScriptedModel,
    assert_same,
    decode,
    log,
    run,
    teacher_forced,
    toy_batch,
)

from nlgkit.core.errors import ConfigError
from nlgkit.search import Rules, Sampling, beam_search, search
from nlgkit.search.constrained import Progress, constrained_search, missing_phrases, unmeetable


def contains(tokens: list[int], phrase: list[int]) -> bool:
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens) - len(phrase) + 1))


def test_progress_tracks_phrases_in_any_order_and_drops_a_broken_one() -> None:
    p = Progress(((4, 5), (7,)))
    assert p.wanted() == {4, 7} and p.words_met == 0
    p = p.advance(4)
    assert p.wanted() == {5, 7} and p.words_met == 1  # (7,) is still wanted while (4, 5) is under way
    broken = p.advance(7)  # breaks (4, 5), meets (7,)
    assert broken.words_met == 1 and broken.wanted() == {4} and not broken.complete
    done = p.advance(5).advance(9).advance(7)
    assert done.complete and done.words_met == 3 and done.wanted() == set()


def met(phrases: tuple[tuple[int, ...], ...], words: list[int]) -> Progress:
    p = Progress(phrases)
    for word in words:
        p = p.advance(word)
    return p


@pytest.mark.parametrize(("phrase", "words"), [
    ((4, 4, 5), [4, 4, 4, 5]),  # after "4 4", a third 4 keeps "4 4" (the old tracking restarted at one 4)
    ((4, 5, 4, 6), [4, 5, 4, 5, 4, 6]),  # "4 5 4" broken by 5 falls back to "4 5"
    ((4, 4, 4), [4, 5, 4, 4, 9, 4, 4, 4]),
    ((4, 5), [9, 4, 4, 4, 5, 9]),
])
def test_a_phrase_is_met_wherever_it_occurs_overlaps_included(phrase: tuple[int, ...], words: list[int]) -> None:
    assert contains(words, list(phrase))
    assert met((phrase,), words).complete
    for end in range(len(words)):  # not before its last word arrives
        assert met((phrase,), words[:end]).complete == contains(words[:end], list(phrase))
        # what a caller is told an output lacks agrees with what the search tracked
        assert missing_phrases(words[:end], [phrase]) == ([] if contains(words[:end], list(phrase)) else [phrase])


def test_phrases_sharing_a_first_word_are_tracked_apart() -> None:
    """``4 6`` is met although ``4`` also starts ``4 5`` (the old tracking followed the first phrase only), and one
    word may meet two phrases at once."""
    assert met(((4, 5), (4, 6)), [4, 6]).depths == (0, 2)
    both = met(((4, 5), (5, 6)), [4, 5, 6])
    assert both.complete and both.words_met == 4


# The model says A A A B; the phrase "A A B" lies inside it, overlapping the run of As.
OVERLAP: Script = {(): {A: 1.0}, (A,): {A: 1.0}, (A, A): {A: 0.9, B: 0.1}, (A, A, A): {B: 1.0},
                   (A, A, A, B): {EOS: 1.0}, (A, A, B): {EOS: 1.0}}


@pytest.mark.parametrize("beam", [2, 3])
def test_an_overlapping_occurrence_meets_the_phrase(beam: int) -> None:
    """The old tracking did not see "A A B" in "A A A B", masked its EOS and returned A A B (0.1) instead. (A beam
    of 1 takes A A B by design: after "A A", B meets the phrase and the fuller bank goes first.)"""
    best = run([OVERLAP], beam, [10], constraints=[[[A, A, B]]])[0][0]
    assert best.tokens == [A, A, A, B] and best.log_prob == pytest.approx(log(0.9), abs=1e-5)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("beam", [2, 5])
def test_without_constraints_it_is_beam_search(seed: int, beam: int) -> None:
    model, src, max_lens = toy_batch(seed)
    plain = decode(model, src, max_lens, beam=beam, nbest=beam, run=beam_search, no_repeat_ngram_size=2)
    none = decode(model, src, max_lens, beam=beam, nbest=beam, run=constrained_search,
                  constraints=[[] for _ in src], no_repeat_ngram_size=2)
    assert_same(none, plain)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("beam", [1, 4])
def test_every_output_holds_its_phrases_and_scores_them(seed: int, beam: int) -> None:
    """Phrases the model would not choose (one sentence without any): the best output holds each of its sentence's
    phrases (and every output that does comes first), its log-probability is the model's, and the batch equals each sentence alone."""
    model, src, _ = toy_batch(seed)
    max_lens = torch.full((len(src),), 12)
    constraints = [[[7, 8]], [], [[9], [4, 10]], [[11, 11]], [[5], [6], [4]], [[10, 9, 8]]]
    options: dict[str, Any] = {"beam": beam, "nbest": beam, "constraints": constraints}
    batched = decode(model, src, max_lens, **options)
    free = decode(model, src, max_lens, beam=beam, nbest=beam)
    assert sum(all(contains(hyps[0].tokens, phrase) for phrase in phrases)
               for hyps, phrases in zip(free, constraints, strict=True)) <= 2  # the phrases are not the model's
    for i, hyps in enumerate(batched):
        held = [all(contains(hyp.tokens, phrase) for phrase in constraints[i]) for hyp in hyps]
        assert held[0] and held == sorted(held, reverse=True)  # n-best past the complete ones: unended, met fewer
        for hyp in hyps:
            ended = len(hyp.tokens) < 12  # (a toy GRU may ramble to its length limit)
            assert hyp.log_prob == pytest.approx(teacher_forced(model, src[i : i + 1], hyp.tokens, ended), abs=1e-4)
        alone = decode(model, src[i : i + 1], max_lens[i : i + 1], **{**options, "constraints": [constraints[i]]})
        assert_same(alone, [hyps])
        if not constraints[i]:
            assert_same([hyps], [free[i]])


def test_a_wider_beam_finds_the_better_constrained_output() -> None:
    """The greedy trap: A is the better first word, but with C required, B·C·… loses to A·C: the beam places the
    constraint where the model likes it, and a wider beam scores no worse."""
    found = {beam: run([GREEDY_TRAP], beam, [4], constraints=[[[C]]], nbest=1)[0][0] for beam in (1, 2, 3)}
    assert found[3].tokens == [A, C] and found[3].log_prob == pytest.approx(float(torch.tensor([0.6 * 0.2]).log()))
    assert found[1].log_prob <= found[2].log_prob <= found[3].log_prob


def test_too_short_a_limit_keeps_the_hypotheses_that_met_most() -> None:
    """Room for one word only: no output can hold both phrases, so the best live ones come back unended, those
    holding a phrase first."""
    model, src, _ = toy_batch(0, batch=1)
    hyps = decode(model, src, torch.tensor([1]), beam=3, nbest=3, constraints=[[[7], [8]]])[0]
    assert hyps and hyps[0].tokens in ([7], [8]) and all(len(h.tokens) == 1 for h in hyps)
    assert missing_phrases(hyps[0].tokens, [[7], [8]]) == [[8] if hyps[0].tokens == [7] else [7]]


def test_constraints_after_a_prefix() -> None:
    model, src, _ = toy_batch(1)
    max_lens = torch.full((len(src),), 10)
    state = model.encode(src)
    rules = Rules(batch_size=len(src), bos=BOS, eos=EOS, max_lens=max_lens, prefix=torch.tensor([[5, 6]] * len(src)))
    found = constrained_search(model, state, rules, beam_size=3, constraints=[[[9, 9]]] * len(src), nbest=3)
    for hyps in found:
        assert contains(hyps[0].tokens, [9, 9]) and all(h.tokens[:2] == [5, 6] for h in hyps)


def test_bad_constraints_are_refused() -> None:
    model, src, max_lens = toy_batch(0, batch=1)
    state = model.encode(src)
    common = {"batch_size": 1, "bos": BOS, "eos": EOS, "beam_size": 2, "max_lens": max_lens}
    with pytest.raises(ConfigError, match="no words"):
        search(model, state, constraints=[[[]]], **common)
    with pytest.raises(ConfigError, match="end-of-sentence"):
        search(model, state, constraints=[[[4, EOS]]], **common)
    with pytest.raises(ConfigError, match="not with sampling"):
        search(model, state, constraints=[[[4]]], sampling=Sampling(), **common)


@pytest.mark.parametrize(("options", "phrase", "reason"), [
    ({"never": (PAD, BOS, C)}, [A, C], "holds \\[5\\], which the search never outputs"),  # <unk> under no_unk
    ({"never": (PAD, BOS)}, [A, BOS], "holds \\[1\\]"),
    ({"no_repeat_ngram_size": 2}, [A, B, A, B], r"repeats the 2-gram \[3, 4\], and no_repeat_ngram_size = 2 forbids that"),
    ({"no_repeat_ngram_size": 1}, [A, B, A], r"repeats the 1-gram \[3\]"),
])
def test_a_phrase_the_search_can_never_place_is_refused_up_front(options: dict[str, Any], phrase: list[int],
                                                                  reason: str) -> None:
    """The old search ran such a sentence to its limit and returned nothing at all (every hypothesis kept
    wanting a word it could not take); now it is refused before any step, naming the phrase."""
    model = ScriptedModel([OVERLAP, OVERLAP])
    with pytest.raises(ConfigError, match=rf"constraint {re.escape(str(phrase))} can never be met: it {reason}"):
        decode(model, torch.arange(2), [10, 10], 2, constraints=[[[B]], [[A], phrase]], **options)
    assert model.batch_sizes == []  # not one step taken


def test_a_phrase_that_overlaps_itself_is_not_a_repeat() -> None:
    assert unmeetable([A, A, A], EOS, (PAD, BOS), 3) is None
    assert unmeetable([A, A, A], EOS, (PAD, BOS), 2) is not None  # "A A" twice

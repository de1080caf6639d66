"""Lexically constrained beam search (nlgkit.search.constrained): every output holds its sentence's phrases, the
scores stay the model's, and without constraints it selects exactly as beam search does."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_search import BOS, EOS, GREEDY_TRAP, A, C, assert_same, decode, run, teacher_forced, toy_batch

from nlgkit.core.errors import ConfigError
from nlgkit.search import Rules, Sampling, beam_search, search
from nlgkit.search.constrained import Progress, constrained_search


def contains(tokens: list[int], phrase: list[int]) -> bool:
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens) - len(phrase) + 1))


def test_progress_tracks_phrases_in_any_order_and_drops_a_broken_one() -> None:
    p = Progress(((4, 5), (7,)))
    assert p.wanted() == {4, 7} and p.words_met == 0
    p = p.advance(4)
    assert p.wanted() == {5} and p.words_met == 1
    broken = p.advance(7)  # breaks (4, 5), meets (7,)
    assert broken.words_met == 1 and broken.wanted() == {4} and not broken.complete
    done = p.advance(5).advance(9).advance(7)
    assert done.complete and done.words_met == 3 and done.wanted() == set()


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

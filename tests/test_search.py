"""Beam and greedy search: scripted probabilities with hand-derived beams, then equivalences on a toy GRU.

The scripted model (after fairseq's sequence_generator tests) looks its next-token probabilities up by
(sentence, prefix), where the prefix is what the *state* has accumulated: if a state row did not follow
its hypothesis, the lookup would use the wrong prefix and the expected beams below would not come out.
Unlisted prefixes put all mass on EOS.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.heads.base import HeadContext, OutputHead
from nlgkit.models.base import Generator, State
from nlgkit.search import Hypothesis, Rules, Sampling, beam_search, greedy_search, search

PAD, BOS, EOS, A, B, C = range(6)
VOCAB = 6
Script = dict[tuple[int, ...], dict[int, float]]

# Greedy takes A (.6) but every continuation of A is worse than B·B (.4 × .9 = .36 > .6 × .5 = .30).
GREEDY_TRAP: Script = {(): {A: 0.6, B: 0.4}, (A,): {A: 0.5, EOS: 0.3, C: 0.2}, (B,): {B: 0.9, EOS: 0.1}}
# [A]+EOS has the higher total (.33 > .22) but [A, C]+EOS the higher per-token average.
LENGTH: Script = {
    (): {A: 0.55, B: 0.45},
    (A,): {EOS: 0.6, C: 0.4},
    (B,): {B: 0.95, EOS: 0.05},
    (B, B): {B: 0.95, EOS: 0.05},
}
EOS_FIRST: Script = {(): {EOS: 0.7, A: 0.3}}
# Padding and BOS outscore every word (as a score head's untrained table rows can).
NOT_WORDS: Script = {(): {PAD: 0.4, BOS: 0.3, A: 0.2, B: 0.1}, (A,): {EOS: 1.0}, (B,): {EOS: 1.0}}
log = math.log


class TableHead(OutputHead):
    """Features are one-hot row numbers of a fixed log-probability table (rows, V)."""

    def __init__(self, table: Tensor) -> None:
        super().__init__(HeadContext(table.size(0), VOCAB, PAD, nn.Embedding(VOCAB, 1)))
        self.register_buffer("table", table)

    def log_probs(self, features: Tensor) -> Tensor:
        return self.table[features.argmax(-1)]  # (B, V)


class ScriptedModel(Generator):
    """Next-token distributions scripted per (sentence, prefix); records the batch size of every step."""

    def __init__(self, scripts: list[Script]) -> None:
        super().__init__()
        rows = [[1.0 if v == EOS else 0.0 for v in range(VOCAB)]]  # row 0: unlisted prefixes end
        self.rows: dict[tuple[int, tuple[int, ...]], int] = {}
        for sentence, script in enumerate(scripts):
            for prefix, probs in script.items():
                self.rows[sentence, prefix] = len(rows)
                rows.append([probs.get(v, 0.0) for v in range(VOCAB)])
        self.head = TableHead(torch.tensor(rows).log())
        self.feature_dim = len(rows)
        self.batch_sizes: list[int] = []

    def encode(self, sentences: Tensor) -> State:
        return {"sentence": sentences, "prefix": torch.empty(len(sentences), 0, dtype=torch.long)}

    def log_prob(self, sentence: int, prefix: list[int], word: int) -> float:
        """The script's log-probability of ``word`` after ``prefix`` in ``sentence``."""
        return float(self.head.table[self.rows.get((sentence, tuple(prefix)), 0), word])

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        self.batch_sizes.append(len(prev_tokens))
        prefix = torch.cat([state["prefix"], prev_tokens.unsqueeze(1)], dim=1)  # (B, t+1), BOS first
        rows = [
            self.rows.get((s, tuple(p[1:])), 0) for s, p in zip(state["sentence"].tolist(), prefix.tolist())
        ]
        features = F.one_hot(torch.tensor(rows), self.feature_dim).float()  # (B, rows)
        return features, {"sentence": state["sentence"], "prefix": prefix}


def decode(
    model: Generator,
    inputs: Tensor,
    max_lens: Sequence[int] | Tensor,
    beam: int,
    run: Any = search,
    **options: Any,
) -> list[list[Hypothesis]]:
    """Encode ``inputs`` and decode them as one batch with ``run`` (search, beam_search); every hypothesis's
    token scores are checked: they sum to its log-probability and, for a scripted model, each is the script's
    log-probability of that token after the hypothesis's own prefix (the EOS's last when it ended with one)."""
    state = model.encode(inputs)
    max_lens = torch.as_tensor(max_lens)
    if run is search:
        found = run(model, state, batch_size=len(inputs), bos=BOS, eos=EOS, beam_size=beam, max_lens=max_lens,
                    **options)
    else:  # one strategy: the rules apart from its own options
        rule_names = {f.name for f in dataclasses.fields(Rules)}
        rules = Rules(batch_size=len(inputs), bos=BOS, eos=EOS, max_lens=max_lens,
                      **{name: value for name, value in options.items() if name in rule_names})
        own = {name: value for name, value in options.items() if name not in rule_names}
        found = run(model, state, rules, beam_size=beam, **own)
    for sentence, hyps in enumerate(found):
        for h in hyps:
            assert h.token_scores is not None and len(h.token_scores) in (len(h.tokens), len(h.tokens) + 1)
            assert sum(h.token_scores) == pytest.approx(h.log_prob, abs=1e-4)
            if isinstance(model, ScriptedModel) and math.isfinite(h.log_prob):  # (−inf: a masked word was forced)
                words = h.tokens + [EOS] * (len(h.token_scores) - len(h.tokens))
                expected = [model.log_prob(int(inputs[sentence]), words[:t], word) for t, word in enumerate(words)]
                assert h.token_scores == pytest.approx(expected, abs=1e-5), (h, expected)
    return found


def run(scripts: list[Script], beam: int, max_lens: list[int], **options: Any) -> list[list[Hypothesis]]:
    return decode(ScriptedModel(scripts), torch.arange(len(scripts)), max_lens, beam, **options)


def outputs(hyps: list[Hypothesis]) -> list[tuple[list[int], float]]:
    return [(h.tokens, pytest.approx(h.log_prob, abs=1e-5)) for h in hyps]


def test_greedy_and_beam_differ() -> None:
    assert outputs(run([GREEDY_TRAP], 1, [10])[0]) == [([A, A], log(0.30))]
    beam = run([GREEDY_TRAP], 2, [10], nbest=2, length_penalty=0.0)[0]
    assert outputs(beam) == [([B, B], log(0.36)), ([A, A], log(0.30))]


def test_eos_candidate_finishes_and_its_slot_is_refilled() -> None:
    # Beam 3, step 2: A+EOS (.18) ranks 3rd → finished; the slots go to B·B, A·A, A·C (.12). Step 3 ends
    # all three, but only two more fit (3 finished per sentence), so A·C never makes it.
    hyps = run([GREEDY_TRAP], 3, [10], nbest=3, length_penalty=1.0)[0]
    assert outputs(hyps) == [([B, B], log(0.36)), ([A, A], log(0.30)), ([A], log(0.18))]
    assert [h.score for h in hyps] == pytest.approx([log(0.36) / 3, log(0.30) / 3, log(0.18) / 2])


def test_length_normalisation_changes_the_winner() -> None:
    raw = run([LENGTH], 2, [10], nbest=2, length_penalty=0.0)[0]
    assert outputs(raw) == [([A], log(0.33)), ([A, C], log(0.22))]
    normalised = run([LENGTH], 2, [10], nbest=2, length_penalty=1.0)[0]
    assert outputs(normalised) == [([A, C], log(0.22)), ([A], log(0.33))]
    assert [h.score for h in normalised] == pytest.approx([log(0.22) / 3, log(0.33) / 2])
    assert outputs(run([LENGTH], 2, [10], nbest=1, length_penalty=1.0)[0]) == [([A, C], log(0.22))]


def test_max_len_truncates_without_eos() -> None:
    # One step: both live hypotheses are kept as they are, length 1.
    assert outputs(run([LENGTH], 2, [1], nbest=2)[0]) == [([A], log(0.55)), ([B], log(0.45))]
    # Two steps: [A]+EOS finished at step 2; B·B (.4275, no EOS) beats it per token, A·C is third.
    hyps = run([LENGTH], 2, [2], nbest=2, length_penalty=1.0)[0]
    assert outputs(hyps) == [([B, B], log(0.4275)), ([A], log(0.33))]
    assert [h.score for h in hyps] == pytest.approx([log(0.4275) / 2, log(0.33) / 2])
    assert outputs(run([LENGTH], 1, [1])[0]) == [([A], log(0.55))]
    assert run([LENGTH], 2, [0])[0] == [Hypothesis([], 0.0, 0.0, token_scores=[])]


@pytest.mark.parametrize("strategy", ["greedy", "beam", "constrained", "sampling"])
def test_every_strategy_gives_a_max_len_0_sentence_its_empty_output_and_decodes_the_rest(strategy: str) -> None:
    """The rules start every strategy the same way: a sentence with no room gets the empty output, without a step,
    and the batch's other sentences decode as they would alone."""
    from nlgkit.search.constrained import constrained_search
    from nlgkit.search.sampling import sample_search

    model = ScriptedModel([GREEDY_TRAP, LENGTH, GREEDY_TRAP])
    rules = Rules(batch_size=3, bos=BOS, eos=EOS, max_lens=torch.tensor([10, 0, 10]))
    found = {
        "greedy": lambda: greedy_search(model, model.encode(torch.arange(3)), rules),
        "beam": lambda: beam_search(model, model.encode(torch.arange(3)), rules, beam_size=2),
        "constrained": lambda: constrained_search(model, model.encode(torch.arange(3)), rules, beam_size=2,
                                                  constraints=[[[A]], [[C]], [[A]]]),
        "sampling": lambda: sample_search(model, model.encode(torch.arange(3)), rules, sampling=Sampling(seed=1)),
    }[strategy]()
    assert found[1] == [Hypothesis([], 0.0, 0.0, token_scores=[])]
    assert model.batch_sizes[0] == 2  # sentence 1 never took a step
    for i in (0, 2):
        assert len(found[i]) == 1 and found[i][0].tokens and found[i][0].tokens[0] in (A, B)
    if strategy != "sampling":  # (draws are keyed by the sentence's place, so two copies may draw apart)
        assert found[0][0].tokens == found[2][0].tokens  # the same script decodes the same


def test_min_len_forbids_early_eos() -> None:
    hyps = run([LENGTH], 2, [10], nbest=2, length_penalty=0.0, min_len=2)[0]
    assert outputs(hyps) == [([B, B, B], log(0.45 * 0.95 * 0.95)), ([A, C], log(0.22))]
    assert outputs(run([LENGTH], 1, [10], min_len=2)[0]) == [([A, C], log(0.22))]


# Greedy says A B A B: the second "A B" repeats a bigram, the second A a word.
REPEAT: Script = {(): {A: 0.6, B: 0.4}, (A,): {B: 0.7, EOS: 0.3}, (A, B): {A: 0.8, EOS: 0.2},
                  (A, B, A): {B: 0.9, EOS: 0.1}}


@pytest.mark.parametrize(("size", "expected"), [
    (0, ([A, B, A, B], log(0.6 * 0.7 * 0.8 * 0.9))),
    (3, ([A, B, A, B], log(0.6 * 0.7 * 0.8 * 0.9))),  # "B A B" is a new trigram
    (2, ([A, B, A], log(0.6 * 0.7 * 0.8 * 0.1))),  # B after "… A" would repeat "A B": EOS instead
    (1, ([A, B], log(0.6 * 0.7 * 0.2))),  # A again would repeat the word A
])
def test_no_repeat_ngram_size_bans_the_word_that_would_repeat_an_ngram(size: int, expected: tuple) -> None:
    assert outputs(run([REPEAT], 1, [10], no_repeat_ngram_size=size)[0]) == [expected]


@pytest.mark.parametrize("beam", [1, 2])
def test_never_ids_are_not_output(beam: int) -> None:
    assert run([NOT_WORDS], beam, [10])[0][0].tokens == [PAD]  # unmasked, the highest score wins
    hyps = run([NOT_WORDS], beam, [10], nbest=beam, length_penalty=0.0, never=(PAD, BOS))[0]
    assert outputs(hyps) == [([A], log(0.2)), ([B], log(0.1))][:beam]


def test_eos_at_the_first_step_gives_an_empty_output() -> None:
    hyps = run([EOS_FIRST], 2, [10], nbest=2, length_penalty=1.0)[0]
    assert outputs(hyps) == [([], log(0.7)), ([A], log(0.3))]
    assert [h.score for h in hyps] == pytest.approx([log(0.7), log(0.3) / 2])


def test_scripted_batch_equals_one_at_a_time_and_drops_finished_sentences() -> None:
    scripts, max_lens = [GREEDY_TRAP, LENGTH, EOS_FIRST], [10, 2, 10]
    model = ScriptedModel(scripts)
    together = decode(model, torch.arange(3), max_lens, 2, beam_search, nbest=2)
    for i in range(3):
        alone = ScriptedModel([{}] * i + [scripts[i]])  # same sentence id, so the same script
        assert together[i] == decode(alone, torch.tensor([i]), [max_lens[i]], 2, beam_search, nbest=2)[0]
    # The first step extends one hypothesis per sentence (3 rows), then 2 beams each; LENGTH stops at its
    # max_len and EOS_FIRST with 2 finished after step 2: step 3 runs GREEDY_TRAP only.
    assert model.batch_sizes == [3, 6, 2]


def test_greedy_drops_finished_sentences() -> None:
    model = ScriptedModel([GREEDY_TRAP, EOS_FIRST, LENGTH])
    state = model.encode(torch.arange(3))
    hyps = greedy_search(model, state, Rules(batch_size=3, bos=BOS, eos=EOS, max_lens=torch.tensor([10, 10, 1])))
    assert [outputs(h) for h in hyps] == [[([A, A], log(0.3))], [([], log(0.7))], [([A], log(0.55))]]
    assert model.batch_sizes == [3, 1, 1]


def test_invalid_options() -> None:
    with pytest.raises(ConfigError, match="nbest"):
        run([LENGTH], 2, [5], nbest=3)
    with pytest.raises(ConfigError, match="beam_size"):
        run([LENGTH], 0, [5])
    with pytest.raises(ConfigError, match="no_repeat_ngram_size = -1"):
        run([LENGTH], 2, [5], no_repeat_ngram_size=-1)


# --- A small real-ish model: GRU decoder with dot attention over a 3-D memory, random weights. ---


class LinearHead(OutputHead):
    def __init__(self, context: HeadContext) -> None:
        super().__init__(context)
        self.proj = nn.Linear(context.feature_dim, context.vocab_size)

    def logits(self, features: Tensor) -> Tensor:
        return self.proj(features)


class ToyGRU(Generator):
    """Random GRU decoder; the state has a 2-D hidden and a 3-D memory, both reordered by search."""

    def __init__(self, seed: int, vocab: int = 12, dim: int = 16) -> None:
        super().__init__()
        with torch.random.fork_rng():  # seeded weights without touching the global generator
            torch.manual_seed(seed)
            self.embed = nn.Embedding(vocab, dim)
            self.cell = nn.GRUCell(2 * dim, dim)
            self.head = LinearHead(HeadContext(dim, vocab, PAD, self.embed))
        self.feature_dim = dim
        with torch.no_grad():
            self.head.proj.weight.mul_(3.0)  # peaked distributions: fewer near-ties
            self.head.proj.bias[EOS] += 1.0  # outputs of varied lengths, some ending before max_len
        self.double()  # batched and single matmuls then agree far below float32 resolution

    def encode(self, src: Tensor) -> State:
        memory = self.embed(src)  # (B, S, d)
        return {"hidden": memory.mean(1).tanh(), "memory": memory}

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        hidden, memory = state["hidden"], state["memory"]
        weights = torch.softmax((memory @ hidden.unsqueeze(2)).squeeze(2), dim=1)  # (B, S)
        context = (weights.unsqueeze(2) * memory).sum(1)  # (B, d)
        hidden = self.cell(torch.cat([self.embed(prev_tokens), context], dim=1), hidden)  # (B, d)
        return hidden + context, {"hidden": hidden, "memory": memory}


def toy_batch(seed: int, batch: int = 6) -> tuple[ToyGRU, Tensor, Tensor]:
    model = ToyGRU(seed)
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 12, (batch, 5), generator=generator)  # (B, S)
    max_lens = torch.randint(1, 12, (batch,), generator=generator)  # (B,)
    return model, src, max_lens


def assert_same(got: list[list[Hypothesis]], expected: list[list[Hypothesis]]) -> None:
    assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in expected]
    for hyps, other in zip(got, expected):
        for h, o in zip(hyps, other):
            assert h.score == pytest.approx(o.score, abs=1e-5)
            assert h.log_prob == pytest.approx(o.log_prob, abs=1e-5)


@pytest.mark.parametrize("seed", range(5))
def test_beam_one_equals_greedy(seed: int) -> None:
    model, src, max_lens = toy_batch(seed)
    rules = Rules(batch_size=len(src), bos=BOS, eos=EOS, max_lens=max_lens)
    greedy = greedy_search(model, model.encode(src), rules)
    assert_same(decode(model, src, max_lens, 1, beam_search), greedy)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("beam", [1, 4])
def test_batched_equals_one_at_a_time(seed: int, beam: int) -> None:
    model, src, max_lens = toy_batch(seed)
    batched = decode(model, src, max_lens, beam=beam, nbest=beam)
    single = [
        decode(model, src[i : i + 1], max_lens[i : i + 1], beam=beam, nbest=beam)[0] for i in range(len(src))
    ]
    assert_same(batched, single)


@pytest.mark.parametrize("seed", range(3))
def test_state_rows_follow_their_hypotheses(seed: int) -> None:
    """Rescoring each output by teacher forcing, sentence by sentence, gives the search's own log-prob."""
    model, src, max_lens = toy_batch(seed)
    results = decode(model, src, max_lens, beam=4, nbest=4)
    lengths = set()
    for i, hyps in enumerate(results):
        assert len(hyps) == 4 and len({tuple(h.tokens) for h in hyps}) == 4  # no duplicates
        for hyp in hyps:
            ended = len(hyp.tokens) < int(max_lens[i])  # shorter than max_len only by choosing EOS
            assert hyp.log_prob == pytest.approx(teacher_forced(model, src[i : i + 1], hyp.tokens, ended), abs=1e-4)
            lengths.add((len(hyp.tokens), ended))
    assert any(ended for _, ended in lengths) and not all(ended for _, ended in lengths)


# --- target prefixes -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
def test_a_prefix_the_search_would_choose_anyway_changes_nothing(seed: int) -> None:
    model, src, max_lens = toy_batch(seed)
    free = decode(model, src, max_lens, beam=1)
    prefixes = [hyps[0].tokens[:2] for hyps in free]  # greedy's own first words (some outputs are shorter)
    assert_same(decode(model, src, max_lens, beam=1, prefixes=prefixes), free)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("beam", [1, 4])
def test_every_output_starts_with_its_prefix_and_scores_it(seed: int, beam: int) -> None:
    """Forced words the model would not choose (one sentence without a prefix): every hypothesis starts with its
    sentence's prefix, its log-probability is the model's for all its tokens (prefix included), and the batch
    equals each sentence alone; a prefix is forced even against the n-gram ban."""
    model, src, max_lens = toy_batch(seed)
    max_lens = max_lens.clamp(min=4)
    prefixes = [[7, 7], [], [9], [4, 10, 4], [11], [5, 6]]
    batched = decode(model, src, max_lens, beam=beam, nbest=beam, prefixes=prefixes, no_repeat_ngram_size=1)
    for i, hyps in enumerate(batched):
        assert len(hyps) == beam
        for hyp in hyps:
            assert hyp.tokens[: len(prefixes[i])] == prefixes[i]
            assert len(set(hyp.tokens[len(prefixes[i]):])) == len(hyp.tokens[len(prefixes[i]):])  # ban after it
            ended = len(hyp.tokens) < int(max_lens[i])
            assert hyp.log_prob == pytest.approx(teacher_forced(model, src[i : i + 1], hyp.tokens, ended), abs=1e-4)
        alone = decode(model, src[i : i + 1], max_lens[i : i + 1], beam=beam, nbest=beam, prefixes=[prefixes[i]],
                       no_repeat_ngram_size=1)
        assert_same(alone, [hyps])
    assert batched != decode(model, src, max_lens, beam=beam, nbest=beam, no_repeat_ngram_size=1)


def test_samples_start_with_their_prefix() -> None:
    hyps = sample([GREEDY_TRAP], 200, prefixes=[[B]])[0]
    assert {tuple(h.tokens) for h in hyps} == {(B, B), (B,)}  # only B's continuations, in their proportions
    assert 0.8 < sum(h.tokens == [B, B] for h in hyps) / len(hyps) < 0.99  # 0.9 given B
    assert all(h.log_prob == pytest.approx(log(0.4) + log(0.9 if len(h.tokens) == 2 else 0.1)) for h in hyps)


def teacher_forced(model: Generator, src: Tensor, tokens: list[int], ended: bool) -> float:
    """The log-probability of ``tokens`` (+ EOS when ``ended``) for one source, step by step."""
    state, prev, total = model.encode(src), torch.tensor([BOS]), 0.0
    with torch.no_grad():
        for target in tokens + ([EOS] if ended else []):
            features, state = model.step(prev, state)
            total += float(model.head.log_probs(features)[0, target])
            prev = torch.tensor([target])
    return total


# --- sampling ------------------------------------------------------------------------------------------------

def sample(scripts: list[Script], count: int, max_lens: list[int] | None = None, **options: Any
           ) -> list[list[Hypothesis]]:
    knobs = {key: options.pop(key) for key in ("topk", "topp", "temperature", "seed") if key in options}
    return run(scripts, 1, max_lens or [10] * len(scripts), nbest=count, sampling=Sampling(**knobs), **options)


def shares(hyps: list[Hypothesis]) -> dict[tuple[int, ...], float]:
    counts: dict[tuple[int, ...], int] = {}
    for h in hyps:
        counts[tuple(h.tokens)] = counts.get(tuple(h.tokens), 0) + 1
    return {tokens: n / len(hyps) for tokens, n in counts.items()}


def test_samples_follow_the_model_and_carry_its_log_probabilities() -> None:
    """GREEDY_TRAP's five outputs in their proportions (4,000 draws: 3 standard errors are < 0.023), each with
    the exact log-probability of its path; best first."""
    hyps = sample([GREEDY_TRAP], 4000)[0]
    expected = {(A, A): 0.30, (A,): 0.18, (A, C): 0.12, (B, B): 0.36, (B,): 0.04}
    found = shares(hyps)
    assert set(found) == set(expected)
    assert all(abs(found[tokens] - p) < 0.023 for tokens, p in expected.items()), found
    assert all(h.log_prob == pytest.approx(log(expected[tuple(h.tokens)]), abs=1e-5) for h in hyps)
    assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_temperature_flattens_and_topk_topp_restrict() -> None:
    hot = shares(sample([GREEDY_TRAP], 4000, temperature=2.0)[0])
    p_a = 0.6**0.5 / (0.6**0.5 + 0.4**0.5)  # 0.551: the first word's distribution at T = 2 (0.6 at T = 1)
    assert abs(sum(p for tokens, p in hot.items() if tokens[0] == A) - p_a) < 0.025
    for knobs in ({"topk": 1}, {"topp": 0.5}, {"temperature": 0.01}):  # all three leave greedy's path
        assert shares(sample([GREEDY_TRAP], 200, **knobs)[0]) == {(A, A): 1.0}, knobs
    top2 = shares(sample([GREEDY_TRAP], 400, topk=2)[0])  # after A: A or EOS, never C
    assert set(top2) == {(A, A), (A,), (B, B), (B,)}
    # topp 0.7: A (.6) alone falls short, so B joins; after A, A (.5) and EOS (.3) reach it, C does not; after
    # B, B (.9) alone does
    assert set(shares(sample([GREEDY_TRAP], 400, topp=0.7)[0])) == {(A, A), (A,), (B, B)}


def test_samples_are_deterministic_by_seed() -> None:
    same = [[h.tokens for h in sample([GREEDY_TRAP, LENGTH], 50, seed=7)[i]] for i in range(2)]
    again = [[h.tokens for h in sample([GREEDY_TRAP, LENGTH], 50, seed=7)[i]] for i in range(2)]
    other = [[h.tokens for h in sample([GREEDY_TRAP, LENGTH], 50, seed=8)[i]] for i in range(2)]
    assert same == again and same != other


def test_an_items_samples_do_not_depend_on_its_batch() -> None:
    """Counter-based draws: a sentence sampled alone (with its item id) or beside another gives the same samples,
    and the first k of n samples are the samples of nbest k."""
    model = ScriptedModel([GREEDY_TRAP, LENGTH])
    together = decode(model, torch.arange(2), [10, 10], 1, nbest=30, sampling=Sampling(seed=3))
    alone = [decode(model, torch.tensor([i]), [10], 1, nbest=30, sampling=Sampling(seed=3),
                    item_ids=torch.tensor([i]))[0] for i in (1, 0)]
    swapped = decode(model, torch.tensor([1, 0]), [10, 10], 1, nbest=30, sampling=Sampling(seed=3),
                     item_ids=torch.tensor([1, 0]))
    tokens = [[h.tokens for h in hyps] for hyps in together]
    assert [[h.tokens for h in hyps] for hyps in alone] == tokens[::-1] == [[h.tokens for h in hyps] for hyps in swapped]
    fewer = decode(model, torch.arange(2), [10, 10], 1, nbest=10, sampling=Sampling(seed=3))
    for few, many in zip(fewer, together):
        assert not Counter(tuple(h.tokens) for h in few) - Counter(tuple(h.tokens) for h in many)


def test_the_counter_based_uniforms_are_uniform() -> None:
    from nlgkit.search.sampling import uniforms

    draws = torch.cat([uniforms(seed, torch.arange(1000), torch.full((1000,), copy), step)
                       for seed in (0, 1) for copy in (0, 7) for step in (0, 1, 2, 40)])  # 16,000
    assert bool(((draws > 0) & (draws < 1)).all()) and len(set(draws.tolist())) > 15_900
    counts = torch.histc(draws.float(), bins=10, min=0.0, max=1.0)
    assert bool((counts - 1600).abs().max() < 160), counts  # each tenth within 10% (4 standard errors)
    assert torch.equal(uniforms(5, torch.tensor([3, 9]), torch.tensor([0, 1]), 2),
                       uniforms(5, torch.tensor([9, 3]), torch.tensor([1, 0]), 2).flip(0))


def test_sampling_keeps_the_constraints() -> None:
    assert all(not {PAD, BOS} & set(h.tokens) for h in sample([NOT_WORDS], 300, never=(PAD, BOS))[0])
    assert {PAD, BOS} <= {t for h in sample([NOT_WORDS], 300)[0] for t in h.tokens}  # unmasked they come
    assert shares(sample([LENGTH], 300, min_len=2)[0]).keys() <= {(A, C), (B, B), (B, B, B)}
    assert all(len(set(h.tokens)) == len(h.tokens) for h in sample([REPEAT], 300, no_repeat_ngram_size=1)[0])
    # nothing left to draw (every word banned or without mass, EOS too early): the output ends at −inf
    stuck = sample([LENGTH], 50, min_len=5)[0]
    assert {tuple(h.tokens) for h in stuck} == {(A, C), (B, B, B)} and all(h.log_prob == -math.inf for h in stuck)
    assert [h.tokens for h in sample([LENGTH], 3, max_lens=[0])[0]] == [[]]


@pytest.mark.parametrize("seed", range(3))
def test_sampled_rows_follow_their_outputs(seed: int) -> None:
    """Batched samples of sentences that end at different steps, rescored one by one by teacher forcing."""
    model, src, max_lens = toy_batch(seed)
    results = decode(model, src, max_lens, beam=1, nbest=3, sampling=Sampling(seed=seed))
    for i, hyps in enumerate(results):
        assert len(hyps) == (3 if int(max_lens[i]) > 0 else 1)
        for hyp in hyps:
            ended = len(hyp.tokens) < int(max_lens[i])
            assert hyp.log_prob == pytest.approx(teacher_forced(model, src[i : i + 1], hyp.tokens, ended), abs=1e-4)
    assert len({len(h.tokens) for hyps in results for h in hyps}) > 2


def test_bad_sampling_options_are_named() -> None:
    for knobs, message in (({"topk": -1}, "topk = -1"), ({"topp": 0.0}, "topp = 0.0"),
                           ({"temperature": 0.0}, "temperature = 0.0")):
        with pytest.raises(ConfigError, match=message):
            Sampling(**knobs)


def test_search_options_name_the_flag_a_bad_value_came_from() -> None:
    from nlgkit.core.config import SearchConfig
    from nlgkit.core.errors import DataError
    from nlgkit.generation.output import SearchOptions

    defaults = SearchConfig(beam=4)
    for overrides, message in (({"no_repeat_ngram_size": -2}, "--no-repeat-ngram-size -2: must be 0 or positive"),
                               ({"min_len": -1}, "--min-len -1: must be 0 or positive"),
                               ({"max_len": -1}, "--max-len -1: must be 0 or positive"),
                               ({"max_len_a": -0.5}, "--max-len-a -0.5: must be 0 or positive"),
                               ({"max_len_a": float("inf")}, "--max-len-a inf: must be a finite number"),
                               ({"length_penalty": float("nan")}, "--length-penalty nan: must be a finite number"),
                               ({"temperature": 0.5}, "--temperature: only with --sampling"),
                               ({"nbest": 5}, "--beam 4 / --nbest 5: need 1 <= nbest <= beam")):
        with pytest.raises(DataError, match=message):
            SearchOptions.resolve(defaults, **overrides)
    with pytest.raises(ConfigError, match="sampling temperature = 0.0"):
        SearchOptions.resolve(defaults, sampling=True, temperature=0.0)
    drawn = SearchOptions.resolve(defaults, sampling=True, nbest=9, sampling_topp=0.9, seed=3)
    assert drawn.nbest == 9 and drawn.sampling == Sampling(topp=0.9, seed=3)  # samples are not bound by the beam
    assert drawn.search_kwargs()["sampling"] is drawn.sampling  # handed on whole, not as a dict

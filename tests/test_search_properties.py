"""The search's properties on the real models and heads (rnn, Transformer, ConvS2S, Luong; learned, fixed and
continuous heads), what a fairseq or OpenNMT user checks first: a sentence's outputs do not depend on the padded
batch it is searched in nor on the order of that batch; beam 1 is the argmax decoding anyone would write with the
model's own ``step``; an n-best list is ranked by its score, holds no output twice and starts with the 1-best; and
the masks hold on every output. (test_search checks the same on scripted and toy models, without padding.)"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from helpers import with_head

from nlgkit.models import MODELS
from nlgkit.models.base import Generator, ModelContext
from nlgkit.models.convs2s import ConvS2SConfig
from nlgkit.models.lstm_luong import LuongConfig
from nlgkit.models.rnn import RNNConfig
from nlgkit.models.transformer import TransformerConfig
from nlgkit.search import Hypothesis, search

PAD, BOS, EOS = 1, 2, 3
SRC_V, TGT_V = 30, 25
CONFIGS = {
    "rnn": RNNConfig(embedding_dim=8, encoder_dim=10, decoder_dim=12, attention_dim=7, pre_output_dim=9),
    "transformer": TransformerConfig(encoder_layers=2, decoder_layers=2, dim=16, ffn_dim=24, heads=4),
    "convs2s": ConvS2SConfig(embedding_dim=16, encoder_layers=((16, 3, 2),), decoder_layers=((16, 3, 1), (24, 2, 1)),
                             output_dim=16),
    "lstm_luong": LuongConfig(embedding_dim=8, hidden_dim=12, layers=2),
}
# sentences of several lengths, padded in one batch; their length limits differ, so they leave it at different steps
SOURCES = [[5, 6, 7, 8, 9, 10, 3], [9, 10, 3], [11, 12, 13, 14, 3], [7, 3], [20, 21, 22, 23, 24, 25, 26, 27, 3]]
MAX_LENS = [9, 5, 8, 4, 12]


def model(name: str, head: str) -> Generator:
    torch.manual_seed(0)
    context = ModelContext(task="translation", tgt_vocab_size=TGT_V, pad_index=PAD, inputs={"src_vocab_size": SRC_V})
    options = {"dim": 8} if head == "continuous" else {}
    return with_head(MODELS.build(CONFIGS[name], context=context), head, TGT_V, **options).eval()


def padded(sources: list[list[int]]) -> dict[str, torch.Tensor]:
    src = torch.full((len(sources), max(len(s) for s in sources)), PAD)
    for i, sentence in enumerate(sources):
        src[i, : len(sentence)] = torch.tensor(sentence)
    return {"src": src, "src_lengths": torch.tensor([len(s) for s in sources])}


def searched(generator: Generator, order: list[int], beam: int, nbest: int = 1,
             **options: Any) -> list[list[Hypothesis]]:
    """The outputs of the sentences ``order`` searched in one padded batch, in that order."""
    with torch.no_grad():
        state = generator.encode(padded([SOURCES[i] for i in order]))
    return search(generator, state, batch_size=len(order), bos=BOS, eos=EOS, beam_size=beam, nbest=nbest,
                  max_lens=torch.tensor([MAX_LENS[i] for i in order]), never=(PAD, BOS), **options)


def argmax_decoding(generator: Generator, i: int) -> list[int]:
    """Sentence ``i`` decoded alone by the argmax of the model's own steps (PAD and BOS never output)."""
    tokens: list[int] = []
    with torch.no_grad():
        state = generator.encode(padded([SOURCES[i]]))
        prev = BOS
        for _ in range(MAX_LENS[i]):
            features, state = generator.step(torch.tensor([prev]), state)
            scores = generator.head.log_probs(features)[0].float()
            scores[[PAD, BOS]] = -math.inf
            prev = int(scores.argmax())
            if prev == EOS:
                break
            tokens.append(prev)
    return tokens


def outputs(found: list[Hypothesis]) -> list[list[int]]:
    return [h.tokens for h in found]


@pytest.mark.parametrize("head", ["learned", "fixed", "continuous"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_outputs_do_not_depend_on_the_batch_and_beam_1_is_argmax_decoding(name: str, head: str) -> None:
    generator = model(name, head)
    everyone, reverse = list(range(len(SOURCES))), list(range(len(SOURCES)))[::-1]
    for beam in (1, 4):
        batch = searched(generator, everyone, beam, nbest=beam)
        reversed_batch = searched(generator, reverse, beam, nbest=beam)[::-1]
        for i in everyone:
            alone = searched(generator, [i], beam, nbest=beam)[0]
            for other in (alone, reversed_batch[i]):
                assert outputs(batch[i]) == outputs(other), (beam, i)
                assert [h.score for h in batch[i]] == pytest.approx([h.score for h in other], abs=1e-5)
    greedy = searched(generator, everyone, 1)
    assert [found[0].tokens for found in greedy] == [argmax_decoding(generator, i) for i in everyone]


@pytest.mark.parametrize("head", ["learned", "fixed", "continuous"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_nbest_lists_are_ranked_distinct_and_start_with_the_1_best_under_every_mask(name: str, head: str) -> None:
    generator = model(name, head)
    everyone = list(range(len(SOURCES)))
    options: dict[str, Any]
    for options in ({}, {"length_penalty": 0.0}, {"min_len": 3, "no_repeat_ngram_size": 1},
                    {"no_repeat_ngram_size": 2, "length_penalty": 0.6}):
        best = searched(generator, everyone, 4, **options)
        lists = searched(generator, everyone, 4, nbest=4, **options)
        for i, (one, found) in enumerate(zip(best, lists, strict=True)):
            assert (one[0].tokens, one[0].score) == (found[0].tokens, found[0].score)
            assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
            assert len({tuple(h.tokens) for h in found}) == len(found) == 4
            for h in found:
                assert len(h.tokens) >= min(options.get("min_len", 0), MAX_LENS[i])
                length = len(h.tokens) + int(len(h.tokens) < MAX_LENS[i])  # the EOS counts when there is one
                assert h.score == pytest.approx(h.log_prob / length ** options.get("length_penalty", 1.0), rel=1e-6)
                size = int(options.get("no_repeat_ngram_size", 0))
                if size:
                    grams = [tuple(h.tokens[j : j + size]) for j in range(len(h.tokens) - size + 1)]
                    assert len(grams) == len(set(grams)), h.tokens

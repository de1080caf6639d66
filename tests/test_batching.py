"""Length-bucketed batches: every sentence once per epoch, budgets respected, order a function of (seed, epoch)."""

from __future__ import annotations

import random

import pytest
import torch

from nlgkit.data.batching import ParallelData, bucketed_batches, collate
from nlgkit.data.vocab import Vocabulary


def corpus(n: int = 500) -> ParallelData:
    rng = random.Random(0)
    src = [[rng.randrange(4, 50) for _ in range(rng.randrange(0, 30))] for _ in range(n)]
    tgt = [[rng.randrange(4, 50) for _ in range(rng.randrange(1, 30))] for _ in range(n)]
    return ParallelData(src, tgt)


@pytest.mark.parametrize("unit,size", [("sentences", 32), ("tokens", 400)])
def test_each_sentence_appears_exactly_once_per_epoch(unit: str, size: int) -> None:
    data = corpus()
    batches = bucketed_batches(data, size, unit, seed=1, epoch=1)
    assert sorted(i for b in batches for i in b) == list(range(len(data)))
    for batch in batches:
        if unit == "sentences":
            assert len(batch) <= size
        else:
            padded = len(batch) * max(len(data.tgt[i]) + 1 for i in batch)
            assert padded <= size or len(batch) == 1


def test_order_depends_only_on_seed_and_epoch() -> None:
    data = corpus()
    assert bucketed_batches(data, 32, "sentences", 1, 3) == bucketed_batches(data, 32, "sentences", 1, 3)
    assert bucketed_batches(data, 32, "sentences", 1, 3) != bucketed_batches(data, 32, "sentences", 1, 4)
    assert bucketed_batches(data, 32, "sentences", 1, 3) != bucketed_batches(data, 32, "sentences", 2, 3)


def test_batches_group_similar_lengths() -> None:
    data = corpus(2000)
    batches = bucketed_batches(data, 64, "sentences", 1, 1)
    spread = [max(len(data.tgt[i]) for i in b) - min(len(data.tgt[i]) for i in b) for b in batches]
    assert max(spread) <= 2  # 2000 sentences over 29 lengths: buckets of 64 span at most 3 lengths


def test_collate_shifts_targets_and_pads() -> None:
    vocab = Vocabulary.build({"a": 5, "b": 5, "c": 5}, min_freq=1)
    data = ParallelData([[4, 5], []], [[6], [4, 5]])
    batch = collate(data, [0, 1], vocab)
    pad, bos, eos = vocab.pad_index, vocab.bos_index, vocab.eos_index
    assert batch.inputs["src"].tolist() == [[4, 5, eos], [eos, pad, pad]]  # an empty source still has its </s>
    assert batch.inputs["src_lengths"].tolist() == [3, 1]
    assert batch.prev_tokens.tolist() == [[bos, 6, pad], [bos, 4, 5]]
    assert batch.targets.tolist() == [[6, eos, pad], [4, 5, eos]]
    assert batch.num_target_tokens == 5


def test_every_row_of_every_batch_holds_its_ids_then_padding() -> None:
    vocab = Vocabulary.build({str(i): 5 for i in range(50)}, min_freq=1)
    data, pad = corpus(), vocab.pad_index
    for indices in bucketed_batches(data, 400, "tokens", seed=3, epoch=1):
        batch = collate(data, indices, vocab)
        assert batch.inputs["src"].dtype == batch.prev_tokens.dtype == batch.targets.dtype == torch.long
        for row, i in enumerate(indices):
            source, target = data.src[i] + [vocab.eos_index], data.tgt[i]
            for tensor, ids in ((batch.inputs["src"], source), (batch.prev_tokens, [vocab.bos_index, *target]),
                                (batch.targets, [*target, vocab.eos_index])):
                assert tensor[row].tolist() == ids + [pad] * (tensor.size(1) - len(ids))
            assert batch.inputs["src_lengths"][row] == len(source)

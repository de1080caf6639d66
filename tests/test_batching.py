"""Length-bucketed batches: every sentence once per epoch, budgets respected, order a function of (seed, epoch)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import tiny_recipe

from nlgkit.core.errors import DataError
from nlgkit.core.recipes import load_recipe
from nlgkit.data.batching import ParallelData, bucketed_batches, collate, load_split
from nlgkit.data.token_rows import TokenRows, read_token_rows
from nlgkit.data.vocab import Vocabulary
from nlgkit.tasks.base import build_task


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


def test_token_rows_read_a_file_as_the_vocabulary_encodes_each_line(tmp_path: Path) -> None:
    vocab = Vocabulary.build({"ein": 3, "hund": 2, "läuft": 1}, min_freq=1)
    lines = ["ein hund läuft", "", "ein  katze\tläuft ", "hund"]
    (tmp_path / "train.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = read_token_rows(tmp_path / "train.de", vocab)
    expected = [vocab.encode(line.split()) for line in lines]
    assert len(rows) == 4 and list(rows) == expected and [rows[i] for i in range(4)] == expected
    assert rows[-1] == expected[-1] and rows[1:3] == expected[1:3] and rows.lengths() == [3, 0, 3, 1]
    assert rows[2][1] == vocab.unk_index  # a word outside the vocabulary
    assert rows.ids.dtype == np.int32  # 4 bytes a token, not a Python list each
    assert list(read_token_rows(tmp_path / "train.de", vocab, limit=2)) == expected[:2]
    with pytest.raises(IndexError):
        rows[4]
    with pytest.raises(DataError, match="valid.de: file not found"):
        read_token_rows(tmp_path / "valid.de", vocab)
    (tmp_path / "test.de").write_bytes(b"ein hund\n" * 3 + b"ein \xff hund\n")
    with pytest.raises(DataError, match=r"test.de: line 4: not valid UTF-8 \(byte 4\)"):
        read_token_rows(tmp_path / "test.de", vocab)


def test_token_rows_batch_and_collate_as_the_lists_they_hold() -> None:
    lists = corpus()
    rows = ParallelData(TokenRows.from_lists(lists.src), TokenRows.from_lists(lists.tgt))
    assert rows.target_lengths == lists.target_lengths and rows.source_lengths == lists.source_lengths
    vocab = Vocabulary.build({str(i): 5 for i in range(50)}, min_freq=1)
    for unit, size in (("sentences", 32), ("tokens", 400)):
        batches = bucketed_batches(rows, size, unit, seed=2, epoch=5)
        assert batches == bucketed_batches(lists, size, unit, seed=2, epoch=5)
        for indices in batches:
            a, b = collate(lists, indices, vocab), collate(rows, indices, vocab)
            assert torch.equal(a.inputs["src"], b.inputs["src"]) and torch.equal(a.targets, b.targets)


def _split_files(directory: Path, src_lines: list[str], tgt_lines: list[str], refs: list[str] | None = None) -> Path:
    """A prepared directory's train and valid files (the same lines for both splits), for the loaders to read."""
    directory.mkdir()
    for split in ("train", "valid"):
        (directory / f"{split}.de").write_text("".join(f"{line}\n" for line in src_lines), encoding="utf-8")
        (directory / f"{split}.en").write_text("".join(f"{line}\n" for line in tgt_lines), encoding="utf-8")
    (directory / "valid.ref.en").write_text("".join(f"{line}\n" for line in refs or tgt_lines), encoding="utf-8")
    (directory / "manifest.json").write_text("{}", encoding="utf-8")
    return directory


@pytest.mark.parametrize("cache", [False, True])
def test_a_limited_read_refuses_sides_whose_files_differ_in_length(tmp_path: Path, cache: bool) -> None:
    """One side a line short shifts every pair after it: ``train_limit`` reads the first lines alone, but the
    whole files must still hold one pair a line, or the pairs it reads are not pairs (line 3 missing from the
    English side: lines 3 and 4 of the limited read would pair German line 3 with English line 4)."""
    src = [f"s{i}" for i in range(6)]
    tgt = [f"t{i}" for i in range(6) if i != 2]
    directory = _split_files(tmp_path / "d", src, tgt)
    vocab = Vocabulary.build({word: 1 for word in src + tgt})
    cache_root = tmp_path / "ids" if cache else None
    with pytest.raises(DataError, match=r"train\.de has 6 lines but train\.en has 5"):
        load_split(directory, "train", "de", "en", vocab, vocab, limit=4, cache_root=cache_root)
    with pytest.raises(DataError, match=r"train\.de has 6 lines but train\.en has 5"):
        load_split(directory, "train", "de", "en", vocab, vocab, cache_root=cache_root)
    aligned = _split_files(tmp_path / "aligned", src, src)
    data = load_split(aligned, "train", "de", "en", vocab, vocab, limit=4, cache_root=cache_root)
    assert len(data) == 4 and data.lines_in_files == 6
    whole = load_split(aligned, "train", "de", "en", vocab, vocab, limit=10, cache_root=cache_root)
    assert len(whole) == whole.lines_in_files == 6


def test_validation_references_must_match_the_whole_validation_file_under_a_limit(tmp_path: Path) -> None:
    """``valid_limit`` scores the first references: they belong to the first pairs only when the reference file
    has a line for every validation pair."""
    lines = [f"w{i}" for i in range(6)]
    vocab = Vocabulary.build({word: 1 for word in lines})
    vocabs = {"de": vocab, "en": vocab}
    short = _split_files(tmp_path / "short", lines, lines, refs=lines[:2] + lines[3:])
    task = build_task(load_recipe(tiny_recipe(tmp_path, short, tmp_path / "run", valid_limit=4, train_limit=4)))
    with pytest.raises(DataError, match=r"valid\.ref\.en: 5 lines, expected 6"):
        task.load_data(short, vocabs, torch.device("cpu"))
    good = _split_files(tmp_path / "good", lines, lines)
    data = task.load_data(good, vocabs, torch.device("cpu"))
    assert len(data.valid) == 4 and [refs[0] for refs in data.valid_refs] == lines[:4]

"""Binarised token files: the same rows as the text, memory-mapped once cached, never stale, never half-written."""

from __future__ import annotations

import multiprocessing
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import nlgkit_command, tiny_recipe
from safetensors.torch import load_file

from nlgkit.core.errors import DataError
from nlgkit.data.id_cache import IDS_FILE, MANIFEST_FILE, cached_token_rows
from nlgkit.data.token_rows import TokenRows, read_token_rows
from nlgkit.data.vocab import Vocabulary

WORDS = ["ein", "hund", "läuft", "über", "die", "wiese"]


def write_corpus(path: Path, lines: int = 300, seed: int = 0) -> None:
    rng = random.Random(seed)
    text = (" ".join(rng.choices([*WORDS, "katze"], k=rng.randrange(0, 12))) for _ in range(lines))
    path.write_text("".join(f"{line}\n" for line in text), encoding="utf-8")


def vocabulary(words: list[str] = WORDS) -> Vocabulary:
    return Vocabulary.build({word: 10 - i for i, word in enumerate(words)})


def mapped(rows: TokenRows) -> bool:
    return isinstance(rows.ids.base, np.memmap) and isinstance(rows.offsets.base, np.memmap)


def cache_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def test_cached_rows_are_the_text_rows_and_later_reads_map_the_cache(tmp_path: Path) -> None:
    corpus, root, vocab = tmp_path / "train.de", tmp_path / "ids", vocabulary()
    write_corpus(corpus)
    expected = list(read_token_rows(corpus, vocab))
    first = cached_token_rows(corpus, vocab, cache_root=root)
    assert list(first) == expected
    [name] = cache_dirs(root)
    assert name.startswith("train.de-") and (root / name / MANIFEST_FILE).is_file()
    again = cached_token_rows(corpus, vocab, cache_root=root)
    assert mapped(again) and mapped(first)  # the file's pages, shared with other processes
    assert list(again) == expected and again.lengths() == [len(row) for row in expected]
    assert cache_dirs(root) == [name]  # reused, not written again


def test_another_text_vocabulary_or_limit_gets_a_cache_of_its_own(tmp_path: Path) -> None:
    corpus, root = tmp_path / "train.de", tmp_path / "ids"
    write_corpus(corpus)
    vocab, smaller = vocabulary(), vocabulary(WORDS[:3])
    assert list(cached_token_rows(corpus, vocab, cache_root=root)) == list(read_token_rows(corpus, vocab))
    assert list(cached_token_rows(corpus, smaller, cache_root=root)) == list(read_token_rows(corpus, smaller))
    assert list(cached_token_rows(corpus, vocab, 7, root)) == list(read_token_rows(corpus, vocab))[:7]
    assert len(cache_dirs(root)) == 3
    write_corpus(corpus, seed=1)  # the file edited in place: its old caches must not be read
    assert list(cached_token_rows(corpus, vocab, cache_root=root)) == list(read_token_rows(corpus, vocab))
    assert list(cached_token_rows(corpus, smaller, cache_root=root)) == list(read_token_rows(corpus, smaller))
    assert len(cache_dirs(root)) == 2  # the new text's two; the old text's three deleted, never readable again


def test_an_edited_file_deletes_only_its_own_earlier_caches(tmp_path: Path) -> None:
    """Another file's caches (even one whose name starts like this file's), and a directory being written by another
    process (no manifest yet), are kept."""
    corpus, other, root, vocab = tmp_path / "train.de", tmp_path / "train.de-x", tmp_path / "ids", vocabulary()
    write_corpus(corpus)
    write_corpus(other, seed=2)
    cached_token_rows(corpus, vocab, cache_root=root)
    [old] = cache_dirs(root)
    cached_token_rows(other, vocab, cache_root=root)  # "train.de-x-<digest>": its manifest names another file
    in_flight = root / ".train.de-0123456789abcdef.xyz.tmp"
    in_flight.mkdir()
    half_written = root / "train.de-fedcba9876543210"
    half_written.mkdir()
    (half_written / IDS_FILE).write_bytes(b"")
    before = set(cache_dirs(root))
    write_corpus(corpus, seed=3)
    cached_token_rows(corpus, vocab, cache_root=root)
    after = set(cache_dirs(root))
    assert old not in after and len(after - before) == 1
    assert {name for name in before if name != old} <= after  # the other file's, the in-flight and half-written


@pytest.mark.parametrize("damage", ["truncated ids", "no manifest", "another text's cache", "offsets too long"])
def test_a_damaged_cache_is_not_read_but_written_again(tmp_path: Path, damage: str) -> None:
    corpus, root, vocab = tmp_path / "train.de", tmp_path / "ids", vocabulary()
    write_corpus(corpus)
    expected = list(read_token_rows(corpus, vocab))
    cached_token_rows(corpus, vocab, cache_root=root)
    [directory] = root.iterdir()
    if damage == "truncated ids":
        (directory / IDS_FILE).write_bytes((directory / IDS_FILE).read_bytes()[:200])
    elif damage == "no manifest":
        (directory / MANIFEST_FILE).unlink()
    elif damage == "another text's cache":  # under this text's name (a copy gone wrong): its manifest says so
        other = tmp_path / "other.de"
        write_corpus(other, seed=1)
        cached_token_rows(other, vocab, cache_root=tmp_path / "other")
        shutil.rmtree(directory)
        shutil.copytree(next((tmp_path / "other").iterdir()), directory)
    else:
        np.save(directory / "offsets.npy", np.arange(10_000, dtype=np.int64))
    assert list(cached_token_rows(corpus, vocab, cache_root=root)) == expected
    assert list(cached_token_rows(corpus, vocab, cache_root=root)) == expected
    assert [p.name for p in root.iterdir()] == [directory.name]  # written again in its place, no leftovers


def test_a_cache_that_cannot_be_written_reads_the_text(tmp_path: Path) -> None:
    corpus, vocab = tmp_path / "train.de", vocabulary()
    write_corpus(corpus)
    (tmp_path / "a file").write_text("")
    rows = cached_token_rows(corpus, vocab, cache_root=tmp_path / "a file" / "ids")  # mkdir fails, as read-only
    assert list(rows) == list(read_token_rows(corpus, vocab)) and not mapped(rows)
    assert not mapped(cached_token_rows(corpus, vocab))  # no root: no cache
    with pytest.raises(DataError, match="valid.de: file not found"):
        cached_token_rows(tmp_path / "valid.de", vocab, cache_root=tmp_path / "ids")


def _read(args: tuple[Path, Path]) -> list[list[int]]:
    corpus, root = args
    return list(cached_token_rows(corpus, vocabulary(), cache_root=root))


def test_processes_binarising_one_file_at_once_leave_one_complete_cache(tmp_path: Path) -> None:
    corpus, root = tmp_path / "train.de", tmp_path / "ids"
    write_corpus(corpus, lines=20_000)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_read, [(corpus, root)] * 4)
    expected = list(read_token_rows(corpus, vocabulary()))
    assert all(result == expected for result in results)
    assert len(cache_dirs(root)) == 1  # one complete cache, no temporary directory left behind
    assert list(cached_token_rows(corpus, vocabulary(), cache_root=root)) == expected


def test_a_run_reading_the_cache_trains_as_one_reading_the_text(tmp_path: Path, paper: tuple[Path, dict]) -> None:
    """Two data directories, one binarised (the default), one read as text: the same weights after an epoch; the
    second run from the binarised one reads the cache it wrote and ends with those weights too."""
    source = paper[0]
    weights, written = {}, {}
    for name, settings in (("text", ["data.id_cache=false"]), ("binarised", []), ("again", [])):
        data_dir = tmp_path / "data" / ("text" if name == "text" else "binarised")
        if not data_dir.exists():
            shutil.copytree(source, data_dir, ignore=shutil.ignore_patterns("ids"))
        recipe = tiny_recipe(tmp_path, data_dir, tmp_path / name, max_epochs=1, valid_limit=10, train_limit=100)
        nlgkit_command(["train", str(recipe), "--device", "cpu", *[arg for s in settings for arg in ("--set", s)]])
        weights[name] = load_file(str(tmp_path / name / "checkpoints" / "last" / "model.safetensors"))
        if name != "text":  # the second run maps the first run's files: not one written again
            written[name] = {str(p): p.stat().st_ino for p in (data_dir / "ids").glob("*/*")}
    assert written["binarised"] == written["again"] and len(written["again"]) == 12
    assert not (tmp_path / "data" / "text" / "ids").exists()
    caches = cache_dirs(tmp_path / "data" / "binarised" / "ids")
    assert [name.split("-")[0] for name in caches] == ["train.de", "train.en", "valid.de", "valid.en"]
    assert all(torch.equal(weights["text"][k], weights[other][k]) for other in ("binarised", "again")
               for k in weights["text"])

"""``make bench``: what a training corpus costs before and between updates: memory held, reading, batch order.

Every process of a torchrun job holds the whole training corpus, so its bytes a token set how many processes a
machine's memory takes on WMT-14's millions of pairs. The corpus is a synthetic one of WMT-14's shape (a 32,000-word
vocabulary, sentences of 5–55 tokens), written to a temporary directory and read the way training reads it
(:func:`nlgkit.data.batching.load_split`, flat :class:`~nlgkit.data.token_rows.TokenRows`); the same ids held as
a Python list per sentence (how nlgkit held them before) are measured beside it. Bytes are counted by
``tracemalloc`` (what is allocated, unlike RSS, which the allocator keeps after a peak), times without it. Then
the corpus is binarised as training does by default (``data.id_cache``): once, and read back memory-mapped, also by
two processes at once, whose proportional set sizes (PSS) show whether they hold the ids once between them.
"""

from __future__ import annotations

import multiprocessing
import random
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, cast

import torch

from nlgkit.data.batching import ParallelData, bucketed_batches, collate, load_split
from nlgkit.data.token_rows import TokenRows
from nlgkit.data.vocab import SPECIALS, Vocabulary

WORDS = 32_000  # WMT-14's joint BPE vocabulary
SHORTEST, LONGEST = 5, 55


def write_corpus(directory: Path, pairs: int, seed: int) -> None:
    """``train.en`` / ``train.de`` of ``pairs`` random sentences and one vocabulary ``vocab.{en,de}.txt``."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(WORDS)]
    for lang in ("en", "de"):
        lines = (" ".join(rng.choices(words, k=rng.randint(SHORTEST, LONGEST))) for _ in range(pairs))
        (directory / f"train.{lang}").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        Vocabulary([*SPECIALS, *words], [0] * len(SPECIALS) + [1] * WORDS).save(directory / f"vocab.{lang}.txt")


def _lists(path: Path, vocab: Vocabulary) -> list[list[int]]:
    """A token file as a list of id lists, one a line (how nlgkit read corpora before :mod:`token_rows`)."""
    with open(path, encoding="utf-8") as handle:
        return [vocab.encode(line.split()) for line in handle]


def measure_corpus(pairs: int = 200_000, seed: int = 1, batch_tokens: int = 4000) -> dict[str, Any]:
    """Reading, holding, ordering and collating a ``pairs``-pair corpus as training does."""
    with tempfile.TemporaryDirectory(prefix="nlgkit-bench-corpus-") as tmp:
        directory = Path(tmp)
        write_corpus(directory, pairs, seed)
        vocab = Vocabulary.load(directory / "vocab.en.txt")
        start = time.perf_counter()
        data = load_split(directory, "train", "en", "de", vocab, vocab)
        load_s = time.perf_counter() - start
        del data
        tracemalloc.start()
        data = load_split(directory, "train", "en", "de", vocab, vocab)
        held, peak = tracemalloc.get_traced_memory()
        as_lists = [_lists(directory / f"train.{lang}", vocab) for lang in ("en", "de")]
        lists_held = tracemalloc.get_traced_memory()[0] - held
        tracemalloc.stop()
        del as_lists
        tokens = sum(data.source_lengths) + sum(data.target_lengths)
        start = time.perf_counter()
        batches = bucketed_batches(data, batch_tokens, "tokens", seed=seed, epoch=1)
        order_s = time.perf_counter() - start
        collate_ms = _collate_ms(data, batches, vocab)
        binarised = _binarised(directory, vocab, batches)
    return {"pairs": pairs, "tokens": tokens, "vocabulary": WORDS, "load_s": load_s, "tokens_per_s": tokens / load_s,
            "bytes_per_token": held / tokens, "peak_bytes_per_token": peak / tokens,
            "list_bytes_per_token": lists_held / tokens, "order_s": order_s, "batches": len(batches),
            "batch_tokens": batch_tokens, "collate_ms": collate_ms, "threads": torch.get_num_threads(),
            "shortest": SHORTEST, "longest": LONGEST, **binarised}


def _collate_ms(data: ParallelData, batches: list[list[int]], vocab: Vocabulary) -> float:
    """Milliseconds a batch to collate the first 200 of ``batches``."""
    start = time.perf_counter()
    for indices in batches[:200]:
        collate(data, indices, vocab)
    return 1000 * (time.perf_counter() - start) / min(len(batches), 200)


def _binarised(directory: Path, vocab: Vocabulary, batches: list[list[int]]) -> dict[str, Any]:
    """The same corpus binarised (:mod:`nlgkit.data.id_cache`): the first read writes the cache, later ones map it
    (the bytes a process allocates for a mapped corpus: its pages are the page cache's, shared), and the same
    batches collated from the mapped ids."""
    cache_root = directory / "ids"
    start = time.perf_counter()
    load_split(directory, "train", "en", "de", vocab, vocab, cache_root=cache_root)
    binarise_s = time.perf_counter() - start
    start = time.perf_counter()
    load_split(directory, "train", "en", "de", vocab, vocab, cache_root=cache_root)
    mapped_load_s = time.perf_counter() - start
    tracemalloc.start()
    mapped = load_split(directory, "train", "en", "de", vocab, vocab, cache_root=cache_root)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    tokens = sum(mapped.source_lengths) + sum(mapped.target_lengths)
    figures = {"binarise_s": binarise_s, "mapped_load_s": mapped_load_s, "mapped_bytes_per_token": held / tokens,
               "mapped_collate_ms": _collate_ms(mapped, batches, vocab), "mapped_mib": _mib(mapped)}
    del mapped  # unmapped here, so the two processes below are the only ones sharing its pages (PSS: half each)
    return {**figures, "two_processes": _two_processes(directory)}


def _mib(data: ParallelData) -> float:
    """The mapped files' bytes (ids and offsets of both sides), in MiB."""
    return sum(rows.ids.nbytes + rows.offsets.nbytes for rows in _sides(data)) / 2**20


def _sides(data: ParallelData) -> list[TokenRows]:
    """The two sides of a corpus that :func:`load_split` read (TokenRows, mapped or not)."""
    return [cast(TokenRows, rows) for rows in (data.src, data.tgt)]


def _memory_mib() -> dict[str, float] | None:
    """This process's resident and proportional set sizes (a shared page counts 1/N in each of its N processes'
    PSS) and its anonymous memory, in MiB; None where Linux's ``/proc/self/smaps_rollup`` is missing."""
    try:
        lines = Path("/proc/self/smaps_rollup").read_text().splitlines()
    except OSError:
        return None
    fields = {line.split()[0].rstrip(":"): int(line.split()[1]) / 1024 for line in lines if line.endswith(" kB")}
    return {key: fields[key] for key in ("Rss", "Pss", "Anonymous")}


def _mapping_process(directory: str, barrier: Any, answers: Any) -> None:
    """Map the corpus, read every id, wait until the other process has too; then report what it added."""
    vocab = Vocabulary.load(Path(directory) / "vocab.en.txt")
    before = _memory_mib()
    data = load_split(Path(directory), "train", "en", "de", vocab, vocab, cache_root=Path(directory) / "ids")
    for rows in _sides(data):
        rows.ids.sum()  # every page read
    barrier.wait()
    after = _memory_mib()
    barrier.wait()  # both measured while both hold the mapping
    answers.put(None if before is None or after is None else {key: after[key] - before[key] for key in after})


def _two_processes(directory: Path) -> list[dict[str, float]] | None:
    """What each of two processes mapping the binarised corpus at once adds to its RSS, PSS and anonymous memory
    (two torchrun ranks of one machine); None where it cannot be read."""
    context = multiprocessing.get_context("spawn")
    barrier, answers = context.Barrier(2), context.Queue()
    processes = [context.Process(target=_mapping_process, args=(str(directory), barrier, answers)) for _ in range(2)]
    for process in processes:
        process.start()
    added = [answers.get(timeout=300) for _ in processes]
    for process in processes:
        process.join()
    return None if None in added else added

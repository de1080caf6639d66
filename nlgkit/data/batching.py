"""Batches with named inputs, token-id parallel data, and length-bucketed batches with a reproducible order.

Batches group examples of similar length (little padding, so few wasted steps in the recurrent
decoder) and their order is a pure function of (seed, epoch): a resumed run regenerates the epoch's
batches and skips those already done, so it sees exactly the data an uninterrupted run would. What a
batch's ``inputs`` hold (source tokens and lengths, image features, …) is the task's business.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from nlgkit.core.errors import DataError
from nlgkit.data.id_cache import cached_token_rows
from nlgkit.data.token_rows import count_lines, row_lengths
from nlgkit.data.vocab import Vocabulary


class Examples:
    """Teacher-forcing examples of any task: batching only needs their lengths."""

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def target_lengths(self) -> list[int]:
        raise NotImplementedError

    @property
    def source_lengths(self) -> list[int]:
        """Sort key after the target length (0 for sources without a length, e.g. images)."""
        raise NotImplementedError


@dataclass
class ParallelData(Examples):
    src: Sequence[list[int]]  # lists, or TokenRows as load_split reads them
    tgt: Sequence[list[int]]
    file_lines: int | None = None  # lines in each side's file where a limit kept fewer (None: all were read)

    def __len__(self) -> int:
        return len(self.src)

    @property
    def lines_in_files(self) -> int:
        """How many lines the split's files hold, read or not: what a file of the same split (references,
        images) must also hold, or its lines no longer belong to the same pairs."""
        return len(self) if self.file_lines is None else self.file_lines

    @property
    def target_lengths(self) -> list[int]:
        return row_lengths(self.tgt)

    @property
    def source_lengths(self) -> list[int]:
        return row_lengths(self.src)


def load_split(data_dir: Path, split: str, src_lang: str, tgt_lang: str, src_vocab: Vocabulary,
               tgt_vocab: Vocabulary, limit: int = 0, cache_root: Path | None = None) -> ParallelData:
    """Read ``{split}.{lang}`` token files as vocabulary ids (first ``limit`` lines when limit > 0), binarised
    into (and memory-mapped from) ``cache_root`` where one is given (:mod:`nlgkit.data.id_cache`)."""
    src_path, tgt_path = data_dir / f"{split}.{src_lang}", data_dir / f"{split}.{tgt_lang}"
    src = cached_token_rows(src_path, src_vocab, limit, cache_root)
    tgt = cached_token_rows(tgt_path, tgt_vocab, limit, cache_root)
    file_lines = None
    if limit and len(src) == len(tgt) == limit:  # the first lines agree in number: do the whole files?
        src_lines, file_lines = count_lines(src_path), count_lines(tgt_path)
        if src_lines != file_lines:
            raise DataError(f"{data_dir}: {split}.{src_lang} has {src_lines} lines but {split}.{tgt_lang} has "
                            f"{file_lines}")
    elif len(src) != len(tgt):
        raise DataError(f"{data_dir}: {split}.{src_lang} has {len(src)} lines but {split}.{tgt_lang} has {len(tgt)}")
    return ParallelData(src, tgt, file_lines)


@dataclass
class Batch:
    inputs: dict[str, Tensor]  # what model.encode receives, by name (e.g. src (B, S) and src_lengths (B,))
    prev_tokens: Tensor  # (B, T) <s> y_1 … y_{n}: decoder inputs
    targets: Tensor  # (B, T) y_1 … y_n </s>: gold outputs, pad elsewhere
    indices: list[int]  # positions of the examples in the dataset
    num_target_tokens: int  # gold tokens including </s>: the unit of loss normalisation and throughput

    def to(self, device: torch.device) -> Batch:
        """The batch on ``device``; to a GPU through pinned memory, without waiting for the copy."""
        def move(tensor: Tensor) -> Tensor:
            if device.type == "cuda":
                return tensor.pin_memory().to(device, non_blocking=True)
            return tensor.to(device)

        inputs = {name: move(value) for name, value in self.inputs.items()}
        return Batch(inputs, move(self.prev_tokens), move(self.targets), self.indices, self.num_target_tokens)


def right_padded(rows: list[list[int]], pad: int) -> Tensor:
    """Rows of ids as one (B, T) long tensor, padded on the right to the longest: built from one flat tensor
    through a length mask (row-major, as the rows are concatenated) rather than a tensor per row, since collating
    runs on the host before every update and a GPU waits for it."""
    lengths = torch.tensor([len(row) for row in rows], dtype=torch.long)
    width = int(lengths.max()) if rows else 0
    out = torch.full((len(rows), width), pad, dtype=torch.long)
    out[torch.arange(width) < lengths[:, None]] = torch.tensor([i for row in rows for i in row], dtype=torch.long)
    return out


def target_tensors(targets: list[list[int]], vocab: Vocabulary) -> tuple[Tensor, Tensor, int]:
    """Decoder inputs ``<s> y`` and gold outputs ``y </s>``, right-padded (B, T), and the gold-token count."""
    prev = right_padded([[vocab.bos_index, *tokens] for tokens in targets], vocab.pad_index)
    gold = right_padded([[*tokens, vocab.eos_index] for tokens in targets], vocab.pad_index)
    return prev, gold, sum(len(t) + 1 for t in targets)


def pad_sources(sentences: list[list[int]], pad: int, eos: int) -> tuple[Tensor, Tensor]:
    """Source ids + </s>, right-padded: (B, S) and lengths (B,). Empty sources still get their </s>."""
    rows = [[*s, eos] for s in sentences]
    return right_padded(rows, pad), torch.tensor([len(r) for r in rows], dtype=torch.long)


def collate(data: ParallelData, indices: list[int], vocab: Vocabulary) -> Batch:
    src, src_lengths = pad_sources([data.src[i] for i in indices], vocab.pad_index, vocab.eos_index)
    prev, gold, num_tokens = target_tensors([data.tgt[i] for i in indices], vocab)
    return Batch({"src": src, "src_lengths": src_lengths}, prev, gold, list(indices), num_tokens)


def bucketed_batches(data: Examples, batch_size: int, unit: str, seed: int, epoch: int,
                     shuffle: bool = True) -> list[list[int]]:
    """Indices grouped by length into batches; order determined by (seed, epoch) alone.

    unit = "sentences": ``batch_size`` examples per batch; "tokens": at most ``batch_size`` padded
    target tokens per batch (at least one example).
    """
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    n = len(data)
    noise = torch.rand(n, generator=generator).numpy() if shuffle else np.zeros(n, dtype=np.float32)
    # sort by target then source length; random tie-breaking varies batch composition across epochs (a stable
    # sort: equal keys keep the order of their indices)
    tgt_lengths, src_lengths = data.target_lengths, data.source_lengths
    order = np.lexsort(np.stack([noise, np.array(src_lengths), np.array(tgt_lengths)])).tolist()
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        length = tgt_lengths[i] + 1
        if unit == "tokens":
            if current and max(longest, length) * (len(current) + 1) > batch_size:
                batches.append(current)
                current, longest = [], 0
        elif len(current) == batch_size:
            batches.append(current)
            current = []
        current.append(i)
        longest = max(longest, length)
    if current:
        batches.append(current)
    if shuffle:
        permutation = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[j] for j in permutation]
    return batches

"""One side of a tokenised corpus as ids: one flat int32 array and row offsets, not a Python list per sentence.

A list of lists costs 8 bytes a token (a pointer) plus some 60 a sentence (the list): 10.7 MiB a million tokens on a
WMT-14-shaped corpus (``make bench``'s ``corpus`` section), so WMT-14's 4.5 million pairs would hold about 3 GB in
every process of a torchrun job. One int32 array holds the same ids in 4 bytes a token (4.1 MiB a million), as
fairseq's and OpenNMT's binarised corpora do. Reading costs what it did (a vocabulary lookup a token).
Indexing a row still gives a ``list[int]``, so batching, validation and every task read these rows as lists.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from nlgkit.core.errors import DataError
from nlgkit.core.io import invalid_utf8
from nlgkit.data.vocab import Vocabulary

CHUNK_LINES = 4_096  # lines encoded at a time (their token strings are alive together: few enough to stay in cache)


class TokenRows(Sequence[list[int]]):
    """Rows of token ids; row ``i`` is ``ids[offsets[i]:offsets[i + 1]]``."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        if offsets.ndim != 1 or len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(ids):
            raise ValueError("offsets must start at 0 and end at the number of ids")
        self.ids = ids
        self.offsets = offsets

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]]) -> TokenRows:
        lengths = [len(row) for row in rows]
        return cls.from_lengths(np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=sum(lengths)),
                                lengths)

    @classmethod
    def from_lengths(cls, ids: np.ndarray, lengths: Sequence[int]) -> TokenRows:
        """The rows of ``ids`` taken ``lengths[i]`` at a time: the one place row offsets are built from lengths
        (a file read as text, rows given as lists)."""
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(np.array(lengths, dtype=np.int64), out=offsets[1:])
        return cls(ids, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> list[int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[int]]: ...

    def __getitem__(self, index: int | slice) -> list[int] | list[list[int]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"row {index} of {len(self)}")
        return self.ids[self.offsets[index]:self.offsets[index + 1]].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        return (self.ids[start:end].tolist() for start, end in itertools.pairwise(self.offsets.tolist()))

    def lengths(self) -> list[int]:
        return np.diff(self.offsets).tolist()


def row_lengths(rows: Sequence[Sequence[int]]) -> list[int]:
    """Each row's length, from the offsets alone where the rows are :class:`TokenRows`."""
    return rows.lengths() if isinstance(rows, TokenRows) else [len(row) for row in rows]


def count_lines(path: Path) -> int:
    """The lines of a text file as :func:`read_token_rows` reads them, counted without keeping them: a limited read
    must still learn whether the two sides of a corpus hold the same number (a side one line short misaligns every
    pair after it, within the limit too)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return sum(1 for _ in handle)
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_token_rows(path: Path, vocab: Vocabulary, limit: int = 0) -> TokenRows:
    """A file of space-separated tokens, one sentence a line, as ids (its first ``limit`` lines when limit > 0)."""
    if not path.is_file():
        raise DataError(f"{path}: file not found (run `nlgkit prepare` first)")
    lengths: list[int] = []
    chunks: list[np.ndarray] = []
    try:
        with open(path, encoding="utf-8") as handle:
            lines: Iterator[str] = itertools.islice(handle, limit) if limit else iter(handle)
            while chunk := [line.split() for line in itertools.islice(lines, CHUNK_LINES)]:
                lengths.extend(map(len, chunk))
                chunks.append(np.array(vocab.encode(itertools.chain.from_iterable(chunk)), dtype=np.int32))
    except UnicodeDecodeError:
        raise DataError(invalid_utf8(path)) from None
    return TokenRows.from_lengths(np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32), lengths)


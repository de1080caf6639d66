"""Initial rows of a model's embedding from a word-vector table (Hirasawa & Komachi 2019, §5.1).

Their policy for words a table cannot give: a vocabulary word the table lacks (and each special token) starts
from the mean of the table's out-of-vocabulary vectors, those of its words that are *not* in the vocabulary,
and is then trained individually. A fastText model (a ``.bin``, or the ``NAME.fasttext.bin`` that
``nlgkit embed train`` saves beside a table) lacks no word: it builds each from its character n-grams. The
padding row is zeros. A table of another dimension is refused, or with ``project`` mapped to the embedding
size by a fixed random Gaussian matrix P (e × dim, entries N(0, 1/dim), from ``seed``): a Johnson-Lindenstrauss
projection that keeps lengths and angles approximately, works whether dim is smaller or larger than e, and
needs no fitting (PCA would fit the table and could not grow it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError
from nlgkit.core.seeding import regenerable_generator
from nlgkit.data.vocab import PAD, SPECIALS
from nlgkit.wordvectors.sources import read_vectors


@dataclass(frozen=True)
class InitialRows:
    """Rows for an embedding and which of them the table supplied."""

    vectors: Tensor  # (len(words), dim) float32
    found: Tensor  # (len(words),) bool: the table had the word (or its fastText model built it from n-grams)
    source: str  # the table and how it was read, e.g. "glove.txt (glove, 400,000 × 300)"


def projection(table_dim: int, dim: int, seed: int) -> Tensor:
    """The fixed Gaussian projection (table_dim, dim), entries N(0, 1/dim): ‖xP‖ ≈ ‖x‖."""
    return torch.randn(table_dim, dim, generator=regenerable_generator(seed)) / dim**0.5


def initial_rows(table: Path, words: Sequence[str], dim: int, project: bool = False, seed: int = 1,
                 normalize: bool = False) -> InitialRows:
    """Rows for ``words`` from ``table`` (an nlgkit table, word2vec / GloVe / fastText ``.vec`` text or binary,
    a fastText ``.bin``, a spaCy package, a ``.npy`` + ``.parquet`` directory): the table's vectors where it has
    the word, the mean of its out-of-vocabulary vectors for the rest and for the specials, zeros for ``<pad>``;
    with ``normalize`` each row then of unit length, as Hirasawa's nmtpytorch loader gives them."""
    source = read_vectors(table)
    if source.dim != dim and not project:
        raise ConfigError(f"{table}: {source.dim}-dimensional vectors for a {dim}-dimensional embedding (make the "
                          f"embedding {source.dim}-dimensional, or set project = true to project the table)")
    rows, found = source.lookup(words)  # (N, e), (N,)
    special = torch.tensor([word in SPECIALS for word in words], dtype=torch.bool)
    found &= ~special
    fallback = source.mean_excluding(words)  # (e,)
    if source.dim != dim:
        matrix = projection(source.dim, dim, seed)
        rows, fallback = rows @ matrix, fallback @ matrix
    rows[~found] = fallback
    if normalize:
        rows = torch.nn.functional.normalize(rows, dim=1)
    rows[torch.tensor([word == PAD for word in words], dtype=torch.bool)] = 0.0
    described = f"{table} ({source.fmt}, {len(source.words):,} × {source.dim}"
    described += ", character n-grams)" if source.ngrams is not None else ")"
    return InitialRows(vectors=rows.float().contiguous(), found=found, source=described)

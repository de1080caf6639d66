"""Word-vector tables for continuous-output heads and embedding analyses (``nlgkit embed``).

A table is two files: ``NAME.safetensors`` (``vectors``: (V, e) float32) and ``NAME.vocab.txt`` (one word per
line, row order). Continuous heads read one as their frozen targets, and a table whose words are not the
run's vocabulary in the same order is refused naming both files. Sources (Tokarchuk & Niculae 2024):
random unit vectors (``sphere``) or scaled hypercube corners ±1/√e (``cube``); the target vectors of a trained
discrete model (``extract``); α·A + (1 − α)·B of two tables, rows re-normalised (``combine``); pre-trained
vectors of any format (``load``, :mod:`nlgkit.wordvectors.sources`); word2vec, fastText or GloVe trained on a
corpus (``train``, :mod:`nlgkit.wordvectors.training`); and a table debiased by All-but-the-Top or localized
centering (``debias``, :mod:`nlgkit.wordvectors.debias`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file, save
from torch import Tensor

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import atomic_write, canonical_safetensors, invalid_utf8
from nlgkit.core.seeding import regenerable_generator
from nlgkit.data.vocab import Vocabulary

TENSOR = "vectors"


def names_a_folder(path: Path) -> bool:
    """A folder (``.``, ``..``, ``/``): no NAME to put ``NAME.vocab.txt`` beside."""
    return path.name in ("", ".", "..")


def beside(table: Path, suffix: str) -> Path:
    """The file ``NAME{suffix}`` that goes with the table ``NAME.safetensors``."""
    if names_a_folder(table):
        raise DataError(f"{table}: a directory, not a table file")
    return table.with_suffix(suffix)


def vocab_path(table: Path) -> Path:
    """``NAME.vocab.txt`` beside ``NAME.safetensors``."""
    return beside(table, ".vocab.txt")


def _read_words(path: Path) -> list[str]:
    """A word list: one word per line, as :func:`save_table` writes it."""
    try:
        return path.read_text(encoding="utf-8").split("\n")[:-1]
    except UnicodeDecodeError:
        raise DataError(invalid_utf8(path)) from None


# What a table holds, recorded in its metadata so that reports can name a run's targets as the papers do.
KINDS = ("sphere", "cube", "pretrained", "input", "combined", "loaded", "trained", "debiased")


def save_table(path: Path, vectors: Tensor, words: Sequence[str], kind: str = "") -> None:
    """Write the table and its word list atomically, as a pair: both are written to temporaries, then renamed
    into place, the word list last; an error before that leaves neither file (and a table that was not there
    before is removed again if its word list cannot be renamed). ``kind`` (one of :data:`KINDS`) says where the
    vectors came from. The same vectors give the same bytes every time, so that a run's record of its table's
    SHA-256 tells tables apart, not saves."""
    if names_a_folder(path):
        raise DataError(f"{path}: not a file name (a table is written as NAME.safetensors)")
    if vectors.dim() != 2 or vectors.size(0) != len(words):
        raise DataError(f"{path}: {tuple(vectors.shape)} vectors for {len(words)} words")
    if any("\n" in word or "\r" in word for word in words):
        raise DataError(f"{path}: a word contains a line break (the word list has one word per line)")
    data = save({TENSOR: vectors.detach().float().contiguous().cpu()}, metadata={"format": "nlgkit-table", "kind": kind})
    new_table, renamed = not path.exists(), False
    try:
        with atomic_write(vocab_path(path)) as words_handle:
            words_handle.write("".join(f"{word}\n" for word in words))
            with atomic_write(path, "wb") as handle:
                handle.write(canonical_safetensors(data))
            renamed = True
    except BaseException:
        if renamed and new_table:  # the word list failed after the table was renamed: leave no table without it
            path.unlink(missing_ok=True)
        raise


def table_kind(path: Path) -> str:
    """Where a table's vectors came from (:data:`KINDS`), or "" for a table written without it."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), "pt") as handle:
            return (handle.metadata() or {}).get("kind", "")
    except (SafetensorError, OSError):
        return ""


def load_table(path: Path) -> tuple[Tensor, list[str]]:
    """The vectors (V, e) and words of a table; one-line errors naming the file at fault."""
    words_file = vocab_path(path)
    if not path.is_file():
        raise DataError(f"{path}: table not found")
    if not words_file.is_file():
        raise DataError(f"{words_file}: the table's word list is missing")
    try:
        vectors = load_file(str(path))[TENSOR]
    except (SafetensorError, KeyError, OSError) as exc:
        raise DataError(f"{path}: not an nlgkit table ({type(exc).__name__})") from None
    words = _read_words(words_file)
    if vectors.dim() != 2 or vectors.size(0) != len(words):
        raise DataError(f"{path}: {tuple(vectors.shape)} vectors but {len(words)} words in {words_file}")
    if not torch.isfinite(vectors).all():
        raise DataError(f"{path}: the table holds non-finite values")
    return vectors.float(), words


def load_table_for(path: Path, words: Sequence[str] | None, source: str) -> Tensor:
    """A table whose rows must be ``words`` in order (the run's vocabulary, read from ``source``)."""
    vectors, table_words = load_table(path)
    if words is not None and list(words) != table_words:
        if len(words) != len(table_words):
            detail = f"{len(table_words)} words, the vocabulary {len(words)}"
        else:
            row = next(i for i, (a, b) in enumerate(zip(words, table_words, strict=True)) if a != b)
            detail = f"row {row} is {table_words[row]!r}, the vocabulary's {words[row]!r}"
        raise ConfigError(f"{vocab_path(path)} does not match {source}: {detail} (make the table from this "
                          f"vocabulary with `nlgkit embed`)")
    return vectors


def random_table(vocab_size: int, dim: int, dist: str, seed: int) -> Tensor:
    """``sphere``: normalised standard normal rows; ``cube``: corners of the hypercube scaled to unit norm."""
    generator = regenerable_generator(seed)
    if dist == "sphere":
        return F.normalize(torch.randn(vocab_size, dim, generator=generator), dim=1)
    if dist == "cube":
        signs = torch.randint(0, 2, (vocab_size, dim), generator=generator).float() * 2 - 1
        return signs / dim**0.5
    raise ConfigError(f"--dist {dist!r}: expected sphere or cube")


def combine_tables(a: Tensor, b: Tensor, alpha: float, names: tuple[str, str] = ("A", "B")) -> Tensor:
    """Tokarchuk & Niculae's combination: normalise(α·Â + (1 − α)·B̂) row by row, Â and B̂ unit rows."""
    if a.shape != b.shape:
        raise DataError(f"{names[0]} ({a.size(0)} × {a.size(1)}) and {names[1]} ({b.size(0)} × {b.size(1)}): "
                        "tables of different shapes cannot be combined")
    if not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"--alpha {alpha}: expected a value in [0, 1]")
    mixed = alpha * F.normalize(a, dim=1) + (1 - alpha) * F.normalize(b, dim=1)
    return F.normalize(mixed, dim=1)


def vocabulary_words(path: Path) -> list[str]:
    """The words of an nlgkit vocabulary file (``vocab.LANG.txt``) or of a table's word list."""
    if path.name.endswith(".vocab.txt"):
        if not path.is_file():
            raise DataError(f"{path}: word list not found")
        return _read_words(path)
    return list(Vocabulary.load(path).tokens)

"""Token files binarised once: their ids and row offsets as ``.npy`` files, memory-mapped by every later read.

Reading WMT-14's 4.5 million pairs as text costs about a minute of vocabulary lookups in every process of a torchrun
job, and each process then holds its own copy of the ids. Binarised once (as ``fairseq-preprocess`` and OpenNMT's
``build_vocab`` + shards do, but without a separate step to forget), a corpus loads in milliseconds, and the processes
of a machine share one copy of it through the page cache.

A cache lives in ``DATA_DIR/ids/<file>-<digest>/``: ``ids.npy`` (int32), ``offsets.npy`` (int64) and
``manifest.json``. The digest covers everything the ids depend on (the text file's sha256, the vocabulary's, the line
limit and this format), so an edited file or another vocabulary gets a cache of its own and a stale one is never
read; once a file's new cache is written, the caches of its earlier texts are deleted (they can never be read
again, and WMT-14's are hundreds of MiB each). A cache is written to a temporary directory and renamed into place,
so no reader ever sees a half-written one, not even among processes that binarise the same file at once. A data directory that cannot be written to is read as
text, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from nlgkit import __version__
from nlgkit.core.errors import DataError
from nlgkit.core.io import atomic_directory, read_json, sha256_file, write_json
from nlgkit.data.token_rows import TokenRows, read_token_rows
from nlgkit.data.vocab import Vocabulary

FORMAT = 1
IDS_FILE, OFFSETS_FILE, MANIFEST_FILE = "ids.npy", "offsets.npy", "manifest.json"


def cache_description(path: Path, vocab: Vocabulary, limit: int) -> dict[str, Any]:
    """Everything the ids of ``path`` depend on."""
    return {"format": FORMAT, "file": path.name, "file_sha256": sha256_file(path),
            "vocabulary_sha256": vocab.checksum(), "limit": limit}


def cache_directory(cache_root: Path, description: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root / f"{description['file']}-{digest}"


def cached_token_rows(path: Path, vocab: Vocabulary, limit: int = 0, cache_root: Path | None = None) -> TokenRows:
    """The rows of :func:`~nlgkit.data.token_rows.read_token_rows`, memory-mapped from ``cache_root`` when it holds
    them, read as text and binarised into it when not (``cache_root`` None: read as text, no cache)."""
    if cache_root is None or not path.is_file():
        return read_token_rows(path, vocab, limit)  # (a missing file: its error)
    description = cache_description(path, vocab, limit)
    directory = cache_directory(cache_root, description)
    if (cached := load_cached(directory, description)) is not None:
        return cached
    rows = read_token_rows(path, vocab, limit)
    if _store(directory, rows, description):
        _delete_earlier_texts(cache_root, description)
    mapped = load_cached(directory, description)  # mapped, the pages are shared with the other processes
    return rows if mapped is None else mapped


def load_cached(directory: Path, description: dict[str, Any]) -> TokenRows | None:
    """The cache in ``directory`` when it is complete and was made from what ``description`` says, else None."""
    try:
        manifest = read_json(directory / MANIFEST_FILE)
        ids, offsets = (_mapped(directory / name) for name in (IDS_FILE, OFFSETS_FILE))
    except (DataError, OSError, ValueError, EOFError):  # missing, truncated or not .npy
        return None
    if not isinstance(manifest, dict) or any(manifest.get(key) != value for key, value in description.items()):
        return None
    if ids.dtype != np.int32 or offsets.dtype != np.int64 or ids.ndim != 1 or manifest.get("rows") != len(offsets) - 1:
        return None
    try:
        return TokenRows(ids, offsets)
    except ValueError:  # offsets that do not fit the ids
        return None


def _mapped(path: Path) -> np.ndarray:
    """A read-only ndarray over the file's pages: a plain view, since slicing the ``np.memmap`` subclass itself costs
    2.9 times as much (its ``__array_finalize__`` on every row a batch takes)."""
    return np.asarray(np.load(path, mmap_mode="r", allow_pickle=False))


def _store(directory: Path, rows: TokenRows, description: dict[str, Any]) -> bool:
    """Write the cache; False where the data directory cannot be written (a read-only copy is read as text) or
    another process renamed its own copy into place at the same moment."""
    with contextlib.suppress(OSError, DataError), atomic_directory(directory) as tmp:  # (DataError: write_json's)
        np.save(tmp / IDS_FILE, rows.ids, allow_pickle=False)
        np.save(tmp / OFFSETS_FILE, rows.offsets, allow_pickle=False)
        write_json(tmp / MANIFEST_FILE, {**description, "rows": len(rows), "tokens": int(rows.offsets[-1]),
                                         "nlgkit_version": __version__})
        return True
    return False


def _delete_earlier_texts(cache_root: Path, description: dict[str, Any]) -> None:
    """Delete the caches of this file's earlier texts (edited in place since). Caches of its current text with
    another vocabulary or limit stay (another recipe may read them), and so does anything without a manifest
    (another process's cache being written). A process still mapping a deleted cache keeps its pages."""
    for directory in cache_root.glob(f"{description['file']}-*"):
        try:
            manifest = read_json(directory / MANIFEST_FILE)
        except (DataError, OSError, ValueError):
            continue
        if (isinstance(manifest, dict) and manifest.get("file") == description["file"]
                and manifest.get("file_sha256") != description["file_sha256"]):
            shutil.rmtree(directory, ignore_errors=True)

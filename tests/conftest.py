"""Shared fixtures: the real data beside the checkout, and small slices of it."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MULTI30K = SHARED / "data" / "multi30k"


SESSION_THREADS = torch.get_num_threads()  # one under `make test` (OMP_NUM_THREADS=1)


@pytest.fixture(autouse=True)
def keep_torch_threads() -> Iterator[None]:
    """Every test ends with torch's intra-op thread count back at the session's. ``make test`` runs one pytest
    worker per core with one thread each; a test or fixture that raised the count (a training's ``num_threads``,
    a speed-up) left every later test of its worker on two threads, competing with the other worker: the suite
    took 9 min instead of 7 when the slow tests happened to follow it."""
    yield
    torch.set_num_threads(SESSION_THREADS)


@pytest.fixture(scope="session")
def multi30k_source() -> Path:
    """The verbatim Multi30K files (task1/raw/*.gz) shipped beside the checkout."""
    if not (MULTI30K / "task1" / "raw" / "train.de.gz").is_file():
        pytest.skip(f"{MULTI30K} not available")
    return MULTI30K


def prepared_once(tmp_path_factory: pytest.TempPathFactory, name: str,
                  prepare: Callable[[Path], dict]) -> tuple[Path, dict]:
    """``prepare(directory)`` once a session: under pytest-xdist (``make test``) by the first worker that needs
    it, and read by the others (spaCy over the whole corpus takes 16 s of a core). Tests only read it (but for the
    runs' binarised ids, `ids/`, which several processes may write at once, each by a rename)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # one process: this session's own directory
        out = tmp_path_factory.mktemp(name) / "multi30k_de-en"
        return out, prepare(out)
    shared = tmp_path_factory.getbasetemp().parent / name  # this session's, beside each worker's own
    out, done = shared / "multi30k_de-en", shared / "manifest.json"
    with FileLock(str(shared) + ".lock"):
        if not done.is_file():
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(json.dumps(prepare(out)), encoding="utf-8")
    return out, json.loads(done.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def paper(tmp_path_factory: pytest.TempPathFactory, multi30k_source: Path) -> tuple[Path, dict]:
    """Multi30K DE-EN in the paper's setting (raw files, spaCy, lowercase, min-freq 2), prepared once."""
    from nlgkit.data.prepare import prepare_multi30k

    return prepared_once(tmp_path_factory, "paper",
                         lambda out: prepare_multi30k(out, "de", "en", source=str(multi30k_source)))


SLICE_PAIRS = 2000


@pytest.fixture(scope="session")
def paper_slice(tmp_path_factory: pytest.TempPathFactory, multi30k_source: Path) -> tuple[Path, dict]:
    """The paper's setting on the first 2,000 training pairs (and the whole validation and test sets): 1,302
    target words instead of 5,893, for tests that train a model until it learns (a tiny model's output layer is
    about half of its training time)."""
    from nlgkit.data.prepare import prepare_multi30k

    def prepare(out: Path) -> dict:
        source = out.parent / "source"
        (source / "task1" / "raw").mkdir(parents=True)
        for split in ("train", "val", "test_2016_flickr"):
            for lang in ("de", "en"):
                with gzip.open(multi30k_source / "task1" / "raw" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as handle:
                    lines = handle.read().splitlines(keepends=True)
                with gzip.open(source / "task1" / "raw" / f"{split}.{lang}.gz", "wt", encoding="utf-8") as handle:
                    handle.writelines(lines[:SLICE_PAIRS] if split == "train" else lines)
        return prepare_multi30k(out, "de", "en", source=str(source))

    return prepared_once(tmp_path_factory, "paper_slice", prepare)

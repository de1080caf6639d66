"""Word vectors trained on a tokenised corpus (``nlgkit embed train``), as Hirasawa & Komachi (2019, §5.1)
trained theirs on Wikipedia: 300 dimensions; word2vec CBOW with window 10, 10 negative samples, minimum
count 10; GloVe with window 10, minimum count 10; fastText CBOW with window 5, 10 negative samples and
character n-grams of 3 to 5 (their "n-gram of 5"). Other settings are the tools' defaults (5 epochs for
word2vec and fastText, fastText's minimum count 5, GloVe's 25 iterations).

word2vec and fastText run in gensim; with one worker and a seed the vectors are the same on every run.
GloVe runs in Stanford's C implementation through ``glovpy`` when it is installed and built (fast, not
reproducible), else in ``mittens`` (NumPy, full-batch AdaGrad on the dense co-occurrence matrix, initialised
from the seed: the same vectors on every run on one machine (NumPy's matrix products may round differently
on another CPU: a German table of 6,128 words came out with another checksum on a second AMD EPYC machine, its
English one the same), but V × V matrices, so a vocabulary past ~12,000 words is refused, see
:data:`MITTENS_MAX_BYTES`). Co-occurrences are GloVe's: symmetric, weighted 1/d at distance d ≤ window, after
words under the minimum count are dropped from the sentence.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import atomic_write, read_lines, require_readable
from nlgkit.data.download import download, is_url
from nlgkit.data.tokenize import load_pipeline
from nlgkit.wordvectors.sources import fasttext_model_path
from nlgkit.wordvectors.tables import save_table

GZIP_MAGIC = b"\x1f\x8b"

TRAIN_METHODS = ("word2vec", "fasttext", "glove")
GLOVE_BACKENDS = ("auto", "mittens", "glovpy")
# The paper's settings per method (None: not an option of that method)
PAPER: dict[str, dict[str, int | None]] = {
    "word2vec": {"window": 10, "negative": 10, "min_count": 10, "epochs": 5},
    "fasttext": {"window": 5, "negative": 10, "min_count": 5, "epochs": 5},
    "glove": {"window": 10, "negative": None, "min_count": 10, "epochs": 25},
}
MITTENS_MAX_BYTES = 8 * 2**30  # mittens keeps ~7 dense V × V float64 matrices
GLOVPY_BUILD = Path.home() / ".glopy" / "build"  # where glovpy compiles Stanford's GloVe on its first import


@dataclass(frozen=True)
class TrainSettings:
    """``nlgkit embed train``'s options; None takes the paper's value for the method (:data:`PAPER`)."""

    method: str
    dim: int = 300
    window: int | None = None
    min_count: int | None = None
    negative: int | None = None
    epochs: int | None = None
    seed: int = 1
    workers: int = 1
    buckets: int = 2_000_000  # fastText's hash buckets for character n-grams (its default)
    glove_backend: str = "auto"

    def resolved(self) -> TrainSettings:
        """These settings with the paper's values filled in, checked."""
        if self.method not in TRAIN_METHODS:
            raise ConfigError(f"--method {self.method!r}: expected {', '.join(TRAIN_METHODS)}")
        if self.glove_backend not in GLOVE_BACKENDS:
            raise ConfigError(f"--glove-backend {self.glove_backend!r}: expected {', '.join(GLOVE_BACKENDS)}")
        paper = PAPER[self.method]
        defaults: dict[str, Any] = {key: value for key, value in paper.items() if getattr(self, key) is None}
        filled = replace(self, **defaults)
        for key in ("dim", "window", "min_count", "epochs", "workers"):
            if getattr(filled, key) < 1:
                raise ConfigError(f"--{key.replace('_', '-')} {getattr(filled, key)}: must be at least 1")
        if filled.negative is not None and filled.negative < 1:
            raise ConfigError(f"--negative {filled.negative}: must be at least 1")
        return filled


@dataclass(frozen=True)
class Trained:
    """Trained vectors: ``vectors`` (V, dim) for ``words`` (most frequent first); for fastText, the gensim
    model whose character n-grams give vectors to other words."""

    words: list[str]
    vectors: Tensor
    backend: str
    model: Any = None


class Sentences:
    """The corpus files as token lists, re-read on every pass (gensim iterates once per epoch): whitespace-
    tokenised UTF-8 text, one sentence per line, gzip allowed; errors name the file and line."""

    def __init__(self, files: Sequence[Path]) -> None:
        if not files:
            raise ConfigError("--corpus: give at least one corpus file")
        for path in files:
            if not Path(path).is_file():
                raise DataError(f"{path}: file not found")
        self.files = [Path(path) for path in files]

    def __iter__(self) -> Iterator[list[str]]:
        for path in self.files:
            for line in read_lines(path):
                tokens = line.split()
                if tokens:
                    yield tokens


def fetch_corpus(sources: Sequence[str], download_dir: Path) -> list[Path]:
    """The corpus files: each source is a file, or an http(s) URL downloaded once into ``download_dir`` (kept under
    its host and path, so a second run reads the copy)."""
    files = []
    for source in sources:
        if is_url(source):
            host, _, path = source.split("://", 1)[1].partition("/")
            local = download_dir / host / path
            files.append(local if local.is_file() else download(source, local))
        else:
            files.append(Path(source))
    return files


def spool_streams(files: Sequence[Path], into: Path) -> list[Path]:
    """The corpus files with each pipe (bash's ``<(…)``, ``/dev/stdin``) copied into ``into`` first, so that
    ``embed train --corpus <(zcat …)`` works: every backend reads its corpus once per pass, a pipe only once. A
    piped gzip stream is kept gzipped (its magic bytes say so) and read as a ``.gz`` file is."""
    spooled = []
    for number, path in enumerate(files):
        require_readable(path)
        if Path(path).is_file():
            spooled.append(Path(path))
            continue
        with open(path, "rb") as source:
            head = source.read(2)
            copy = into / f"stream{number}.txt{'.gz' if head == GZIP_MAGIC else ''}"
            with open(copy, "wb") as target:
                target.write(head)
                shutil.copyfileobj(source, target)
        spooled.append(copy)
    return spooled


def tokenize_corpus(files: Sequence[Path], data_dir: Path, lang: str, into: Path,
                    log: Callable[[str], None] | None = None) -> list[Path]:
    """Raw text files rewritten into ``into`` as the tokens a model trained on ``data_dir`` reads in ``lang``
    (its tokenizer, lowercasing and subword units: the same pipeline as its ``train.LANG``), so the vectors are
    for exactly the units of its vocabulary."""
    pipeline = load_pipeline(data_dir, lang)
    if log:
        log(f"tokenising {len(files)} file(s) as {data_dir}'s {lang} side ({pipeline!r})")
    written = []
    for number, path in enumerate(files):
        lines = read_lines(path)
        out = into / f"{number}.{lang}"
        with atomic_write(out) as handle:
            for tokens in pipeline.tokenize_many(lines):
                handle.write(" ".join(pipeline.segment(tokens)) + "\n")
        written.append(out)
    return written


def train_vectors(files: Sequence[Path], settings: TrainSettings, corpus_name: str = "") -> Trained:
    """Train ``settings.method`` on the corpus ``files`` (``corpus_name``: what errors call it, when ``files`` are
    scratch copies of the user's files)."""
    settings = settings.resolved()
    sentences = Sentences(files)
    counts: Counter[str] = Counter()
    for tokens in sentences:
        counts.update(tokens)
    min_count = settings.min_count or 1
    kept = sum(1 for count in counts.values() if count >= min_count)
    if not kept:
        raise DataError(f"{corpus_name or files[0]}: no word occurs {min_count} times in the corpus (lower "
                        "--min-count)")
    if settings.method == "glove":
        return _train_glove(sentences, counts, settings)
    return _train_gensim(sentences, settings)


def _train_gensim(sentences: Sentences, s: TrainSettings) -> Trained:
    """word2vec or fastText CBOW (``sg=0``) in gensim."""
    from gensim.models import FastText, Word2Vec  # lazy: gensim loads scipy

    common = {"vector_size": s.dim, "window": s.window, "min_count": s.min_count, "negative": s.negative, "sg": 0,
              "epochs": s.epochs, "seed": s.seed, "workers": s.workers}
    if s.method == "fasttext":
        model: Any = FastText(sentences=sentences, min_n=3, max_n=5, bucket=s.buckets, **common)
    else:
        model = Word2Vec(sentences=sentences, **common)
    words = list(model.wv.index_to_key)
    return Trained(words, torch.from_numpy(np.array(model.wv.vectors, dtype=np.float32)), f"gensim {s.method}",
                   model if s.method == "fasttext" else None)


def cooccurrences(sentences: Sentences, index: dict[str, int], window: int) -> np.ndarray:
    """GloVe's symmetric co-occurrence counts (V, V) float64: 1/d for two words d ≤ ``window`` apart, counted
    among the words of ``index`` (the others are dropped from the sentence first)."""
    from scipy.sparse import coo_matrix  # lazy: scipy is slow to import

    ids: list[int] = []
    sentence_of: list[int] = []
    for number, tokens in enumerate(sentences):
        kept = [index[token] for token in tokens if token in index]
        ids += kept
        sentence_of += [number] * len(kept)
    flat, sentence = np.array(ids, dtype=np.int64), np.array(sentence_of, dtype=np.int64)
    size = len(index)
    total = coo_matrix((size, size), dtype=np.float64).tocsr()
    for distance in range(1, window + 1):
        same = sentence[distance:] == sentence[:-distance]  # pairs d apart inside one sentence
        left, right = flat[:-distance][same], flat[distance:][same]
        weight = np.full(left.size, 1.0 / distance)
        total = total + coo_matrix((weight, (left, right)), shape=(size, size)).tocsr()
    return (total + total.T).toarray()


def _glovpy_missing() -> str | None:
    """Why glovpy cannot run here, or None when it can (checked without importing it: its import clones and
    compiles Stanford's GloVe when the build is missing)."""
    if importlib.util.find_spec("glovpy") is None:
        return "glovpy is not installed (pip install glovpy)"
    missing = [tool for tool in ("vocab_count", "cooccur", "shuffle", "glove") if not (GLOVPY_BUILD / tool).is_file()]
    if missing:
        return (f"glovpy has not built Stanford's GloVe ({', '.join(missing)} missing from {GLOVPY_BUILD}; its first "
                "import builds it, which needs git, make, a C compiler and the network)")
    return None


def _train_glove(sentences: Sentences, counts: Counter[str], s: TrainSettings) -> Trained:
    backend = s.glove_backend
    if backend == "auto":
        backend = "mittens" if _glovpy_missing() else "glovpy"
    if backend == "glovpy":
        reason = _glovpy_missing()
        if reason:
            raise ConfigError(f"--glove-backend glovpy: {reason}")
        return _train_glovpy(sentences, s)
    words = sorted((word for word, count in counts.items() if count >= (s.min_count or 1)),
                   key=lambda word: (-counts[word], word))
    need = 7 * 8 * len(words) ** 2
    if need > MITTENS_MAX_BYTES:
        raise ConfigError(f"--method glove: {len(words):,} words need ~{need / 2**30:.0f} GiB of dense matrices in "
                          "mittens; raise --min-count, or install glovpy (--glove-backend glovpy)")
    try:
        from mittens.np_mittens import GloVe  # lazy: an optional extra (`pip install nlgkit[embeddings]`)
    except ImportError:
        raise ConfigError("--method glove: mittens is not installed (pip install mittens, or the `embeddings` "
                          "extra)") from None
    matrix = cooccurrences(sentences, {word: i for i, word in enumerate(words)}, s.window or 10)
    rng = np.random.default_rng(s.seed)  # mittens would draw from the global NumPy state, reseeded from the OS
    bound = np.sqrt(6.0 / (len(words) + s.dim))  # mittens' Glorot-uniform initialisation
    start = {"W": rng.uniform(-bound, bound, (len(words), s.dim)), "C": rng.uniform(-bound, bound, (len(words), s.dim)),
             "bw": rng.uniform(-bound, bound, (len(words), 1)), "bc": rng.uniform(-bound, bound, (len(words), 1))}
    model = GloVe(n=s.dim, max_iter=s.epochs or 25, display_progress=0, test_mode=True)  # test mode: take `start`
    vectors = model.fit(matrix, fixed_initialization=start)  # W + C, as GloVe's own `-model 2`
    return Trained(words, torch.from_numpy(np.asarray(vectors, dtype=np.float32)), "mittens")


def _train_glovpy(sentences: Sentences, s: TrainSettings) -> Trained:
    """Stanford's C GloVe through glovpy (multi-threaded; not reproducible run to run)."""
    try:
        from glovpy import GloVe  # lazy: optional, and its import may build GloVe
        model = GloVe(vector_size=s.dim, window_size=s.window, min_count=s.min_count, iter=s.epochs,
                      threads=s.workers)
        model.train(list(sentences))
        kv = model.wv
    except Exception as exc:  # noqa: BLE001 — any failure of the external tool is reported on one line
        raise ConfigError(f"--glove-backend glovpy failed: {type(exc).__name__}: {exc}") from None
    words = [word for word in kv.index_to_key if word != "<unk>"]  # GloVe appends an <unk> vector of its own
    vectors = np.stack([kv[word] for word in words]).astype(np.float32)
    return Trained(words, torch.from_numpy(vectors), "glovpy")


def save_trained(output: Path, trained: Trained) -> list[Path]:
    """Write the table (kind ``trained``) and, for fastText, its model as ``NAME.fasttext.bin`` in Facebook's
    format beside it (so that other words get vectors from their n-grams); returns the files written."""
    save_table(output, trained.vectors, trained.words, kind="trained")
    written = [output]
    model_path = fasttext_model_path(output)
    if trained.model is not None:
        from gensim.models.fasttext import save_facebook_model  # lazy: gensim loads scipy

        tmp = model_path.with_name(f".{model_path.name}.tmp")
        save_facebook_model(trained.model, str(tmp))
        tmp.replace(model_path)
        written.append(model_path)
    elif model_path.exists():  # a table rewritten from another method must not pick up a stale model
        model_path.unlink()
    return written

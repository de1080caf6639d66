"""The word-similarity benchmarks of Shalev et al.'s Table 4 (SimLex-999, MEN, MTurk-771): found, downloaded,
checked and written where the analyses read them (``nlgkit prepare wordsim``).

The files are those github.com/mfaruqui/eval-word-vectors distributes in ``data/word-sim/``: one
``word1<TAB>word2<TAB>human score`` pair per line. The folder is built beside the old one and swapped in once every
file has parsed, so a truncated download or an HTML error page never lands in it. No torch here: the CLI's help
names the benchmarks.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nlgkit.core.errors import DataError
from nlgkit.core.io import decode_lines, read_lines, sha256_file, write_json
from nlgkit.data.download import download, is_url, shared_copy
from nlgkit.data.prepare import staging

BENCHMARKS: dict[str, str] = {
    "simlex999": "EN-SIMLEX-999.txt",
    "men": "EN-MEN-TR-3k.txt",
    "mturk771": "EN-MTurk-771.txt",
}
PUBLISHED_PAIRS = {"simlex999": 999, "men": 3000, "mturk771": 771}
"""Pairs in each published file: another count means another version of the benchmark (a warning)."""
DEFAULT_URL = "https://raw.githubusercontent.com/mfaruqui/eval-word-vectors/master/data/word-sim/"
PREPARED_DIR = Path("data") / "wordsim"
SHARED_DIR = Path("..") / "shared" / "data" / "wordsim"

Pair = tuple[str, str, float]


def _holds_all(folder: Path) -> bool:
    return all((folder / file).is_file() for file in BENCHMARKS.values())


def _shared_copy() -> Path | None:
    """``../shared/data/wordsim`` beside the checkout or the working directory, when it holds every file."""
    return shared_copy(SHARED_DIR, _holds_all)


def default_dir() -> Path:
    """Where the analyses read the benchmarks unless told: ``data/wordsim`` (what ``prepare wordsim`` writes) when
    it holds them, else a shared copy beside the checkout, else ``data/wordsim`` (whose absence is then named)."""
    if _holds_all(PREPARED_DIR):
        return PREPARED_DIR
    return _shared_copy() or PREPARED_DIR


def default_source() -> str:
    """The shared copy beside the checkout when there is one, else the public repository."""
    shared = _shared_copy()
    return str(shared) if shared is not None else DEFAULT_URL


def parse_pairs(lines: Sequence[str], name: str) -> list[Pair]:
    """``word1<TAB>word2<TAB>score`` lines (blank lines skipped); a malformed line is a DataError naming it."""
    pairs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            fields = line.split()  # tolerate space-separated copies of the same files
        try:
            left, right, score = fields
            pairs.append((left, right, float(score)))
        except ValueError:
            raise DataError(f"{name}: line {number}: expected 'word1<TAB>word2<TAB>score', got {line!r}") from None
    if not pairs:
        raise DataError(f"{name}: no word pairs")
    return pairs


def read_benchmark(path: Path) -> list[Pair]:
    """The pairs of one benchmark file (see :func:`parse_pairs`)."""
    return parse_pairs(read_lines(path), str(path))


def prepare_wordsim(out: Path, source: str = "", log: Callable[[str], None] = print) -> dict[str, Any]:
    """Copy (a directory ``source``) or download (a URL base; default :func:`default_source`) every benchmark into
    ``out`` with Unix line ends; ``out/manifest.json`` names the source and each file's pairs and SHA-256. The
    folder is built beside ``out`` and swapped in whole once every file has parsed, as every ``prepare`` does.
    Return the manifest."""
    source = source or default_source()
    local = None if is_url(source) else Path(source).expanduser()
    if local is not None and not local.is_dir():
        raise DataError(f"{source}: word-similarity source folder not found (give a folder or an http(s) URL)")
    if local is not None and (missing := [file for file in BENCHMARKS.values() if not (local / file).is_file()]):
        raise DataError(f"{source}: no {' or '.join(missing)} here (a source folder holds the "
                        f"{len(BENCHMARKS)} files of mfaruqui/eval-word-vectors' data/word-sim)")
    files = {}
    with staging(Path(out)) as tmp, tempfile.TemporaryDirectory(prefix="nlgkit-wordsim-") as downloads:
        for name, file in BENCHMARKS.items():
            if local is None:
                where = source.rstrip("/") + "/" + file
                log(f"downloading {where}")
                path = download(where, Path(downloads) / file)
            else:
                path = local / file
                where = str(path)
            lines = decode_lines(path.read_bytes(), where)  # (errors name the URL, not the download's file)
            pairs = parse_pairs(lines, where)
            if len(pairs) != PUBLISHED_PAIRS[name]:
                log(f"warning: {where}: {len(pairs)} pairs, not the published file's {PUBLISHED_PAIRS[name]}")
            (tmp / file).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            files[name] = {"file": file, "pairs": len(pairs), "sha256": sha256_file(tmp / file)}
        manifest = {"corpus": "wordsim", "source": source, "files": files}
        write_json(tmp / "manifest.json", manifest)
    return manifest

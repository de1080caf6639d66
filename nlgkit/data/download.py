"""Locate or download the raw Multi30K task-1 files.

A source is a directory (a Multi30K checkout, its ``task1/raw`` folder, or any folder holding the
``{split}.{lang}.gz`` files) or a URL base. With no source, the copy beside the checkout
(``../shared/data/multi30k``) is used when present, otherwise the dataset's public repository.
Downloads go to a temporary file that is renamed into place, so an interrupted download never looks done.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from nlgkit.core.errors import DataError

DEFAULT_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
SHARED_DIR = Path("..") / "shared" / "data" / "multi30k"
SPLIT_FILES = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
MULTI30K_LANGS = ("en", "de", "fr", "cs")
TIMEOUT_S = 60


def is_url(source: str) -> bool:
    return source.split("://", 1)[0].lower() in ("http", "https", "file") and "://" in source


def shared_copy(relative: Path, holds: Callable[[Path], bool]) -> Path | None:
    """The folder ``relative`` (e.g. ``../shared/data/multi30k``) beside the checkout or the working directory,
    the first that ``holds`` what is wanted; None when neither does."""
    repo_root = Path(__file__).resolve().parents[2]
    candidates = ((base / relative).resolve() for base in (repo_root, Path.cwd()))
    return next((candidate for candidate in candidates if holds(candidate)), None)


def default_source() -> str:
    """The shared copy beside the repository (or the current directory) when it exists, else the URL."""
    shared = shared_copy(SHARED_DIR, lambda folder: (folder / "task1" / "raw").is_dir())
    return str(shared) if shared is not None else DEFAULT_URL


def raw_name(split: str, lang: str) -> str:
    """A split's file name in the dataset repository: ``val.de.gz``, ``test_2016_flickr.de.gz``, ..."""
    return f"{SPLIT_FILES[split]}.{lang}.gz"


def _raw_dir(source: Path) -> Path:
    """Accept the dataset root, its ``data`` folder, or the folder holding the files."""
    for candidate in (source / "task1" / "raw", source / "data" / "task1" / "raw", source):
        if any(candidate.glob("train.*.gz")):
            return candidate
    return source / "task1" / "raw"


def download(url: str, dest: Path) -> Path:
    """Fetch ``url`` to ``dest`` atomically; any failure is a DataError naming the URL."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            shutil.copyfileobj(response, out)
        os.replace(tmp, dest)
    except urllib.error.HTTPError as exc:
        raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise DataError(f"{url}: download failed ({exc.reason})") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{url}: download failed ({exc})") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return dest


def fetch_multi30k(source: str, langs: tuple[str, ...], download_dir: Path) -> dict[str, dict[str, Path]]:
    """Return ``{split: {lang: path}}`` of the raw gzipped files.

    Directory sources are used in place; URL sources are downloaded into ``download_dir``.
    """
    for lang in langs:
        if lang not in MULTI30K_LANGS:
            raise DataError(f"Multi30K has no language {lang!r} (available: {', '.join(MULTI30K_LANGS)})")
    source = source or default_source()
    out: dict[str, dict[str, Path]] = {split: {} for split in SPLIT_FILES}
    if is_url(source):
        base = source if source.endswith("/") else source + "/"
        for split in SPLIT_FILES:
            for lang in langs:
                name = raw_name(split, lang)
                out[split][lang] = download(base + name, Path(download_dir) / name)
        return out
    root = Path(source).expanduser()
    if not root.is_dir():
        raise DataError(f"{root}: Multi30K source directory not found (give a directory or an http(s) URL)")
    raw = _raw_dir(root)
    for split in SPLIT_FILES:
        for lang in langs:
            path = raw / raw_name(split, lang)
            if not path.is_file():
                raise DataError(f"{path}: file not found in Multi30K source {root}")
            out[split][lang] = path
    return out

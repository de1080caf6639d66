"""Fetch a corpus archive once, resuming an interrupted download, and read files out of it.

Big corpora (WMT-14's training archives are hundreds of megabytes each) come as ``.tgz`` archives. They are
downloaded into a cache directory (``data/downloads`` by default), shared by every ``prepare`` that needs them:

* a download writes ``NAME.part`` and renames it to ``NAME`` only once it is complete and verified (the byte
  count the server announced, and the gzip stream read to its end with its CRC checked), so a file called
  ``NAME`` is always whole;
* an interrupted download keeps its ``NAME.part``; the next run asks the server for the rest (an HTTP
  ``Range`` request) and appends it, or starts again when the server cannot resume;
* a mirror (a base URL or a local directory holding the archives by name) replaces the public URLs, which is
  how the tests serve small stand-ins from 127.0.0.1.

Members are read by name, never extracted with the archive's own paths, so an archive cannot write outside
the directory it is given.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import tarfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from nlgkit.core.errors import DataError
from nlgkit.data.download import is_url

DEFAULT_CACHE = Path("data") / "downloads"
TIMEOUT_S = 60
CHUNK = 1 << 20


def locate_archive(url: str, mirror: str, cache_dir: Path,
                   log: Callable[[str], None] | None = None) -> tuple[Path, str]:
    """The local path of the archive ``url`` names, and where it came from.

    ``mirror`` = "": download ``url``; a URL base: download ``mirror/NAME``; a directory: use ``DIR/NAME`` in
    place. Downloads land in ``cache_dir`` and are reused by later runs.
    """
    name = url.rstrip("/").rsplit("/", 1)[-1]
    if mirror and not is_url(mirror):
        path = Path(mirror).expanduser() / name
        if not path.is_file():
            raise DataError(f"{path}: archive not found in the mirror directory {mirror}")
        return path, str(path.resolve())
    where = mirror.rstrip("/") + "/" + name if mirror else url
    return download_resumable(where, Path(cache_dir) / name, log), where


def download_resumable(url: str, dest: Path, log: Callable[[str], None] | None = None) -> Path:
    """Fetch ``url`` to ``dest`` (kept if already there), resuming ``dest.part``; verified before the rename."""
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    if log:
        log(f"downloading {url}" + (f" (resuming after {have:,} bytes)" if have else ""))
    try:
        total = _fetch(url, part, have)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the partial file is not a prefix the server knows: start again
            part.unlink()
            return download_resumable(url, dest, log)
        raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise DataError(f"{url}: download failed ({exc.reason}); run again to resume") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{url}: download failed ({exc}); run again to resume") from None
    size = part.stat().st_size
    if total is not None and size != total:
        raise DataError(f"{url}: download incomplete ({size:,} of {total:,} bytes); run again to resume")
    try:
        verify_gzip(part, url)
    except DataError:
        part.unlink()  # complete but corrupt: resuming it would not help
        raise
    os.replace(part, dest)
    return dest


def _fetch(url: str, part: Path, have: int) -> int | None:
    """Append the bytes after ``have`` to ``part`` (or rewrite it when the server sends everything); return the
    full size the server announced, if it did."""
    headers = {"Range": f"bytes={have}-"} if have else {}
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        resumed = have > 0 and response.status == 206
        total: int | None = None
        if resumed:
            match = re.fullmatch(r"bytes (\d+)-\d+/(\d+|\*)", response.headers.get("Content-Range", "").strip())
            if not match or int(match.group(1)) != have:
                raise ValueError(f"unexpected Content-Range {response.headers.get('Content-Range')!r}")
            total = None if match.group(2) == "*" else int(match.group(2))
        length = response.headers.get("Content-Length")
        if total is None and length is not None and length.isdigit():
            total = (have if resumed else 0) + int(length)
        with open(part, "ab" if resumed else "wb") as out:
            shutil.copyfileobj(response, out, CHUNK)
    return total


def verify_gzip(path: Path, name: str) -> None:
    """Read the whole gzip stream: a truncated or corrupted archive fails here, before anything trusts it."""
    try:
        with gzip.open(path, "rb") as stream:
            while stream.read(CHUNK):
                pass
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{name}: not a complete .tgz archive ({' '.join(str(exc).split())})") from None


def _scan(archive: Path, wanted: Mapping[str, str], take: Callable[[str, IO[bytes]], None]) -> None:
    """One pass over ``archive``: ``take(key, stream)`` for each wanted member (key → member path, matched at
    the end of the archive's names); every key must match exactly one regular file."""
    seen: dict[str, str] = {}
    try:
        with tarfile.open(archive, "r|*") as tar:  # a stream: big archives are read once, never seeked
            for member in tar:
                if not member.isfile():
                    continue
                for key, suffix in wanted.items():
                    if member.name == suffix or member.name.endswith("/" + suffix):
                        if key in seen:
                            raise DataError(f"{archive}: two files end in {suffix} ({seen[key]}, {member.name})")
                        seen[key] = member.name
                        handle = tar.extractfile(member)
                        assert handle is not None  # a regular file always has contents
                        take(key, handle)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{archive}: not a readable tar archive ({' '.join(str(exc).split())})") from None
    for key, suffix in wanted.items():
        if key not in seen:
            raise DataError(f"{archive}: has no file {suffix}")


def read_members(archive: Path, wanted: Mapping[str, str]) -> dict[str, bytes]:
    """The bytes of each wanted member (for files small enough to hold in memory)."""
    out: dict[str, bytes] = {}
    _scan(archive, wanted, lambda key, stream: out.__setitem__(key, stream.read()))
    return out


def extract_members(archive: Path, wanted: Mapping[str, str], dest_dir: Path) -> dict[str, Path]:
    """Copy each wanted member to ``dest_dir/KEY`` (streamed: members may be larger than memory)."""
    dest_dir.mkdir(parents=True, exist_ok=True)

    def take(key: str, stream: IO[bytes]) -> None:
        target = dest_dir / key
        with open(target, "wb") as out_file:
            while chunk := stream.read(CHUNK):  # a read error is the archive's (reported by _scan) ...
                try:
                    out_file.write(chunk)
                except OSError as exc:  # ... a write error is the destination's
                    raise DataError(f"{target}: cannot write ({exc.strerror})") from None

    _scan(archive, wanted, take)
    return {key: dest_dir / key for key in wanted}

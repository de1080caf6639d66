"""File helpers shared by every command: atomic writes and strict UTF-8 reading.

Outputs are written to a temporary file in the same directory and renamed into place, so a crash or a
bad input never leaves a half-written file behind.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import gzip
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TextIO

from nlgkit.core.errors import DataError


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path``; rename it over ``path`` only if the block succeeds.

    A stream or descriptor (``/dev/stdout``, ``/dev/null``, a named pipe, bash's ``>(…)``: :func:`written_in_place`)
    is written in place: renaming a file over it would replace the device, pipe or link itself, and its reader would
    get nothing. A symbolic link to a file is followed: the file it names is replaced, and the link stays.

    A write the output refuses (a full disk or quota, an I/O error: :func:`refused_write`), in the block or as the
    file is flushed and closed, is a DataError naming ``path``: "``path``: cannot be written (No space left on
    device)"; the temporary file is removed and ``path`` left as it was."""
    path = Path(path)
    if written_in_place(path):
        descriptor = own_descriptor(path)  # /dev/stdout: through fd 1 itself, whose offset the shell shares
        target: int | Path = os.dup(descriptor) if descriptor is not None else path
        try:
            with open(target, mode, encoding=None if "b" in mode else encoding) as stream:
                yield stream
        except OSError as exc:
            if refused_write(exc):
                raise _unwritable(path, exc) from None
            raise
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _unwritable(path, exc) from None
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual permissions
    binary = "b" in mode
    block_done = False  # past the caller's block, every OSError is the output's own (flush, fsync, close)
    try:
        try:
            with os.fdopen(fd, mode, encoding=None if binary else encoding) as handle:
                yield handle
                block_done = True
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            if block_done or refused_write(exc):
                raise _unwritable(path, exc) from None
            raise
        try:
            os.replace(tmp, path)
        except OSError as exc:  # e.g. a directory of that name
            raise _unwritable(path, exc) from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# What a device answers to a write it cannot take (a full disk or quota, a file over its size limit, an I/O error).
# An OSError that names a file is not one: it came from opening or reading that file, and names it already.
_REFUSED_WRITES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def refused_write(exc: BaseException) -> bool:
    """Whether ``exc`` is a write refused by the file being written (see ``_REFUSED_WRITES``), not an error of
    another file."""
    return isinstance(exc, OSError) and exc.filename is None and exc.errno in _REFUSED_WRITES


# the words that name a standard stream in messages
STREAM_NAMES = {"stdin": "standard input", "stdout": "standard output"}


def standard_stream(which: str) -> TextIO:
    """``sys.stdin`` or ``sys.stdout`` (``which``: "stdin", "stdout"); a DataError saying so where the process
    started with it closed (``<&-``, ``>&-``: Python then sets it to None)."""
    stream = getattr(sys, which)
    if stream is None:
        raise closed_stream(which)
    return stream


def closed_stream(which: str) -> DataError:
    """The error for reading or writing a standard stream (``which``: "stdin", "stdout") that the process started
    with closed: "standard output: closed", whether a library call (:func:`standard_stream`) or the command line's
    stand-in stream (``nlgkit.cli.common.ClosedStream``) finds it."""
    return DataError(f"{STREAM_NAMES[which]}: closed")


@contextlib.contextmanager
def naming_write_errors(name: str) -> Iterator[None]:
    """Inside, a failed write to the stream ``name`` (e.g. "standard output" on a full disk) is a DataError
    "``name``: cannot be written (why)", not an errno without a name. A closed pipe stays a BrokenPipeError: its
    reader stopped reading, which is not an error (``nlgkit … | head``)."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise DataError(f"{name}: cannot be written ({exc.strerror or exc})") from None


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield an empty temporary sibling of ``path``; swap it in by renames if the block succeeds, delete it if
    not, so a reader finds the old directory or the complete new one, never a half-written one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
        yield tmp
        old = tmp.with_suffix(".old")
        if path.exists():
            os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _unwritable(path: Path, exc: OSError) -> DataError:
    """The error for an output that cannot be written, naming the output (not its temporary sibling)."""
    return DataError(f"{path}: cannot be written ({_why_unwritable(path) or exc.strerror or exc})")


_DESCRIPTOR = re.compile(r"/(?:proc/self|dev)/fd/(\d+)")


def _names(path: str | Path) -> list[str]:
    """``path`` made absolute, and the target of the link it is (``/dev/stdout`` → ``/proc/self/fd/1``)."""
    absolute = os.path.abspath(path)
    if not os.path.islink(absolute):
        return [absolute]
    return [absolute, os.path.normpath(os.path.join(os.path.dirname(absolute), os.readlink(absolute)))]


def own_descriptor(path: str | Path) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/3``, ``/proc/self/fd/1``),
    else None."""
    found = (_DESCRIPTOR.fullmatch(name) for name in _names(path))
    return next((int(match.group(1)) for match in found if match), None)


def written_in_place(path: str | Path) -> bool:
    """Whether ``path`` is a stream to write into, never a file to replace: one of the process's descriptors
    (which may be a regular file: the link, not that file, is what a rename would replace), or a character device
    or a pipe (``/dev/null``, a named pipe), or a link to one."""
    if own_descriptor(path) is not None or any(name.startswith("/proc/") for name in _names(path)):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _why_unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written as a file, where that can be seen without writing it (None: no reason seen)."""
    if written_in_place(path):
        return None if not path.exists() or os.access(path, os.W_OK) else "no permission to write to it"
    if path.is_dir():
        return "it is a directory"
    folder = next((parent for parent in path.parents if parent.exists()), Path("."))  # the nearest that exists
    if not folder.is_dir():
        return f"{folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"no permission to write in {folder}"
    return None


def check_output(output: str | Path | None, inputs: Iterable[tuple[str, str | Path | None]] = ()) -> None:
    """Fail before any work, not after it, where ``output`` cannot be written (a directory of that name, a file
    where one of its folders should be, a folder without write permission) or is one of the command's ``inputs``
    (pairs of what names the input, e.g. ``--input``, and its path), by any name or link: written atomically, the
    output would replace that input once the command ended, and the input would be lost. ``-`` and None (standard
    streams, options not given) are never written or the same file, and a stream (:func:`written_in_place`)
    replaces nothing."""
    if output is None or str(output) == "-":
        return
    if (reason := _why_unwritable(Path(output))) is not None:
        raise DataError(f"{output}: cannot be written ({reason})")
    if written_in_place(output):  # (it replaces nothing: --input /dev/stdin --output /dev/stdout)
        return
    for option, path in inputs:
        if path is None or str(path) == "-":
            continue
        try:
            same = os.path.samefile(output, path)
        except OSError:  # one of them does not exist (yet): not the same file
            continue
        if same:
            raise DataError(f"{output}: also given as {option}; writing the output there would replace that input "
                            "(write it to another file)")


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def write_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_write(path) as handle:
        json.dump(obj, handle, indent=2, ensure_ascii=False, sort_keys=False)
        handle.write("\n")


def require_readable(path: str | Path, what: str = "file") -> None:
    """A DataError naming ``path`` unless it can be read as a stream of bytes: a regular file, or a pipe or
    terminal such as bash's ``<(…)`` (``/dev/fd/N``) or ``/dev/stdin``, which ``Path.is_file()`` would refuse, so that
    ``nlgkit evaluate --hyp <(sed … hyp) --ref ref`` reads the pipe as sacrebleu does. ``what`` names the file's
    role in the message (e.g. "phrase table")."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DataError(f"{path}: {what} not found") from None
    except OSError as exc:  # a permission denied on a folder above it, a name too long, …
        raise DataError(f"{path}: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise DataError(f"{path}: a directory, not {_article(what)} {what}")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        raise DataError(f"{path}: not {_article(what)} {what} (a socket or a block device)")


def require_file(path: str | Path, what: str = "file") -> None:
    """A DataError naming ``path`` unless it is a regular file (or a link to one), for a reader that opens it more
    than once or seeks in it, which a pipe would not allow: "…: a directory, not a file" for a folder (never
    "file not found", the message of a path that does not exist), as :func:`require_readable` says it."""
    require_readable(path, what)
    if not os.path.isfile(path):
        raise DataError(f"{path}: a pipe or a device, where {_article(what)} {what} is needed")


def _article(noun: str) -> str:
    """"an" before a vowel ("an image list"), else "a"."""
    return "an" if noun[:1].lower() in "aeiou" else "a"


def read_json(path: str | Path) -> Any:
    path = Path(path)
    require_readable(path)  # (a directory is named as one, not as a file not found)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None


def read_lines(path: str | Path) -> list[str]:
    """Read a UTF-8 text file (optionally gzipped) or a pipe into lines without their newline.

    Undecodable bytes are an error naming the file and line, not a silent replacement.
    """
    path = Path(path)
    require_readable(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        try:
            raw = handle.read()
        except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt .gz, not gzip at all, an I/O error
            raise unreadable(path, exc) from None
    return decode_lines(raw, str(path))


def unreadable(path: str | Path, exc: BaseException) -> DataError:
    """The error for an input whose bytes cannot be read, naming it: "in.gz: unreadable (Compressed file ended
    before the end-of-stream marker was reached)" for a truncated gzip file (an EOFError), "… (Not a gzipped file
    (b'ei'))" for a ``.gz`` that is not one, a zlib error for corrupt data, an I/O error's reason."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    return DataError(f"{path}: unreadable ({' '.join(reason.split())})")


def decode_lines(raw: bytes, name: str, on_invalid: Callable[[int], None] | None = None) -> list[str]:
    """Split bytes into lines and decode each as UTF-8.

    Strict by default: an undecodable line is an error naming ``name`` and the line. With ``on_invalid``,
    bad bytes become U+FFFD and ``on_invalid(line_number)`` is called instead (keeps line alignment). A byte-order
    mark at the start is dropped.
    """
    raw = raw.removeprefix(codecs.BOM_UTF8)  # (Notepad's mark of UTF-8, not text: it would join the first word)
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            if on_invalid is None:
                raise DataError(_not_utf8(name, number, exc)) from None
            on_invalid(number)
            text = line.decode("utf-8", errors="replace")
        out.append(text.rstrip("\r"))
    return out


def invalid_utf8(path: Path) -> str:
    """Which line of ``path`` is not UTF-8, as an error message: for readers that decode a file as a text stream,
    whose decoder works in blocks and so cannot say."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return _not_utf8(str(path), number, exc)
    return f"{path}: not valid UTF-8"


def _not_utf8(name: str, number: int, exc: UnicodeDecodeError) -> str:
    """The one wording of an undecodable line, whichever reader found it."""
    return f"{name}: line {number}: not valid UTF-8 (byte {exc.start})"


def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as handle:
        return _sha256_rest(hashlib.sha256(), handle)


def _sha256_rest(digest: Any, handle: IO[bytes]) -> str:
    """``digest`` updated with the rest of ``handle``, read in chunks, as hex."""
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


def canonical_safetensors(data: bytes) -> bytes:
    """The same safetensors file with its ``__metadata__`` keys in sorted order. safetensors writes them in a random
    order (a Rust ``HashMap``: safetensors issue #584), so two saves of the same vectors differ in their bytes and
    in their SHA-256, which runs record to tell tables apart; the header keeps its length, the tensors their bytes."""
    size = int.from_bytes(data[:8], "little")
    return data[:8] + _canonical_header(data[8:8 + size]) + data[8 + size:]


def _canonical_header(header: bytes) -> bytes:
    fields = json.loads(header)
    if not isinstance(fields, dict) or "__metadata__" not in fields:
        return header
    ordered = {"__metadata__": dict(sorted(fields.pop("__metadata__").items())), **fields}
    text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return text.ljust(len(header)) if len(text) <= len(header) else header


def content_sha256(path: str | Path) -> str:
    """SHA-256 of what a file holds: a ``.safetensors`` file with its header canonical (see
    :func:`canonical_safetensors`: saved twice, the same tensors give two file digests but this one), any other
    file as its bytes."""
    if Path(path).suffix != ".safetensors":
        return sha256_file(path)
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        try:
            header = _canonical_header(handle.read(int.from_bytes(prefix, "little")))
        except ValueError:  # not a safetensors header (UnicodeDecodeError is one): hash the bytes as they are
            return sha256_file(path)
        return _sha256_rest(hashlib.sha256(prefix + header), handle)

"""What a word-vector file's bytes say before a library reads them: its text format (word2vec text or binary,
GloVe), whether it holds anything, and where a text file breaks, so that errors name the file and line where gensim
would fail with its own words (a TypeError on an empty file) or read text as float32 garbage without a word."""

from __future__ import annotations

import codecs
import gzip
import io
from pathlib import Path

from nlgkit.core.errors import DataError


def open_binary(path: Path) -> io.BufferedIOBase:
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def detect_vector_format(path: Path) -> str:
    """word2vec text (also fastText ``.vec``: a "COUNT DIM" header), word2vec binary (the same header, then
    bytes) or GloVe (no header), from the file's first two lines."""
    with open_binary(path) as handle:
        first, second = handle.readline(), handle.readline(1 << 20)
    header = first.split()
    if len(header) != 2 or not all(field.isdigit() for field in header):
        return "glove"
    try:
        fields = second.decode("utf-8").split()
        [float(value) for value in fields[1:]]
    except (UnicodeDecodeError, ValueError):
        return "word2vec-binary"
    return "word2vec" if len(fields) == int(header[1]) + 1 else "word2vec-binary"


def line_of(path: Path, word: str, has_header: bool) -> int | None:
    """The number of the first line of a text vector file that gives ``word``'s vector (an error's address)."""
    with open_binary(path) as raw:
        for number, line_bytes in enumerate(raw, 1):
            if number == 1 and has_header:
                continue
            fields = line_bytes.decode("utf-8", errors="replace").split(" ", 1)
            if fields[0].strip("\r\n") == word:
                return number
    return None


def is_blank(path: Path) -> bool:
    """Whether a file (gzipped or not) holds nothing but white space: gensim fails on it with a TypeError."""
    with open_binary(path) as raw:
        while chunk := raw.read(1 << 16):
            if chunk.strip():
                return False
    return True


def first_bad_line(path: Path, has_header: bool) -> str | None:
    """Where a text vector file breaks (a line with the wrong number of values or a value that is not a
    number), so that the error names the line rather than gensim's internal reason."""
    dim = None
    with open_binary(path) as raw:
        for number, line_bytes in enumerate(raw, 1):
            line = line_bytes.decode("utf-8", errors="replace")
            fields = line.rstrip("\n").rstrip().split(" ")
            if number == 1 and has_header:
                if len(fields) != 2 or not all(field.isdigit() for field in fields):
                    return f"line 1: expected the header 'COUNT DIM', got {line.strip()[:40]!r}"
                dim = int(fields[1])
                continue
            if not line.strip():
                continue
            if dim is None and len(fields) == 1:
                return f"line {number}: {line.strip()[:40]!r} has no values: not a word-vector file"
            dim = len(fields) - 1 if dim is None else dim
            if len(fields) - 1 != dim:
                return (f"line {number}: expected a word and {dim} value{'s' * (dim != 1)}, got "
                        f"{len(fields) - 1} value{'s' * (len(fields) != 2)}")
            for value in fields[1:]:
                try:
                    float(value)
                except ValueError:
                    return f"line {number}: {value[:40]!r} is not a number"
    return None


def refuse_text_as_binary(path: Path) -> None:
    """Refuse a text file read as word2vec binary: gensim would take its characters' bytes for float32 values
    and give garbage vectors without a word of warning. A text file is a well-formed text format (given the
    wrong ``--format``), or a broken word2vec text file that ``auto`` took for binary (its line 2 is not a word and
    DIM numbers): the error then names the bad line."""
    seen = detect_vector_format(path)
    if seen != "word2vec-binary":
        raise DataError(f"{path}: a {seen} text file, not word2vec-binary: use --format {seen} (or auto)")
    if not _text_after_header(path):
        return
    where = first_bad_line(path, has_header=True)
    raise DataError(f"{path}: " + (f"{where} (read as word2vec text: the file is not binary)" if where
                                   else "a text file, not word2vec-binary: use --format word2vec (or auto)"))


def _text_after_header(path: Path) -> bool:
    """Whether the bytes after a word2vec header are text (UTF-8 without control characters other than line
    breaks and tabs): float32 vectors never are, as their low bytes and exponent bytes break UTF-8 at once."""
    with open_binary(path) as raw:
        raw.readline()
        sample = raw.read(1 << 16)
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)  # a cut last character is fine
    except UnicodeDecodeError:
        return False
    return bool(text.strip()) and not any(ord(char) < 32 and char not in "\t\n\r" for char in text)

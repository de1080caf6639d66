"""Unknown-word replacement (OpenNMT's ``-replace_unk``, fairseq's ``--replace-unk``): each ``<unk>`` of an
output becomes the source token its decoding step attended to most, or that token's translation in a phrase
table (OpenNMT's ``-phrase_table``: ``source|||target`` lines).

A word-level model with a 10k vocabulary writes ``<unk>`` for names and rare words, and most of those are copied
across languages (names, numbers, places), which the attention usually finds (Luong et al. 2015). An ``<unk>``
whose step attended to the source's end-of-sentence marker, or that has no alignment, stays ``<unk>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import require_readable


@dataclass(frozen=True)
class UnknownReplacement:
    """Replaces the ``unknown`` token of outputs from their source tokens and an optional phrase table."""

    unknown: str
    phrase_table: Mapping[str, str] = field(default_factory=dict)

    def words(self, words: list[str], alignment: list[int] | None, source: list[str]) -> list[str]:
        """``words`` (one per output token) with each unknown one replaced through ``alignment`` (the source
        position of each token) from ``source`` (the tokens the model read, without its end marker)."""
        if alignment is None:
            return words
        replaced = list(words)
        for i, (word, position) in enumerate(zip(words, alignment, strict=True)):
            if word == self.unknown and position < len(source):
                looked_at = source[position]
                replaced[i] = self.phrase_table.get(looked_at, looked_at)
        return replaced


def phrase_table_option(replace_unk: bool, phrase_table: Path | None) -> dict[str, str] | None:
    """What ``--replace-unk [--phrase-table FILE]`` ask for: None (``<unk>`` stays), an empty table (copy the
    source token) or the file's entries; ``--phrase-table`` alone is a ConfigError."""
    if phrase_table is not None and not replace_unk:
        raise ConfigError("--phrase-table: only with --replace-unk")
    if not replace_unk:
        return None
    return read_phrase_table(phrase_table) if phrase_table is not None else {}


def read_phrase_table(path: Path) -> dict[str, str]:
    """``source|||target`` lines (OpenNMT's phrase table; spaces around the fields ignored) as a dict: the first
    line of a source token wins. A malformed line is a DataError naming the file and line."""
    require_readable(path, "phrase table")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    table: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split("|||")]
        if len(parts) != 2 or not all(parts) or any(len(part.split()) != 1 for part in parts):
            raise DataError(f"{path}: line {number}: expected 'source|||target' (one token each), got {line!r}")
        table.setdefault(parts[0], parts[1])
    return table

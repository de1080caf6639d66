"""Unknown-word replacement (OpenNMT's ``-replace_unk``, fairseq's ``--replace-unk``): each ``<unk>`` of an
output becomes the source token its decoding step attended to most, or that token's translation in a phrase
table (OpenNMT's ``-phrase_table``: ``source|||target`` lines).

A word-level model with a 10k vocabulary writes ``<unk>`` for names and rare words, and most of those are copied
across languages (names, numbers, places), which the attention usually finds (Luong et al. 2015). An ``<unk>``
whose step attended to the source's end-of-sentence marker, or that has no alignment, stays ``<unk>``.

With subwords (BPE's ``@@`` or SentencePiece's ``▁``) the attended token is often one piece of a word: copying the
piece, as fairseq and OpenNMT do, writes half a name and glues it to the next output word (``Tis@@`` → "Tisdog").
Here the ``<unk>`` becomes the whole source word around that piece, looked up whole in the phrase table, written as a
word-starting piece of the same kind (SentencePiece: ``▁Tisch``; BPE: ``Tisch``) so that the output's desegmenter
keeps it a word of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import require_readable
from nlgkit.data.subword import BPE_SEPARATOR

SPM_WORD_START = "\u2581"  # SentencePiece's "▁": the piece starts a word


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
                looked_at, as_piece = word_around(source, position)
                replaced[i] = as_piece(self.phrase_table.get(looked_at, looked_at))
        return replaced


def word_around(tokens: list[str], position: int) -> tuple[str, Callable[[str], str]]:
    """The whole word that ``tokens[position]`` is a piece of (BPE pieces end in ``@@`` but the word's last;
    SentencePiece pieces start with ``▁`` at a word's start; word-level tokens are words), with how to write a word
    as a word-starting piece of the same kind."""
    if any(token.startswith(SPM_WORD_START) for token in tokens):
        start = position
        while start > 0 and not tokens[start].startswith(SPM_WORD_START):
            start -= 1
        end = position + 1
        while end < len(tokens) and not tokens[end].startswith(SPM_WORD_START):
            end += 1
        return "".join(tokens[start:end]).removeprefix(SPM_WORD_START), lambda word: SPM_WORD_START + word

    def joins_next(token: str) -> bool:  # a bare "@@" is a word of its own
        return token.endswith(BPE_SEPARATOR) and token != BPE_SEPARATOR

    start = position
    while start > 0 and joins_next(tokens[start - 1]):
        start -= 1
    end = position
    while end < len(tokens) - 1 and joins_next(tokens[end]):
        end += 1
    pieces = [token.removesuffix(BPE_SEPARATOR) if joins_next(token) else token for token in tokens[start:end + 1]]
    return "".join(pieces), lambda word: word


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

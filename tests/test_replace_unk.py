"""Unknown-word replacement from alignments (``translate --replace-unk``) and its phrase table."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlgkit.core.errors import DataError
from nlgkit.generation.unknowns import UnknownReplacement, read_phrase_table


def test_each_unknown_word_becomes_the_source_token_its_step_attended_to() -> None:
    replace = UnknownReplacement("<unk>")
    source = ["ein", "mann", "namens", "zyxwv", "."]
    words = ["a", "man", "called", "<unk>", "<unk>", "."]
    # position 5 is the source's end marker (beyond its tokens): that <unk> stays
    assert replace.words(words, [0, 1, 2, 3, 5, 4], source) == ["a", "man", "called", "zyxwv", "<unk>", "."]
    assert replace.words(words, None, source) == words  # no alignment: nothing to replace from
    with pytest.raises(ValueError):
        replace.words(words, [0, 1], source)  # an alignment must cover every word


def test_a_phrase_table_translates_the_attended_token_and_copies_the_others(tmp_path: Path) -> None:
    table = tmp_path / "table.txt"
    table.write_text("hund ||| dog\n\nkatze|||cat\nhund|||hound\n", encoding="utf-8")
    entries = read_phrase_table(table)
    assert entries == {"hund": "dog", "katze": "cat"}  # spaces around the fields ignored; the first entry wins
    replace = UnknownReplacement("<unk>", entries)
    assert replace.words(["<unk>", "and", "<unk>", "<unk>"], [0, 1, 2, 3], ["hund", "und", "katze", "maus"]) == \
        ["dog", "and", "cat", "maus"]


@pytest.mark.parametrize(("text", "line"), [("hund|||dog\nkatze\n", 2), ("hund|||dog|||hound\n", 1),
                                            ("|||dog\n", 1), ("ein hund|||a dog\n", 1)])
def test_a_malformed_phrase_table_names_its_file_and_line(tmp_path: Path, text: str, line: int) -> None:
    table = tmp_path / "table.txt"
    table.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=f"table.txt: line {line}: expected 'source|||target'"):
        read_phrase_table(table)


def test_a_missing_or_binary_phrase_table_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="missing.txt: phrase table not found"):
        read_phrase_table(tmp_path / "missing.txt")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"hund|||\xff\n")
    with pytest.raises(DataError, match="binary.txt: not UTF-8"):
        read_phrase_table(binary)

"""Unknown-word replacement from alignments (``translate --replace-unk``) and its phrase table."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlgkit.core.errors import DataError
from nlgkit.data.subword import BpeSegmenter, learn_bpe
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


def test_a_subword_unknown_becomes_the_whole_source_word_as_a_word_of_its_own() -> None:
    replace = UnknownReplacement("<unk>", {"tisch": "table"})
    bpe = ["der", "zy@@", "xw@@", "v", "und", "ti@@", "sch", "@@"]
    # the middle piece of "zyxwv" and the last of "tisch" (through the phrase table); a bare "@@" is a word
    assert replace.words(["the", "<unk>", "and", "<unk>", "<unk>"], [0, 2, 4, 6, 7], bpe) == \
        ["the", "zyxwv", "and", "table", "@@"]
    spm = ["\u2581der", "\u2581zy", "xw", "v", "\u2581", "42", "\u2581ti", "sch"]
    assert replace.words(["\u2581the", "<unk>", "<unk>", "<unk>"], [0, 3, 5, 6], spm) == \
        ["\u2581the", "\u2581zyxwv", "\u258142", "\u2581table"]


def test_replaced_subwords_detokenise_to_whole_words(tmp_path: Path) -> None:
    codes = tmp_path / "bpe.codes"
    learn_bpe(["tisch tische tischlein der die das"] * 5, codes, 10)
    pieces = BpeSegmenter(codes).segment(["ein", "zyxwv", "namens", "tischlein"])
    unknown = pieces.index("x@@")  # unseen letters: zyxwv is z@@ y@@ x@@ w@@ v
    words = UnknownReplacement("<unk>").words(["a", "<unk>", "sits"], [0, unknown, len(pieces)], pieces)
    assert BpeSegmenter(codes).desegment(words) == ["a", "zyxwv", "sits"]

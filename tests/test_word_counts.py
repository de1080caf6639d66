"""Training word counts: what a record keeps so that frequency-binned reports need no prepared corpus."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from nlgkit.core.errors import DataError
from nlgkit.data.word_counts import read_word_counts, training_word_counts, write_word_counts


def test_counts_round_trip_most_frequent_first(tmp_path: Path) -> None:
    counts = Counter({"b": 2, "a": 2, "c": 5, "ü": 1})
    write_word_counts(tmp_path / "train.words.en", counts)
    assert (tmp_path / "train.words.en").read_text(encoding="utf-8") == "c\t5\na\t2\nb\t2\nü\t1\n"
    assert read_word_counts(tmp_path / "train.words.en") == counts


def test_raw_references_are_counted_as_lowercased_words(tmp_path: Path) -> None:
    (tmp_path / "train.ref.en").write_text("A dog runs.\na dog\n", encoding="utf-8")
    assert training_word_counts(tmp_path, "en") == Counter({"a": 2, "dog": 2, "runs.": 1})


def test_a_malformed_line_is_named(tmp_path: Path) -> None:
    (tmp_path / "counts").write_text("a\t3\nb 2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"counts, line 2: expected WORD<TAB>COUNT"):
        read_word_counts(tmp_path / "counts")

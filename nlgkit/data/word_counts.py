"""How often each word of a prepared corpus's training target occurs, counted as words of readable text.

Reports that bin words by training frequency (compare-mt's word F1, Tokarchuk & Niculae's Fig. 3) must count the
same words whatever the vocabulary (a subword vocabulary's own counts are of its pieces, a word vocabulary's of
tokens before detokenisation). A run record keeps these counts (``data/train.words.LANG``), so that such a report is
rebuilt from the record alone, without the prepared corpus.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from nlgkit.core.errors import DataError
from nlgkit.core.io import atomic_write, read_lines
from nlgkit.data.tokenize import load_pipeline


def word_counts_name(lang: str) -> str:
    """The file name of a language's training word counts (in a data directory or a record's ``data/``)."""
    return f"train.words.{lang}"


def training_word_counts(data_dir: Path, lang: str) -> Counter[str]:
    """How often each word occurs in the training target text, as detokenised words (lowercased), so that
    outputs and references of any subword vocabulary are binned by the same words."""
    raw = data_dir / f"train.ref.{lang}"
    if raw.is_file():
        lines = read_lines(raw)
    else:
        pipeline = load_pipeline(data_dir, lang)
        lines = [pipeline.decode(line.split()) for line in read_lines(data_dir / f"train.{lang}")]
    return Counter(word for line in lines for word in line.lower().split())


def write_word_counts(path: Path, counts: Mapping[str, int]) -> None:
    """``word<TAB>count`` lines, most frequent first (ties by word): the same counts write the same file."""
    with atomic_write(path) as handle:
        handle.writelines(f"{word}\t{count}\n" for word, count in sorted(counts.items(), key=lambda c: (-c[1], c[0])))


def read_word_counts(path: Path) -> Counter[str]:
    """The counts :func:`write_word_counts` wrote; a malformed line is an error naming it."""
    counts: Counter[str] = Counter()
    for number, line in enumerate(read_lines(path), start=1):
        word, _, count = line.rpartition("\t")
        if not word or not count.isdigit():
            raise DataError(f"{path}, line {number}: expected WORD<TAB>COUNT, got {line[:60]!r}")
        counts[word] = int(count)
    return counts

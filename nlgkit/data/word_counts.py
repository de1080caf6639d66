"""How often each word of a prepared corpus's training target occurs, counted as words of readable text.

Reports that bin words by training frequency (compare-mt's word F1, Tokarchuk & Niculae's Fig. 3) must count the
same words whatever the vocabulary (a subword vocabulary's own counts are of its pieces, a word vocabulary's of
tokens before detokenisation). A run record keeps these counts (``data/train.words.LANG``), so that such a report is
rebuilt from the record alone, without the prepared corpus.

Analyses that rank a vocabulary's own entries by frequency (norm against count, confidence by count, neighbour
geometry by rank) read the counts of the vocabulary file of the language they rank. A joint vocabulary (WMT-14's:
one list for both languages) is saved once per language with that language's counts, and its manifest says so
(``vocab_counts``); :func:`check_side_counts` refuses one prepared before that, whose files counted both languages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from nlgkit.core.errors import DataError
from nlgkit.core.io import atomic_write, read_json, read_lines
from nlgkit.data.tokenize import load_pipeline

#: the manifest's ``vocab_counts`` of a joint vocabulary whose file for each language counts that language's text
SIDE_COUNTS = "per language"


def check_side_counts(data_dir: Path) -> None:
    """A one-line error where ``data_dir`` (prepared data, or a run's ``data/``) has a joint vocabulary whose files
    carry English and German counts summed (WMT-14 prepared before each side was counted apart): a frequency
    analysis of one side's words would rank them by the other side's counts too, silently."""
    path = Path(data_dir) / "manifest.json"
    manifest = read_json(path) if path.is_file() else {}
    if isinstance(manifest, dict) and manifest.get("joint_vocab") and manifest.get("vocab_counts") != SIDE_COUNTS:
        raise DataError(f"{path}: its joint vocabulary's files count both languages' training text together (prepared "
                        "before nlgkit counted each side apart); prepare the corpus again (`nlgkit prepare wmt14`) "
                        "and train on it to analyse words by training frequency")


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

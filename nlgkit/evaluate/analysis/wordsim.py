"""Word similarity: do cosines between a model's word vectors rank pairs as people do? (Shalev Table 4)

The standard protocol (Press & Wolf 2017, Shalev et al.): for every benchmark pair whose two words are in
the vocabulary, the cosine of their vectors; Spearman's ρ against the human scores; and how many pairs
were covered, since a ρ over 20 of 999 pairs means little. Lookup is as-is, then lowercased. The benchmarks
are English: only vectors of an English vocabulary meet them (a German embedding "covers" the pairs of the few
words spelt alike in both languages, and its ρ over those means nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from nlgkit.core.errors import DataError, NlgkitError
from nlgkit.data.vocab import Vocabulary
from nlgkit.data.wordsim import BENCHMARKS, Pair, read_benchmark  # noqa: F401  (re-exported)
from nlgkit.evaluate.analysis.norms import spearman
from nlgkit.evaluate.analysis.vectors import VectorSet, lookup, set_language
from nlgkit.wordvectors.knn import pair_cosines

LANGUAGE = "en"  # the language of every benchmark's words


@dataclass
class WordSimResult:
    rho: float | None  # None when fewer than 3 pairs are covered (or all cosines are equal)
    covered: int
    total: int

    def summary(self) -> dict[str, float | int | None]:
        return {"rho": self.rho, "covered": self.covered, "total": self.total}


def benchmark_paths(data_dir: Path, names: list[str] | None = None, option: str = "--data-dir") -> dict[str, Path]:
    """Existing benchmark files by name; an unknown name or a missing file is a DataError that says how to get it
    (``nlgkit prepare wordsim``) or name its folder (``option``)."""
    chosen = names or list(BENCHMARKS)
    paths = {}
    for name in chosen:
        if name not in BENCHMARKS:
            raise DataError(f"unknown word-similarity benchmark {name!r} (known: {', '.join(BENCHMARKS)})")
        path = Path(data_dir) / BENCHMARKS[name]
        if not path.is_file():
            raise DataError(f"{path}: word-similarity file not found (`nlgkit prepare wordsim` writes it to "
                            f"data/wordsim; {option} DIR names another folder)")
        paths[name] = path
    return paths


def word_similarity(matrix: Tensor, vocab: Vocabulary, pairs: list[Pair]) -> WordSimResult:
    """Spearman ρ between cos(v_a, v_b) over in-vocabulary pairs of matrix (V, d) and the human scores."""
    left, right, human = [], [], []
    for a, b, score in pairs:
        ia, ib = lookup(vocab, a), lookup(vocab, b)
        if ia is not None and ib is not None:
            left.append(ia)
            right.append(ib)
            human.append(score)
    if not left:
        return WordSimResult(None, 0, len(pairs))
    cosines = pair_cosines(matrix, torch.tensor(left), torch.tensor(right)).cpu().tolist()  # (covered,)
    rho, _ = spearman(cosines, human)
    return WordSimResult(rho, len(left), len(pairs))


def english_sets(sets: list[VectorSet], src_lang: str | None, tgt_lang: str, asked: bool,
                 where: str) -> list[VectorSet]:
    """The vector sets of English words among ``sets`` (a model's encoder embedding, decoder embedding and head);
    a NlgkitError where a set of another language was ``asked`` for by name, or where none is English."""
    languages = {entry.name: set_language(entry.name, src_lang, tgt_lang) for entry in sets}
    foreign = [name for name, language in languages.items() if language != LANGUAGE]
    if asked and foreign:
        raise NlgkitError(f"--vectors {foreign[0]}: its words are {languages[foreign[0]] or 'of no language'}, the "
                          f"benchmarks' are English ({LANGUAGE}): a ρ over the pairs of words spelt alike means "
                          "nothing")
    english = [entry for entry in sets if entry.name not in foreign]
    if not english:
        raise NlgkitError(f"{where}: no vectors of English words (source {src_lang or '–'}, target {tgt_lang}): "
                          "the word-similarity benchmarks are English")
    return english

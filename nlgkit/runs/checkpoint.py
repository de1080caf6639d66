"""Checkpoints that are safe to load and never half-written.

A checkpoint is a directory: ``model.safetensors`` (weights and fixed buffers), ``meta.json`` (resolved
config, vocabulary checksums, git revision, progress) and ``train_state.pt`` (optimizer, scheduler, RNG
and loop position, loaded with ``weights_only=True`` so no arbitrary object is ever unpickled). It is
written to a temporary directory and swapped in by rename; a crash mid-swap leaves ``NAME.old``, which
:func:`find_checkpoint` falls back to.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from nlgkit.core.errors import CheckpointError
from nlgkit.core.io import read_json, write_json
from nlgkit.core.safe_load import load_weights_only

MODEL_FILE = "model.safetensors"
META_FILE = "meta.json"
STATE_FILE = "train_state.pt"


def save_checkpoint(directory: Path, model: nn.Module, meta: dict[str, Any],
                    train_state: dict[str, Any] | None = None) -> None:
    """Write a complete checkpoint directory atomically (temp dir, then rename)."""
    directory = Path(directory)
    tmp = directory.with_name(f".{directory.name}.tmp")
    old = directory.with_name(f"{directory.name}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(tensors, str(tmp / MODEL_FILE), metadata={"format": "nlgkit"})
    write_json(tmp / META_FILE, meta)
    if train_state is not None:
        torch.save(train_state, tmp / STATE_FILE)
    if directory.exists():
        shutil.rmtree(old, ignore_errors=True)
        directory.rename(old)
    tmp.rename(directory)
    shutil.rmtree(old, ignore_errors=True)


def find_checkpoint(directory: Path) -> Path | None:
    """The checkpoint directory to load: ``directory`` itself, or its ``.old`` left by a crash mid-swap."""
    directory = Path(directory)
    named = directory.resolve()  # ("." and ".." name their folder; "/" has no name, so no sibling either)
    siblings = [named.with_name(f"{named.name}.old")] if named.name else []
    for candidate in (directory, *siblings):
        if (candidate / MODEL_FILE).is_file() and (candidate / META_FILE).is_file():
            return candidate
    return None


def load_meta(directory: Path) -> dict[str, Any]:
    found = find_checkpoint(directory)
    if found is None:
        raise CheckpointError(f"{directory}: no checkpoint here ({MODEL_FILE} and {META_FILE} expected)")
    meta = read_json(found / META_FILE)
    if not isinstance(meta, dict) or "config" not in meta:
        raise CheckpointError(f"{found / META_FILE}: not an nlgkit checkpoint (no 'config')")
    return meta


def load_weights(directory: Path, model: nn.Module) -> None:
    """Load safetensors weights into ``model``; shape or key mismatches are a one-line error."""
    found = find_checkpoint(directory)
    if found is None:
        raise CheckpointError(f"{directory}: no checkpoint here")
    path = found / MODEL_FILE
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{path}: unreadable weights ({exc})") from None
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not match the model (missing {missing[:3]}, "
                              f"unexpected {unexpected[:3]})")
    for key, value in tensors.items():
        if value.shape != expected[key].shape:
            raise CheckpointError(f"{path}: '{key}' has shape {tuple(value.shape)}, the model expects "
                                  f"{tuple(expected[key].shape)} (vocabulary or config mismatch?)")
    model.load_state_dict(tensors)


def state_file(directory: Path) -> Path:
    """The training state file of the checkpoint in ``directory`` (or in its ``.old`` twin after a crash)."""
    return (find_checkpoint(directory) or Path(directory)) / STATE_FILE


def load_train_state(directory: Path) -> dict[str, Any]:
    path = state_file(directory)
    if not path.is_file():
        raise CheckpointError(f"{path}: no training state to resume from")
    return load_weights_only(path, lambda reason: CheckpointError(
        f"{path}: not a valid nlgkit training state; it was not loaded ({reason})"))

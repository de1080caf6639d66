"""Checkpoints: never half-written, fall back after a crash mid-swap, never unpickle arbitrary objects."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from nlgkit.core.errors import CheckpointError, ConfigError
from nlgkit.runs import checkpoint as ckpt
from nlgkit.runs.loading import resolve_checkpoint


def model(value: float) -> nn.Module:
    module = nn.Linear(3, 2)
    with torch.no_grad():
        module.weight.fill_(value)
    return module


def test_a_failed_save_leaves_the_previous_checkpoint_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "last"
    ckpt.save_checkpoint(target, model(1.0), {"config": {}}, {"step": 1})

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "save_file", crash)
    with pytest.raises(OSError):
        ckpt.save_checkpoint(target, model(2.0), {"config": {}}, {"step": 2})
    loaded = model(0.0)
    ckpt.load_weights(target, loaded)
    assert torch.all(loaded.weight == 1.0)
    assert ckpt.load_train_state(target) == {"step": 1}


def test_a_crash_between_the_two_renames_falls_back_to_the_old_directory(tmp_path: Path) -> None:
    target = tmp_path / "last"
    ckpt.save_checkpoint(target, model(3.0), {"config": {}}, {"step": 3})
    shutil.move(target, tmp_path / "last.old")  # state after the first rename, before the second
    assert ckpt.find_checkpoint(target) == tmp_path / "last.old"
    loaded = model(0.0)
    ckpt.load_weights(target, loaded)
    assert torch.all(loaded.weight == 3.0)


def test_a_checkpoint_named_dot_or_root_or_nothing_is_found_or_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--checkpoint .`` from inside a checkpoint directory loads it (its ``.old`` fallback is named from the
    resolved path: ``.`` has no name of its own); ``/`` has no checkpoint and no sibling; an empty name is refused
    (all three were a traceback: "has an empty name")."""
    target = tmp_path / "best"
    ckpt.save_checkpoint(target, model(4.0), {"config": {}})
    monkeypatch.chdir(target)
    assert ckpt.find_checkpoint(Path(".")) == Path(".")
    assert ckpt.find_checkpoint(Path("/")) is None
    shutil.move(target, tmp_path / "best.old")
    target.mkdir()
    monkeypatch.chdir(target)  # (the process had moved with its folder)
    assert ckpt.find_checkpoint(Path(".")) == tmp_path / "best.old"
    with pytest.raises(ConfigError, match=r"^--checkpoint: empty \(best, last, or a checkpoint directory\)$"):
        resolve_checkpoint(tmp_path, "")


class Payload:
    """Stands for any object a malicious file could ask the unpickler to build."""


def test_training_state_with_arbitrary_objects_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "last"
    ckpt.save_checkpoint(target, model(1.0), {"config": {}}, {"step": 1})
    torch.save({"step": 1, "payload": Payload()}, target / ckpt.STATE_FILE)
    with pytest.raises(CheckpointError, match="not a valid nlgkit training state; it was not loaded") as error:
        ckpt.load_train_state(target)
    assert "weights_only=False" not in str(error.value)  # never the advice to run the file's code


def test_weights_that_do_not_fit_the_model_are_a_clear_error(tmp_path: Path) -> None:
    target = tmp_path / "best"
    ckpt.save_checkpoint(target, nn.Linear(3, 2), {"config": {}})
    with pytest.raises(CheckpointError, match=r"'(weight|bias)' has shape \(2.*the model expects \(4"):
        ckpt.load_weights(target, nn.Linear(3, 4))
    with pytest.raises(CheckpointError, match="no checkpoint here"):
        ckpt.load_weights(tmp_path / "nothing", nn.Linear(3, 2))

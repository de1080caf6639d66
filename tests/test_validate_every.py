"""Validation every N updates (``train.validate_every_updates``): where the validations fall, early stopping counted
in validations inside an epoch, and an interrupted run resumed to the uninterrupted run's weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import nlgkit_command, tiny_recipe
from safetensors.torch import load_file

from nlgkit.core.errors import CheckpointError, ConfigError
from nlgkit.core.recipes import load_recipe
from nlgkit.runs.epochs import select_epochs


def _train(tmp_path: Path, data_dir: Path, name: str, *settings: str, resume: bool = False) -> Path:
    """300 pairs in batches of 25: 12 updates an epoch, two epochs."""
    recipe = tiny_recipe(tmp_path, data_dir, tmp_path / name, max_epochs=2, valid_limit=10, log_every=4)
    argv = ["train", str(recipe), "--device", "cpu", "--set", "train.validate_every_updates=5",
            *(["--resume"] if resume else [])]
    for setting in settings:
        argv += ["--set", setting]
    nlgkit_command(argv)
    return tmp_path / name


def _events(run: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if e["event"] == kind]


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_validations_fall_every_n_updates_across_epochs_and_resume_where_they_were(
        tmp_path: Path, paper: tuple[Path, dict]) -> None:
    """24 updates: validations at updates 5, 10, 15 and 20 (two inside epoch 2), none at the epochs' ends; stopped at
    update 7 and resumed, the run validates at the same updates and ends with the same weights."""
    whole = _train(tmp_path, paper[0], "whole")
    assert [(e["epoch"], e["update"]) for e in _events(whole, "valid")] == [(1, 5), (1, 10), (2, 15), (2, 20)]
    summary = _summary(whole)
    assert summary["update"] == 24 and summary["stop_reason"] == "train.max_epochs = 2 reached"
    best_meta = json.loads((whole / "checkpoints" / "best" / "meta.json").read_text())
    assert best_meta["metrics"]["bleu"] == pytest.approx(summary["best_score"])
    _train(tmp_path, paper[0], "resumed", "train.max_updates=7")
    resumed = _train(tmp_path, paper[0], "resumed", resume=True)
    assert [e["update"] for e in _events(resumed, "valid")] == [5, 10, 15, 20]
    weights = {run: load_file(str(run / "checkpoints" / "last" / "model.safetensors")) for run in (whole, resumed)}
    assert all(torch.equal(v, weights[resumed][k]) for k, v in weights[whole].items())
    assert _summary(resumed)["best_score"] == summary["best_score"]
    # the epochs' checkpoints carry no score: averaged by recency, not by score
    assert [c.epoch for c in select_epochs(whole, "bleu", last=2)] == [1, 2]
    with pytest.raises(CheckpointError, match="validated every N updates.*use --last N"):
        select_epochs(whole, "bleu", best=1)


def test_early_stopping_counts_validations_and_stops_inside_an_epoch(tmp_path: Path,
                                                                     paper: tuple[Path, dict]) -> None:
    """A rate too small to change the greedy output: the first validation is the best, the next two are not
    better, so the run stops at the third (update 15, inside epoch 2), its last checkpoint saying so."""
    run = _train(tmp_path, paper[0], "stalled", "train.lr=1e-12", "train.early_stop_patience=2")
    assert [e["update"] for e in _events(run, "valid")] == [5, 10, 15]
    summary = _summary(run)
    assert summary["finished"] and summary["update"] == 15 and summary["epoch"] == 2
    assert summary["stop_reason"] == "no bleu improvement for 2 validations"
    last = json.loads((run / "checkpoints" / "last" / "meta.json").read_text())["loop"]
    assert last["finished"] and last["update"] == 15


def test_min_delta_stops_a_run_whose_gains_are_too_small_to_count(tmp_path: Path, paper: tuple[Path, dict]) -> None:
    """No gain of a tiny model's BLEU exceeds train.min_delta = 1000: the first validation restarts the patience,
    the next two cannot, so a run at a normal rate stops at the third, saying what it waited for; its best
    checkpoint is still its best validation's."""
    run = _train(tmp_path, paper[0], "small_gains", "train.min_delta=1000", "train.early_stop_patience=2")
    valid = _events(run, "valid")
    assert [e["update"] for e in valid] == [5, 10, 15]
    summary = _summary(run)
    assert summary["finished"] and summary["update"] == 15
    assert summary["stop_reason"] == "no bleu improvement above 1000 for 2 validations"
    best_meta = json.loads((run / "checkpoints" / "best" / "meta.json").read_text())
    assert best_meta["metrics"]["bleu"] == max(e["bleu"] for e in valid) == summary["best_score"]


def test_a_negative_interval_is_named(tmp_path: Path, paper: tuple[Path, dict]) -> None:
    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "run")
    with pytest.raises(ConfigError, match="train.validate_every_updates = -1: must be 0 or positive"):
        load_recipe(recipe, ["train.validate_every_updates=-1"])

"""``nlgkit train --tensorboard DIR``: metrics.jsonl's numbers as TensorBoard events, written by rank 0 only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import tiny_recipe
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import ConfigError
from nlgkit.runs.metrics_log import MetricsLog
from nlgkit.train.tensorboard import TensorBoardLog, open_metrics_log, scalars

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def read_events(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series TensorBoard would show for ``directory``: tag → [(step, value)]."""
    accumulator = event_accumulator.EventAccumulator(str(directory))
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]}


def test_scalars_of_each_event() -> None:
    train = {"update": 50, "epoch": 1, "loss": 4.5, "tokens": 900, "tokens_per_s": 1800.0, "lr": 0.001,
             "wall_s": 3.2, "aux_mse": 0.25}
    assert scalars("train", train) == {"train/loss": 4.5, "train/lr": 0.001, "train/tokens_per_s": 1800.0,
                                       "train/aux_mse": 0.25}
    valid = {"epoch": 2, "update": 120, "lr": 0.001, "wall_s": 9.0, "metric": "bleu", "best": 12.5,
             "loss": 3.5, "ppl": 33.1, "bleu": 12.5, "chrf": 40.25}
    assert scalars("valid", valid) == {"valid/loss": 3.5, "valid/ppl": 33.1, "valid/bleu": 12.5,
                                       "valid/chrf": 40.25}
    partial = {"epoch": 1, "update": 3, "partial": True, "metric": "bleu", "loss": 5.0, "ppl": 148.4, "bleu": 0.5}
    assert scalars("valid", partial) == {"valid_partial/loss": 5.0, "valid_partial/ppl": 148.4,
                                         "valid_partial/bleu": 0.5}
    assert scalars("start", {"parameters": 10}) == {} and scalars("end", {"update": 5, "best": 1.0}) == {}


def test_only_the_main_rank_writes(tmp_path: Path) -> None:
    """Under torchrun every rank builds its log; ranks other than 0 create no file and no event directory."""
    other = open_metrics_log(tmp_path / "metrics.jsonl", is_main=False, tensorboard=str(tmp_path / "tb"))
    other.write("train", update=5, loss=1.0, lr=0.1, tokens_per_s=10.0)
    assert type(other) is MetricsLog and not other.enabled
    assert list(tmp_path.iterdir()) == []

    plain = open_metrics_log(tmp_path / "metrics.jsonl", is_main=True)
    assert type(plain) is MetricsLog and plain.enabled

    main = open_metrics_log(tmp_path / "metrics.jsonl", is_main=True, tensorboard=str(tmp_path / "tb"))
    assert isinstance(main, TensorBoardLog)
    main.write("train", update=5, loss=1.0, lr=0.1, tokens_per_s=10.0)
    main.write("valid", update=12, epoch=1, lr=0.1, metric="bleu", best=2.0, loss=0.5, ppl=1.6, bleu=2.0)
    main.close()
    assert [json.loads(line)["event"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == \
        ["train", "valid"]
    events = read_events(tmp_path / "tb")
    assert events["train/loss"] == [(5, 1.0)] and events["valid/bleu"] == [(12, 2.0)]


def test_without_the_tensorboard_package_the_error_says_what_to_install(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # what a missing package looks like
    with pytest.raises(ConfigError, match=r"train.tensorboard = '.*tb': .*pip install 'nlgkit\[tensorboard\]'"):
        open_metrics_log(tmp_path / "metrics.jsonl", is_main=True, tensorboard=str(tmp_path / "tb"))


def test_training_writes_loss_lr_speed_and_validation_events(paper: tuple[Path, dict], tmp_path: Path) -> None:
    """A run crossing one epoch end (12 updates an epoch, a train line every 5): TensorBoard shows what
    metrics.jsonl records, at the same updates."""
    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "run", max_updates=14, valid_limit=20)
    board = tmp_path / "board"
    result = CliRunner().invoke(app, ["train", str(recipe), "--tensorboard", str(board)])
    assert result.exit_code == 0, result.output

    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["event"] == "train"]
    valid = [r for r in records if r["event"] == "valid"]
    assert [r["update"] for r in train] == [5, 10] and [r["update"] for r in valid] == [12]
    events = read_events(board)
    for tag, key, source in [("train/loss", "loss", train), ("train/lr", "lr", train),
                             ("train/tokens_per_s", "tokens_per_s", train),
                             ("valid/bleu", "bleu", valid), ("valid/loss", "loss", valid),
                             ("valid/ppl", "ppl", valid)]:
        assert [step for step, _ in events[tag]] == [r["update"] for r in source], tag
        assert [value for _, value in events[tag]] == pytest.approx([r[key] for r in source], rel=1e-6), tag
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["train"]["tensorboard"] == str(board)

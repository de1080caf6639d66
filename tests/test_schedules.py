"""Optimizers and learning-rate schedules chosen in the recipe."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from nlgkit.core.errors import ConfigError
from nlgkit.core.recipes import load_recipe
from nlgkit.train.optim import build_optimizer, build_scheduler

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "multi30k_learned.toml"


def setup(*overrides: str):  # type: ignore[no-untyped-def]
    config = load_recipe(RECIPE, list(overrides))
    model = torch.nn.Linear(3, 2)
    optimizer = build_optimizer(config, model)
    return config, model, optimizer, build_scheduler(config, optimizer)


def lr(optimizer: torch.optim.Optimizer) -> float:
    return optimizer.param_groups[0]["lr"]


def test_inverse_sqrt_warms_up_then_decays_and_resumes_where_it_was() -> None:
    _, _, optimizer, schedule = setup('train.schedule="inverse_sqrt"', "train.warmup_updates=4",
                                               "train.lr=0.002", "train.optimizer=\"adamw\"",
                                               "train.adam_betas=[0.9, 0.98]")
    assert isinstance(optimizer, torch.optim.AdamW) and optimizer.defaults["betas"] == (0.9, 0.98)
    seen = [lr(optimizer)]
    for _ in range(12):
        optimizer.step()
        schedule.after_update()
        schedule.after_epoch(1.0, 1.0)  # no effect on a per-update schedule
        seen.append(lr(optimizer))
    expected = [0.002 * min((u + 1) / 4, math.sqrt(4 / (u + 1))) for u in range(13)]
    assert seen == pytest.approx(expected)
    _, _, other, resumed = setup('train.schedule="inverse_sqrt"', "train.warmup_updates=4", "train.lr=0.002")
    resumed.load_state_dict(schedule.state_dict())
    assert lr(other) == pytest.approx(seen[-1])


def test_plateau_is_the_default_and_keeps_torchs_state_dict() -> None:
    config, _, optimizer, schedule = setup()
    assert config.train.schedule == "plateau" and type(optimizer) is torch.optim.Adam
    for _ in range(config.train.lr_patience + 1):
        schedule.after_update()  # no effect on a per-epoch schedule
        schedule.after_epoch(10.0, 1.0)
    assert lr(optimizer) == pytest.approx(config.train.lr * config.train.lr_decay)
    assert {"best", "num_bad_epochs", "patience"} <= set(schedule.state_dict())  # checkpoints of old runs load


def test_plateau_on_loss_decays_when_the_loss_stops_falling_whatever_the_score() -> None:
    """A falling loss keeps the rate although the score drops; a loss that stops falling halves it."""
    _, _, optimizer, schedule = setup('train.schedule_metric="loss"', "train.lr_patience=1", "train.lr_decay=0.5")
    for score, loss in [(2.0, 5.0), (1.0, 4.0), (0.5, 3.0)]:  # score falls, loss falls
        schedule.after_epoch(score, loss)
    assert lr(optimizer) == pytest.approx(0.001)
    schedule.after_epoch(9.0, 3.5)  # score rises, loss rises
    assert lr(optimizer) == pytest.approx(0.0005)
    _, _, on_score, by_score = setup("train.lr_patience=1", "train.lr_decay=0.5")
    for score, loss in [(2.0, 5.0), (1.0, 4.0)]:
        by_score.after_epoch(score, loss)
    assert lr(on_score) == pytest.approx(0.0005)
    with pytest.raises(ConfigError, match="train.schedule_metric"):
        load_recipe(RECIPE, ['train.schedule_metric="bleu"'])


def test_none_keeps_the_rate_and_bad_values_are_refused() -> None:
    _, _, optimizer, schedule = setup('train.schedule="none"')
    schedule.after_update()
    schedule.after_epoch(0.0, 1.0)
    assert lr(optimizer) == pytest.approx(0.001)
    with pytest.raises(ConfigError, match="train.warmup_updates = 0"):
        load_recipe(RECIPE, ['train.schedule="inverse_sqrt"', "train.warmup_updates=0"])
    with pytest.raises(ConfigError, match="train.adam_betas"):
        load_recipe(RECIPE, ["train.adam_betas=[0.9, 1.5]"])
    with pytest.raises(ConfigError, match="train.schedule"):
        load_recipe(RECIPE, ['train.schedule="cosine"'])

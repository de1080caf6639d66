"""Optimizers and learning-rate schedules chosen in the recipe."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from nlgkit.core.errors import ConfigError
from nlgkit.core.recipes import load_recipe
from nlgkit.train.optim import build_optimizer, build_scheduler
from nlgkit.train.session import LoopState

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


def test_min_delta_keeps_gains_of_hundredths_from_restarting_either_patience() -> None:
    """Scores creeping up by 0.01 (a converged run, as DE-EN fixed seed 2 did at epochs 56, 68 and 71): with the paper's rule
    each is a gain; with train.min_delta = 0.1 only a rise of more than 0.1 over the score that last restarted the
    patience counts, for early stopping and the plateau schedule alike, while the best checkpoint follows every
    gain. A resumed run takes the recipe's min_delta, not the saved one."""
    creeping = [30.0, 30.01, 30.02, 30.03, 30.2, 30.21, 30.25]
    paper, strict = LoopState(), LoopState()
    improved = [(paper.count_validation(s, 0.0), strict.count_validation(s, 0.1)) for s in creeping]
    assert improved == [(True, True)] * len(creeping)  # the best checkpoint follows every gain either way
    assert (paper.best_score, paper.best_epoch, paper.bad_epochs) == (30.25, 1, 0)
    assert (strict.best_score, strict.bad_epochs, strict.patience_score) == (30.25, 2, 30.2)
    late = LoopState(epoch=5)
    assert late.count_validation(0.0, 1000.0) and late.bad_epochs == 0  # the first validation always counts
    assert not late.count_validation(0.0, 0.0) and late.bad_epochs == 1  # an equal score is no gain

    _, _, optimizer, schedule = setup("train.lr_patience=2", "train.lr_decay=0.5", "train.min_delta=0.1")
    for score in creeping[:3]:
        schedule.after_epoch(score, 1.0)
    assert lr(optimizer) == pytest.approx(0.0005)
    _, _, paper_optimizer, paper_schedule = setup("train.lr_patience=2", "train.lr_decay=0.5")
    for score in creeping[:3]:
        paper_schedule.after_epoch(score, 1.0)
    assert lr(paper_optimizer) == pytest.approx(0.001)
    _, _, resumed_optimizer, resumed = setup("train.lr_patience=2", "train.lr_decay=0.5", "train.min_delta=0.1")
    resumed.load_state_dict(paper_schedule.state_dict())
    resumed.after_epoch(30.03, 1.0)
    resumed.after_epoch(30.04, 1.0)
    assert lr(resumed_optimizer) == pytest.approx(0.0005)
    with pytest.raises(ConfigError, match="train.min_delta = -0.1: must be 0 or positive"):
        load_recipe(RECIPE, ["train.min_delta=-0.1"])


def test_a_loop_state_saved_before_min_delta_resumes_its_patience_from_the_best_score() -> None:
    old = {"epoch": 12, "batch_in_epoch": 0, "update": 100, "best_score": 30.5, "best_epoch": 8, "bad_epochs": 3,
           "wall_seconds": 1.0, "train_tokens": 10, "finished": False, "stop_reason": ""}
    loop = LoopState.from_saved(old)
    assert loop.patience_score == 30.5
    assert loop.count_validation(30.55, 0.1) and loop.bad_epochs == 4  # a new best, but no gain above 0.1
    assert LoopState.from_saved({**old, "best_epoch": 0, "best_score": -1.0}).patience_score is None

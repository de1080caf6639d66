"""Learning-rate schedules chosen by ``[train] schedule``: one interface for per-epoch and per-update ones.

- ``plateau`` (default; Shalev et al.'s appendix): lr × ``lr_decay`` after ``lr_patience`` epochs without
  validation-metric gain (torch's ReduceLROnPlateau reduces once bad epochs *exceed* its patience, hence
  ``lr_patience − 1``). Its state dict is torch's own, so checkpoints written before schedules existed load.
  ``schedule_metric = "loss"`` watches the validation loss instead of the task's score (OpenNMT's decay on
  perplexity): early in training greedy BLEU is small and noisy, and a short patience on it halves the rate of
  a model whose loss is still falling. ``train.min_delta`` is its absolute threshold on the score (a smaller gain
  is none), as it is for early stopping.
- ``inverse_sqrt`` (Vaswani et al.; fairseq's schedule): linear warm-up to ``lr`` over ``warmup_updates``,
  then lr · √(warmup / update).
- ``none``: the learning rate stays ``lr``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from nlgkit.core.config import RunConfig


class Schedule:
    """``after_update()`` after every optimizer step, ``after_epoch(score, loss)`` after every validation."""

    def after_update(self) -> None:
        pass

    def after_epoch(self, score: float, loss: float) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class Plateau(Schedule):
    def __init__(self, config: RunConfig, optimizer: torch.optim.Optimizer) -> None:
        t = config.train
        self.on_loss = t.schedule_metric == "loss"
        self.threshold = 0.0 if self.on_loss else t.min_delta  # (train.min_delta is in the score's units)
        self.inner = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min" if self.on_loss else "max", factor=t.lr_decay,
            patience=max(t.lr_patience - 1, 0), min_lr=t.min_lr, threshold=self.threshold, threshold_mode="abs")

    def after_epoch(self, score: float, loss: float) -> None:
        self.inner.step(loss if self.on_loss else score)

    def state_dict(self) -> dict[str, Any]:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """torch's state, under the recipe's threshold: a resumed run may set another train.min_delta (its
        state also names the threshold it was saved with; a relative 0 of older runs is the same rule)."""
        self.inner.load_state_dict(state)
        self.inner.threshold, self.inner.threshold_mode = self.threshold, "abs"


class InverseSqrt(Schedule):
    def __init__(self, config: RunConfig, optimizer: torch.optim.Optimizer) -> None:
        warmup = config.train.warmup_updates

        def factor(update: int) -> float:  # LambdaLR's count: 0 before the first update
            step = update + 1
            return min(step / warmup, math.sqrt(warmup / step))

        self.inner = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def after_update(self) -> None:
        self.inner.step()

    def state_dict(self) -> dict[str, Any]:
        return {"last_epoch": self.inner.last_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        inner = self.inner
        inner.last_epoch = int(state["last_epoch"])
        for group, base, factor in zip(inner.optimizer.param_groups, inner.base_lrs, inner.lr_lambdas, strict=True):
            group["lr"] = base * factor(inner.last_epoch)


SCHEDULES = {"plateau": Plateau, "inverse_sqrt": InverseSqrt, "none": lambda config, optimizer: Schedule()}


def build_schedule(config: RunConfig, optimizer: torch.optim.Optimizer) -> Schedule:
    return SCHEDULES[config.train.schedule](config, optimizer)

"""One optimizer update, apart from the loop around it, so that a speed benchmark times exactly what training runs.

The trainer calls it for every batch; ``make bench`` and the Pappas speed table call it on synthetic batches
without a run directory, data or metrics log.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from nlgkit.data.batching import Batch


def optimizer_update(model: torch.nn.Module, objective: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     scheduler: Any, batch: Batch, *, clip_norm: float, loss_tokens: float | None = None,
                     autocast: AbstractContextManager[Any] | None = None,
                     ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Forward, backward, gradient clipping (``clip_norm`` > 0), optimizer and per-update schedule step.

    Returns the summed head loss and each auxiliary loss (already weighted) as detached 0-d tensors on the
    model's device: reading them (``float``) waits for the accelerator, so the training loop reads them only
    when it logs and the host can queue the next update while the GPU still runs this one. ``loss_tokens``
    normalises the loss (default: the batch's target tokens; see
    :class:`~nlgkit.train.objective.TrainingObjective`).
    """
    with autocast or nullcontext():
        loss, loss_sum, aux_losses = objective(batch, batch.num_target_tokens if loss_tokens is None else loss_tokens)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if clip_norm > 0:
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], clip_norm)
    optimizer.step()
    scheduler.after_update()
    return loss_sum.detach(), {name: value.detach() for name, value in aux_losses.items()}

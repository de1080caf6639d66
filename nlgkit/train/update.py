"""One optimizer update, apart from the loop around it, so that a speed benchmark times exactly what training runs.

The trainer calls it for every batch, or for every group of ``train.accumulate`` batches whose gradients are summed
into one update (fairseq's ``--update-freq``, OpenNMT's ``accum_count``); ``make bench`` and the Pappas speed table
call it on synthetic batches without a run directory, data or metrics log.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from nlgkit.data.batching import Batch


def optimizer_update(model: torch.nn.Module, objective: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     scheduler: Any, batch: Batch, *, clip_norm: float, loss_tokens: float | None = None,
                     autocast: AbstractContextManager[Any] | None = None, scaler: torch.amp.GradScaler | None = None,
                     ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Forward, backward, gradient clipping (``clip_norm`` > 0), optimizer and per-update schedule step.

    Returns the summed head loss and each auxiliary loss (already weighted) as detached 0-d tensors on the
    model's device: reading them (``float``) waits for the accelerator, so the training loop reads them only
    when it logs and the host can queue the next update while the GPU still runs this one. ``loss_tokens``
    normalises the loss (default: the batch's target tokens; see
    :class:`~nlgkit.train.objective.TrainingObjective`).
    """
    tokens = batch.num_target_tokens if loss_tokens is None else loss_tokens
    return accumulated_update(model, objective, optimizer, scheduler, [batch], [1.0], clip_norm=clip_norm,
                              loss_tokens=tokens, autocast=autocast, scaler=scaler)


def accumulated_update(model: torch.nn.Module, objective: torch.nn.Module, optimizer: torch.optim.Optimizer,
                       scheduler: Any, batches: Sequence[Batch], aux_weights: Sequence[float], *, clip_norm: float,
                       loss_tokens: float, autocast: AbstractContextManager[Any] | None = None,
                       scaler: torch.amp.GradScaler | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One update from the gradients of several batches, as if they were one batch.

    Every batch's head loss is divided by ``loss_tokens`` (the target tokens of the whole group, over the number of
    ranks under data parallelism) and its auxiliary losses, which are means over its examples, are weighted by
    ``aux_weights`` (its share of the group's examples). A loss that compares the examples of a batch with each
    other (IMAGINATION's and VAG-NMT's margins against the batch's other images) sees each batch's examples alone,
    so for those models accumulation is not the larger batch. Under data parallelism the ranks average their
    gradients once, after the last batch (``no_sync`` before it). With a float16 ``scaler``
    (:func:`~nlgkit.train.precision.loss_scaler`) the gradients are computed from the scaled loss and scaled back
    before clipping, and an update whose gradients overflowed is skipped (the scale then halves). Returns the head
    losses summed and the auxiliary losses weighted as they were added.
    """
    optimizer.zero_grad(set_to_none=True)
    loss_total: torch.Tensor | None = None
    aux_total: dict[str, torch.Tensor] = {}
    for position, (batch, share) in enumerate(zip(batches, aux_weights, strict=True)):
        later = position < len(batches) - 1
        no_sync = getattr(objective, "no_sync", None)
        with no_sync() if later and no_sync is not None else nullcontext():
            with autocast or nullcontext():
                loss, loss_sum, aux_losses = objective(batch, loss_tokens, share)
            (scaler.scale(loss) if scaler is not None else loss).backward()
        loss_total = loss_sum if loss_total is None else loss_total + loss_sum
        for name, value in aux_losses.items():
            aux_total[name] = aux_total[name] + share * value if name in aux_total else share * value
    if scaler is not None:
        scaler.unscale_(optimizer)  # clip (and step on) the gradients of the loss itself
    if clip_norm > 0:
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], clip_norm)
    if scaler is not None:
        scaler.step(optimizer)  # skipped where a gradient is inf or NaN
        scaler.update()
    else:
        optimizer.step()
    scheduler.after_update()
    assert loss_total is not None, "an update needs at least one batch"
    return loss_total, aux_total

"""An exponential moving average of the trainable weights (``train.ema_decay``): fairseq's ``--ema-decay``,
OpenNMT-py's ``average_decay``, Marian's ``--exponential-smoothing``.

The average is what a run is judged and decoded with: validation scores it, and the ``best`` and ``epoch_NNN``
checkpoints hold it; ``last`` holds the raw weights the optimizer continues from, with the average in its training
state, so that a resumed run continues both. Only trainable parameters are averaged: a fixed head's buffers and
frozen tables do not change, so their average is themselves. The decay grows with the updates as OpenNMT-py's
does, ``min(decay, (1 + u) / (10 + u))``, so the first updates are not drowned by the random initial weights.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


class WeightAverage:
    """A float32 shadow copy of ``model``'s trainable parameters, moved towards them after every update."""

    def __init__(self, model: torch.nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay {decay}: must be in (0, 1)")
        self.decay = decay
        self.names = [name for name, p in model.named_parameters() if p.requires_grad]
        self.shadow = [p.detach().float().clone() for p in self._params(model)]

    def _params(self, model: torch.nn.Module) -> list[torch.Tensor]:
        params = dict(model.named_parameters())
        return [params[name] for name in self.names]

    def decay_at(self, update: int) -> float:
        """The decay used after update ``update`` (1-based): small at first, ``decay`` from ~10 / (1 - decay) on."""
        return min(self.decay, (1.0 + update) / (10.0 + update))

    @torch.no_grad()
    def update(self, model: torch.nn.Module, update: int) -> None:
        """shadow ← d · shadow + (1 − d) · weights, with d = :meth:`decay_at` (``update``)."""
        weights = [p.detach().float() for p in self._params(model)]
        torch._foreach_lerp_(self.shadow, weights, 1.0 - self.decay_at(update))

    @contextmanager
    def applied(self, model: torch.nn.Module) -> Iterator[None]:
        """Inside the block ``model`` holds the averaged weights; afterwards (error or not) its own again."""
        params = self._params(model)
        with torch.no_grad():
            raw = [p.detach().clone() for p in params]
            for param, average in zip(params, self.shadow, strict=True):
                param.copy_(average)
        try:
            yield
        finally:
            with torch.no_grad():
                for param, own in zip(params, raw, strict=True):
                    param.copy_(own)

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "shadow": {name: t.cpu() for name, t in zip(self.names, self.shadow,
                                                                                   strict=True)}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The saved shadow; a parameter it lacks keeps the current weights (a run that turned averaging on)."""
        saved = state.get("shadow", {})
        self.shadow = [saved[name].to(t.device, torch.float32) if name in saved else t
                       for name, t in zip(self.names, self.shadow, strict=True)]

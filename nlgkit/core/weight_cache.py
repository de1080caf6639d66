"""Values derived from weights (search tables, a head's projected vocabulary), reused at inference.

A cache is keyed by each weight's version counter, storage and device, so loading or editing weights in
place invalidates it. That key alone is not enough: the fused Adam kernels (``torch.optim.Adam(fused=True)``,
nlgkit's default) update parameters in place *without* bumping their version counters. So the owner also
drops the cache whenever it enters training mode (``module.train()``): every optimiser step of nlgkit's
trainer happens in training mode, and each validation begins from a fresh cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from torch import Tensor

T = TypeVar("T")


class WeightCache(Generic[T]):
    """One value computed from ``weights``; recomputed when any of them has changed, or after :meth:`clear`."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._value: T | None = None

    def get(self, weights: Sequence[Tensor], compute: Callable[[], T]) -> T:
        key = tuple((w._version, w.data_ptr(), w.device) for w in weights)
        if self._value is None or self._key != key:
            self._value, self._key = compute(), key
        return self._value

    def clear(self) -> None:
        self._key, self._value = None, None

"""The von Mises–Fisher (Langevin) normaliser, computed stably for continuous-output heads.

For unit vectors in R^m the vMF density is C_m(κ)·exp(κ·μᵀx) with

    log C_m(κ) = (m/2 − 1)·log κ − (m/2)·log 2π − log I_{m/2−1}(κ).

I_v overflows for large κ and underflows for small κ and large v (m = 1024: v = 511), so log I_v is taken from
scipy's exponentially scaled ``ive`` (log I_v(κ) = log ive(v, κ) + κ), and from its small-argument series
v·log(κ/2) − log Γ(v + 1) where ``ive`` underflows. The gradient d/dκ log I_v(κ) = I_{v+1}(κ)/I_v(κ) + v/κ uses
the same ratio of scaled values (κ/(2(v + 1)) where both underflow), so neither value nor gradient is ever NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor


def _log_iv(v: float, kappa: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln, ive  # here, not at import: every run loads the heads, few need Bessel

    scaled = ive(v, kappa)
    with np.errstate(divide="ignore"):
        value = np.log(scaled) + kappa
    series = v * np.log(kappa / 2.0) - gammaln(v + 1.0)  # I_v(κ) ≈ (κ/2)^v / Γ(v+1) for small κ
    return np.where((scaled > 0) & np.isfinite(value), value, series)


def _ratio(v: float, kappa: np.ndarray) -> np.ndarray:
    """I_{v+1}(κ) / I_v(κ)."""
    from scipy.special import ive

    low, high = ive(v, kappa), ive(v + 1.0, kappa)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = high / low
    return np.where((low > 0) & np.isfinite(ratio), ratio, kappa / (2.0 * (v + 1.0)))


class _LogBessel(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, kappa: Tensor, v: float) -> Tensor:
        values = kappa.detach().double().cpu().numpy()
        ctx.save_for_backward(kappa)
        ctx.v = v
        return torch.from_numpy(_log_iv(v, values)).to(kappa.device, kappa.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (kappa,) = ctx.saved_tensors
        values = kappa.detach().double().cpu().numpy()
        slope = _ratio(ctx.v, values) + ctx.v / values
        return grad * torch.from_numpy(slope).to(kappa.device, kappa.dtype), None


def log_bessel_iv(v: float, kappa: Tensor) -> Tensor:
    """log I_v(κ) for κ > 0 (any shape), differentiable in κ."""
    return _LogBessel.apply(kappa, float(v))


def log_vmf_normaliser(dim: int, kappa: Tensor) -> Tensor:
    """log C_dim(κ) for κ > 0."""
    v = dim / 2.0 - 1.0
    return v * torch.log(kappa) - (dim / 2.0) * math.log(2 * math.pi) - log_bessel_iv(v, kappa)

"""Training efficiency against this machine's own matmul rate (run by ``make bench``).

The FLOPs of a training step (forward + backward) are counted from the model: every matrix product the
step dispatches (``mm``, ``addmm``, ``bmm``, ``baddbmm``) is recorded with its shapes and memory layout,
2·m·k·n FLOPs each. The machine's float32 matmul rate is then measured *at those shapes*: each recorded
product is replayed alone on fresh tensors of the same layout and timed. The share

    achieved GFLOP/s  /  matmul GFLOP/s at the step's shapes  =  ideal matmul time / step time

says how much of a step is spent in matrix products running as fast as this machine runs them; the rest is
everything else (element-wise work, the recurrence's small kernels, Python, the optimizer). A large square
product is timed too, as the machine's peak for reference.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
MATMULS = {aten.mm.default: "mm", aten.addmm.default: "addmm", aten.bmm.default: "bmm",
           aten.baddbmm.default: "baddbmm"}

# (op, shape of A, A transposed?, shape of B, B transposed?)
Product = tuple[str, tuple[int, ...], bool, tuple[int, ...], bool]


def _is_transposed(tensor: torch.Tensor) -> bool:
    """A matrix (or batch of matrices) stored column-major: BLAS reads it with a transpose flag."""
    return tensor.dim() >= 2 and tensor.stride(-2) == 1 and tensor.size(-2) > 1 and tensor.stride(-1) != 1


class MatmulRecorder(TorchDispatchMode):
    """Counts the matrix products dispatched inside it, by shape and layout."""

    def __init__(self) -> None:
        super().__init__()
        self.products: Counter[Product] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = MATMULS.get(func)
        if name is not None:
            a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            self.products[(name, tuple(a.shape), _is_transposed(a), tuple(b.shape), _is_transposed(b))] += 1
        return func(*args, **(kwargs or {}))


def product_flops(product: Product) -> int:
    _, a, _, b, _ = product
    batch = a[0] if len(a) == 3 else 1
    return 2 * batch * a[-2] * a[-1] * b[-1]


def _operand(shape: tuple[int, ...], transposed: bool) -> torch.Tensor:
    if not transposed:
        return torch.randn(shape)
    return torch.randn(*shape[:-2], shape[-1], shape[-2]).transpose(-1, -2)


def time_product(product: Product, min_seconds: float = 0.002, rounds: int = 5) -> float:
    """Seconds of one product of this shape and layout on this machine (best of ``rounds``)."""
    name, a_shape, a_t, b_shape, b_t = product
    a, b = _operand(a_shape, a_t), _operand(b_shape, b_t)
    batched = name in ("bmm", "baddbmm")
    run = (lambda: torch.bmm(a, b)) if batched else (lambda: torch.mm(a, b))
    run()
    start = time.perf_counter()
    run()
    once = max(time.perf_counter() - start, 1e-7)
    repeats = max(1, int(min_seconds / once))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def square_matmul_rate(size: int = 2048, rounds: int = 5) -> float:
    """GFLOP/s of a float32 size×size product: the machine's peak, for reference."""
    product: Product = ("mm", (size, size), False, (size, size), False)
    return product_flops(product) / time_product(product, min_seconds=0.05, rounds=rounds) / 1e9


def matmul_rate_at(products: Counter[Product]) -> tuple[float, float]:
    """(GFLOP/s of these products on this machine, their ideal seconds): each shape timed alone."""
    flops = seconds = 0.0
    for product, count in products.items():
        flops += count * product_flops(product)
        seconds += count * time_product(product)
    return flops / seconds / 1e9, seconds


def efficiency(step_seconds: float, products: Counter[Product], target_tokens: int) -> dict[str, Any]:
    """The figures ``make bench`` reports for the training steps that dispatched ``products``."""
    flops = sum(count * product_flops(p) for p, count in products.items())
    rate, ideal_seconds = matmul_rate_at(products)
    achieved = flops / step_seconds / 1e9
    return {"mflop_per_token": flops / target_tokens / 1e6, "achieved_gflops": achieved,
            "matmul_gflops_at_shapes": rate, "share_of_matmul_rate": achieved / rate,
            "ideal_matmul_seconds": ideal_seconds, "distinct_products": len(products),
            "square_matmul_gflops": square_matmul_rate()}

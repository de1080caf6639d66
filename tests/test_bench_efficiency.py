"""The FLOP accounting behind `make bench`'s efficiency figures (behaviour only: no timing is asserted)."""

from __future__ import annotations

import torch
from torch import nn

from nlgkit.experiments.bench.efficiency import MatmulRecorder, product_flops


def test_a_linear_layer_counts_its_forward_and_both_backward_products() -> None:
    layer = nn.Linear(32, 48)
    x = torch.randn(10, 32, requires_grad=True)
    recorder = MatmulRecorder()
    with recorder:
        layer(x).sum().backward()
    flops = sum(count * product_flops(p) for p, count in recorder.products.items())
    assert flops == 3 * 2 * 10 * 32 * 48  # y = xWᵀ + b, dx = dy·W, dW = dyᵀ·x
    assert sum(recorder.products.values()) == 3
    assert any(a_t or b_t for _, _, a_t, _, b_t in recorder.products)  # Wᵀ is read as a transposed view


def test_batched_products_count_every_matrix_of_the_batch() -> None:
    a, b = torch.randn(4, 5, 6), torch.randn(4, 6, 7)
    recorder = MatmulRecorder()
    with recorder:
        torch.bmm(a, b)
    (product,) = recorder.products
    assert product[0] == "bmm" and product_flops(product) == 2 * 4 * 5 * 6 * 7

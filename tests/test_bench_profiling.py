"""The profile of a benchmark case's updates names where their time goes (``make bench``'s GPU section)."""

from __future__ import annotations

import torch
from torch import nn

from nlgkit.experiments.bench.profiling import profile_updates


def test_a_matmul_bound_update_names_the_product_first_and_reports_shares_of_its_time() -> None:
    torch.manual_seed(0)
    model = nn.Linear(2048, 2048, bias=False)  # an update of two 512 × 2048 × 2048 products and little else
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(512, 2048)
    before = model.weight.detach().clone()

    def step(indices: list[int]) -> None:
        optimizer.zero_grad()
        model(inputs[: len(indices)]).square().mean().backward()
        optimizer.step()

    step(list(range(512)))  # the first update's one-time costs are not what the profile is for
    profile = profile_updates(step, [list(range(512))] * 2, on_gpu=False)
    assert profile["updates"] == 2 and profile["wall_s"] > 0
    assert not torch.equal(model.weight, before)  # the profiled updates really ran
    (first, share), *_ = profile["top_operators"]
    shares = [share for _, share in profile["top_operators"]]
    assert first == "aten::mm" and share > 0.5, profile
    assert shares == sorted(shares, reverse=True) and sum(shares) <= 1
    assert profile["kernels_per_update"] is None and profile["device_busy"] is None  # no GPU: nothing to count

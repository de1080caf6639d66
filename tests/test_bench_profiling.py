"""The profile of a benchmark case's updates names where their time goes (``make bench``'s GPU section)."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn
from torch.autograd import DeviceType

from nlgkit.experiments.bench.profiling import profile_updates, summarise_events


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


def event(key: str, count: int, device: DeviceType, cpu_us: float = 0.0, device_us: float = 0.0) -> SimpleNamespace:
    """One of the profiler's averaged events (torch's FunctionEventAvg), as the GPU profile reads it."""
    return SimpleNamespace(key=key, count=count, device_type=device, self_cpu_time_total=cpu_us,
                           self_device_time_total=device_us)


def test_a_gpu_profile_counts_kernels_and_waits_per_update_and_the_gpus_busy_share() -> None:
    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    events = [event("aten::mm", 40, cpu, cpu_us=900, device_us=300_000),
              event("aten::_efficient_attention_backward", 8, cpu, cpu_us=200, device_us=100_000),
              event("aten::item", 2, cpu, cpu_us=50),
              event("cudaLaunchKernel", 500, cpu, cpu_us=4_000),
              event("cudaStreamSynchronize", 4, cpu, cpu_us=150_000),
              event("sm90_xmma_gemm_bf16", 40, cuda, device_us=300_000),
              event("fmha_cutlassB", 8, cuda, device_us=100_000),
              event("Memcpy HtoD (Pageable -> Device)", 2, cuda, device_us=100_000)]
    profile = summarise_events(events, updates=2, wall_s=2.0, on_gpu=True)
    assert profile["kernels_per_update"] == 25 and profile["waits_per_update"] == 2
    assert profile["device_busy"] == 0.25  # 0.5 s of kernels and copies in 2 s
    assert profile["top_operators"] == [["aten::mm", 0.6], ["aten::_efficient_attention_backward", 0.2],
                                        ["aten::item", 0.0]]

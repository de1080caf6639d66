"""bf16 autocast in training: on CUDA with ``train.amp``, on the CPU only with ``train.cpu_amp``; every head trains
under it with float32 weights, and a fixed head stays fixed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import nlgkit_command, tiny_recipe
from safetensors.torch import load_file
from test_heads import PAD, batch, make_head
from torch import nn

from nlgkit.core.config import TrainConfig
from nlgkit.heads import HEADS
from nlgkit.runs.loading import load_trained
from nlgkit.train import precision
from nlgkit.train.precision import precision_note, training_autocast, uses_autocast

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_which_devices_autocast() -> None:
    assert not uses_autocast(TrainConfig(), CPU)  # amp's default is CUDA's: CPU runs stay float32
    assert not uses_autocast(TrainConfig(amp=True, cpu_amp=False), CPU)
    assert uses_autocast(TrainConfig(amp=False, cpu_amp=True), CPU)  # a recipe's GPU choice does not bind the CPU
    assert uses_autocast(TrainConfig(amp=True, cpu_amp=False), CUDA)
    assert not uses_autocast(TrainConfig(amp=False, cpu_amp=True), CUDA)
    with training_autocast(TrainConfig(cpu_amp=True), CPU):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert nn.Linear(4, 3)(torch.randn(2, 4)).dtype == torch.bfloat16
    with training_autocast(TrainConfig(), CPU):
        assert not torch.is_autocast_enabled("cpu")


def test_a_cpu_without_bf16_instructions_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "cpu_bf16_instructions", list)
    note = precision_note(TrainConfig(cpu_amp=True), CPU)
    assert note.startswith("train.cpu_amp:") and "slower than float32" in note
    assert precision_note(TrainConfig(), CPU) == ""
    monkeypatch.setattr(precision, "cpu_bf16_instructions", lambda: ["amx_bf16"])
    assert precision_note(TrainConfig(cpu_amp=True), CPU) == ""


@pytest.mark.parametrize("name", HEADS.names())
def test_every_head_trains_under_cpu_autocast(name: str) -> None:
    """Its loss under autocast is float32 and near the float32 loss, it falls over a few Adam steps, the weights stay
    float32, and a head without trainable weights keeps its buffers bit for bit."""
    torch.manual_seed(0)
    head = make_head(name, d=16, vocab=40)
    encoder = nn.Linear(16, 16)  # the features are what learns
    features, targets = batch(b=4, t=6, d=16, vocab=40)
    before = {key: value.clone() for key, value in head.state_dict().items()}
    optimizer = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=0.02)
    autocast = training_autocast(TrainConfig(cpu_amp=True), CPU)
    with torch.no_grad():
        exact = float(head.loss(encoder(features), targets))
    losses = []
    for _ in range(8):
        with autocast:
            loss = head.loss(encoder(features), targets)
        assert loss.dtype == torch.float32 and torch.isfinite(loss)
        losses.append(float(loss.detach()))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[0] == pytest.approx(exact, rel=0.05)
    assert losses[-1] < losses[0] - 0.05 * abs(losses[0])
    assert all(p.dtype == torch.float32 for p in [*encoder.parameters(), *head.parameters()])
    if not list(head.parameters()):
        for key, value in head.state_dict().items():
            assert torch.equal(value, before[key]), key
    assert targets.eq(PAD).any()  # the batch has padding, which the loss ignores in both precisions


def _first_logged_loss(run_dir: Path) -> float:
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "train":
            return float(event["loss"])
    raise AssertionError(f"{run_dir}: no training line")


def test_a_cpu_amp_run_trains_in_bf16_and_keeps_float32_weights(tmp_path: Path, paper: tuple[Path, Any]) -> None:
    """The same tiny run in float32 and with ``train.cpu_amp``: the first logged losses differ (autocast is really
    on) by little, the fixed output layer is the same after training, and the checkpoint holds float32 weights."""
    runs = {}
    for label, cpu_amp in (("fp32", False), ("bf16", True)):
        run_dir = tmp_path / label
        recipe = tiny_recipe(tmp_path, paper[0], run_dir, max_updates=10, valid_limit=10, cpu_amp=cpu_amp)
        nlgkit_command(["train", str(recipe), "--device", "cpu"])
        runs[label] = run_dir
    fp32, bf16 = (_first_logged_loss(runs[label]) for label in ("fp32", "bf16"))
    assert fp32 != bf16 and bf16 == pytest.approx(fp32, rel=0.02)
    trained = {label: load_trained(run_dir, "last", "cpu") for label, run_dir in runs.items()}
    assert trained["bf16"].config.train.cpu_amp and not trained["fp32"].config.train.cpu_amp
    heads = {label: run.model.head.state_dict() for label, run in trained.items()}
    for key, value in heads["fp32"].items():
        assert torch.equal(value, heads["bf16"][key]), key  # the fixed head: regenerated from the seed, never trained
    saved = load_file(str(runs["bf16"] / "checkpoints" / "last" / "model.safetensors"))
    assert {tensor.dtype for tensor in saved.values()} == {torch.float32}  # as written, before any loading casts

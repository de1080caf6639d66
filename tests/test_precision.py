"""16-bit autocast in training: on CUDA with ``train.amp``, on the CPU only with ``train.cpu_amp``; every head trains
under it with float32 weights, and a fixed head stays fixed; float16 (``train.amp_dtype``, and GPUs without native
bf16) with a dynamic loss scale. And 16-bit inference (``--compute-type``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import nlgkit_command, tiny_recipe
from safetensors.torch import load_file
from test_heads import PAD, batch, make_head
from torch import nn
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.config import TrainConfig
from nlgkit.core.errors import ConfigError
from nlgkit.core.io import read_lines
from nlgkit.heads import HEADS
from nlgkit.runs.loading import load_trained
from nlgkit.train import precision
from nlgkit.train.precision import (
    autocast_dtype,
    loss_scaler,
    precision_label,
    precision_note,
    training_autocast,
    uses_autocast,
)

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
    starts = {label: json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0]) for label, run_dir in
              runs.items()}
    assert starts["fp32"]["precision"] == "float32" and starts["bf16"]["precision"] == "bf16 autocast"
    assert fp32 != bf16 and bf16 == pytest.approx(fp32, rel=0.02)
    trained = {label: load_trained(run_dir, "last", "cpu") for label, run_dir in runs.items()}
    assert trained["bf16"].config.train.cpu_amp and not trained["fp32"].config.train.cpu_amp
    heads = {label: run.model.head.state_dict() for label, run in trained.items()}
    for key, value in heads["fp32"].items():
        assert torch.equal(value, heads["bf16"][key]), key  # the fixed head: regenerated from the seed, never trained
    saved = load_file(str(runs["bf16"] / "checkpoints" / "last" / "model.safetensors"))
    assert {tensor.dtype for tensor in saved.values()} == {torch.float32}  # as written, before any loading casts


def test_translate_searches_and_scores_in_a_16_bit_compute_type(tmp_path: Path, paper: tuple[Path, Any]) -> None:
    """``translate --compute-type bfloat16 | float16``: the search and the forced scores run under autocast (the
    reference scores move off float32's by rounding, and no more), the outputs stay float32's but for near ties;
    CTranslate2's types are refused in one line for nlgkit's search."""
    data_dir = paper[0]
    run_dir = tmp_path / "run"
    nlgkit_command(["train", str(tiny_recipe(tmp_path, data_dir, run_dir, max_updates=60, valid_limit=10)),
                    "--device", "cpu"])
    source, reference = tmp_path / "src.de", tmp_path / "ref.en"
    source.write_text("".join(line + "\n" for line in read_lines(data_dir / "test.ref.de")[:60]), encoding="utf-8")
    reference.write_text("".join(line + "\n" for line in read_lines(data_dir / "test.ref.en")[:60]), encoding="utf-8")
    scores, outputs = {}, {}
    for compute_type in ("float32", "bfloat16", "float16"):
        base = ["translate", "-m", str(run_dir), "-i", str(source), "--device", "cpu", "--compute-type", compute_type]
        scored = CliRunner().invoke(app, [*base, "--score-reference", str(reference)])
        searched = CliRunner().invoke(app, [*base, "--beam", "3"])
        assert scored.exit_code == 0 and searched.exit_code == 0, (scored.output, searched.output)
        scores[compute_type] = [[float(v) for v in line.split("\t")] for line in scored.stdout.splitlines()]
        outputs[compute_type] = searched.stdout.splitlines()
    tokens = sum(count for _, count in scores["float32"])
    for compute_type in ("bfloat16", "float16"):  # measured: bf16 0.0017 nats per token (57 of 60 outputs the
        # same), fp16 0.0002 (60 of 60)
        moved = [abs(a - b) for (a, _), (b, _) in zip(scores[compute_type], scores["float32"], strict=True)]
        assert max(moved) > 1e-3 and sum(moved) / tokens < 0.02, (compute_type, moved)
        same = sum(a == b for a, b in zip(outputs[compute_type], outputs["float32"], strict=True))
        assert len(outputs[compute_type]) == 60 and same >= 50, compute_type
    refused = CliRunner().invoke(app, ["translate", "-m", str(run_dir), "--compute-type", "int8"], input="ein hund\n")
    assert refused.exit_code != 0 and refused.stdout == "" and refused.stderr.count("\n") == 1
    assert "--compute-type int8: nlgkit's search computes in float32, bfloat16, float16" in refused.stderr


def test_a_16_bit_compute_type_that_will_not_pay_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from nlgkit.runs import loading

    run = loading.TrainedRun(None, None, None, {}, Path("."), CPU, Path("."))  # type: ignore[arg-type]
    assert run.compute_note() == "" and run.computing_in("default").compute_type == "float32"
    assert "emulated on the CPU" in run.computing_in("float16").compute_note()
    monkeypatch.setattr(loading, "cpu_bf16_instructions", list)
    assert "no bf16 instructions" in run.computing_in("bfloat16").compute_note()
    monkeypatch.setattr(loading, "cpu_bf16_instructions", lambda: ["avx512_bf16"])
    assert run.computing_in("bfloat16").compute_note() == ""
    assert dataclasses.replace(run, device=CUDA).computing_in("float16").compute_note() == ""
    with pytest.raises(ConfigError, match="--compute-type int8_float32: nlgkit's search computes in"):
        run.computing_in("int8_float32")


def test_the_16_bit_type_is_bf16_where_native_else_float16_with_a_loss_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    assert autocast_dtype(TrainConfig(cpu_amp=True), CPU) == torch.bfloat16 and loss_scaler(
        TrainConfig(cpu_amp=True), CPU) is None
    assert autocast_dtype(TrainConfig(), CPU) is None and autocast_dtype(TrainConfig(amp=False), CUDA) is None
    half = TrainConfig(cpu_amp=True, amp_dtype="float16")
    assert autocast_dtype(half, CPU) == torch.float16 and isinstance(loss_scaler(half, CPU), torch.amp.GradScaler)
    with training_autocast(half, CPU):
        assert torch.get_autocast_dtype("cpu") == torch.float16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)  # a V100, a T4
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-32GB")
    assert autocast_dtype(TrainConfig(), CUDA) == torch.float16  # auto
    assert autocast_dtype(TrainConfig(amp_dtype="float16"), CUDA) == torch.float16
    with pytest.raises(ConfigError, match="'bfloat16': Tesla V100-SXM2-32GB does not compute bf16 natively"):
        autocast_dtype(TrainConfig(amp_dtype="bfloat16"), CUDA)
    assert precision_label(TrainConfig(), CUDA) == "float16 autocast with loss scaling"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # Ampere and later
    assert autocast_dtype(TrainConfig(), CUDA) == torch.bfloat16 and precision_label(TrainConfig(), CUDA) == \
        "bf16 autocast"
    assert precision_label(TrainConfig(amp=False), CUDA) == precision_label(TrainConfig(), CPU) == "float32"


class Overflowing(nn.Module):
    """An objective whose loss is ``scale`` × a squared error: large enough, its scaled gradients overflow float32."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(3))
        self.scale = 1.0

    def forward(self, batch: Any, loss_tokens: float, aux_weight: float = 1.0) -> tuple[torch.Tensor, ...]:
        loss = self.scale * (self.weight - 2.0).pow(2).sum()
        return loss, loss.detach(), {}


@pytest.mark.parametrize("name,after", [("sgd", 1.2), ("fused adam", 1.1)])
def test_a_float16_update_skips_a_step_whose_gradients_overflow_and_halves_the_scale(name: str, after: float) -> None:
    """SGD: 1 − 0.1 × (−2) = 1.2 after the real step; Adam's first step moves each weight by its rate, to 1.1 (the
    trainer's fused Adam takes the scaler's overflow flag inside its kernel)."""
    from nlgkit.train.update import optimizer_update

    class NoSchedule:
        def after_update(self) -> None:
            pass

    objective = Overflowing()
    optimizer = (torch.optim.SGD(objective.parameters(), lr=0.1) if name == "sgd" else
                 torch.optim.Adam(objective.parameters(), lr=0.1, fused=True))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    batch = type("Batch", (), {"num_target_tokens": 1})()
    objective.scale = 1e35  # × 65,536: inf in float32
    optimizer_update(objective, objective, optimizer, NoSchedule(), batch, clip_norm=1.0, scaler=scaler)
    assert torch.equal(objective.weight.detach(), torch.ones(3)) and scaler.get_scale() == 2.0**15
    objective.scale = 1.0  # its gradient −2 per weight, scaled back before the step
    optimizer_update(objective, objective, optimizer, NoSchedule(), batch, clip_norm=0.0, scaler=scaler)
    torch.testing.assert_close(objective.weight.detach(), torch.full((3,), after))
    assert scaler.get_scale() == 2.0**15


def test_a_float16_run_trains_with_a_loss_scale_that_is_logged_and_resumed(tmp_path: Path,
                                                                          paper: tuple[Path, Any]) -> None:
    """``amp_dtype = "float16"`` (here on the CPU, as on a V100): the run learns, its train lines carry the loss scale,
    and ``checkpoints/last`` keeps the scale, so a resumed run goes on with it."""
    run_dir = tmp_path / "fp16"
    recipe = tiny_recipe(tmp_path, paper[0], run_dir, max_updates=12, valid_limit=10, cpu_amp=True,
                         amp_dtype="float16")
    nlgkit_command(["train", str(recipe), "--device", "cpu"])
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [event for event in events if event["event"] == "train"]
    assert all(event["loss_scale"] >= 1.0 for event in train) and train[-1]["loss"] < train[0]["loss"]
    state = torch.load(run_dir / "checkpoints" / "last" / "train_state.pt", weights_only=True)
    assert state["scaler"]["scale"] == train[-1]["loss_scale"]
    nlgkit_command(["train", str(recipe), "--device", "cpu", "--resume", "--set", "train.max_updates=18"])
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [event["event"] for event in events].count("resume") == 1
    assert {event["precision"] for event in events if event["event"] in ("start", "resume")} == {
        "float16 autocast with loss scaling"}
    assert [event["update"] for event in events if event["event"] == "train"][-1] > 12

"""Gradient accumulation (``train.accumulate``): a group of batches makes the update of one batch holding them all,
and a run that accumulates counts, logs, checkpoints and resumes by updates."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
import torch
from helpers import nlgkit_command, tiny_recipe
from safetensors.torch import load_file

from nlgkit.core.errors import ConfigError
from nlgkit.core.recipes import load_recipe
from nlgkit.data.batching import bucketed_batches
from nlgkit.train.objective import TrainingObjective
from nlgkit.train.trainer import Trainer
from nlgkit.train.update import accumulated_update, optimizer_update


class NoSchedule:
    def after_update(self) -> None:
        pass


@pytest.mark.parametrize("head", ['type = "learned"', 'type = "fixed"\ninit = "l2"\nbias = "fixed"'])
def test_a_group_of_batches_updates_as_the_one_batch_that_holds_them(tmp_path: Path, paper: tuple[Path, dict],
                                                                    head: str) -> None:
    """SGD with rate 1 makes each update the gradient itself: accumulated over two batches by the trainer's step it
    equals the gradient of one batch of both (dropout off), and differs from the first batch's alone."""
    trainer = Trainer(load_recipe(tiny_recipe(tmp_path, paper[0], tmp_path / "run", dropout=0.0, head=head,
                                              clip_norm=0.0)))
    session = trainer.set_up()
    data, vocab = session.data.train, session.tgt_vocab
    first, second = bucketed_batches(data, 25, "sentences", seed=3, epoch=1)[:2]
    parts = [session.task.collate(data, indices, vocab) for indices in (first, second)]
    whole = session.task.collate(data, first + second, vocab)
    assert whole.num_target_tokens == sum(part.num_target_tokens for part in parts)

    def update(batches: list) -> dict[str, torch.Tensor]:
        model = copy.deepcopy(session.model)
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        trainer.train_step(dataclasses.replace(session, model=model, objective=TrainingObjective(model),
                                               optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
                                               scheduler=NoSchedule()), batches)
        return {name: before[name] - p.detach() for name, p in model.named_parameters()}

    accumulated, one_batch, first_alone = update(parts), update([whole]), update(parts[:1])
    gap = max(float((accumulated[k] - one_batch[k]).abs().max()) for k in one_batch)
    other = max(float((first_alone[k] - one_batch[k]).abs().max()) for k in one_batch)
    assert gap < 1e-6 and other > 1000 * gap, (gap, other)
    # the library's own entry points agree with the trainer's
    model = copy.deepcopy(session.model)
    optimizer_update(model, TrainingObjective(model), torch.optim.SGD(model.parameters(), lr=1.0), NoSchedule(),
                     whole, clip_norm=0.0)
    twin = copy.deepcopy(session.model)
    shares = [part.num_target_tokens / whole.num_target_tokens for part in parts]
    accumulated_update(twin, TrainingObjective(twin), torch.optim.SGD(twin.parameters(), lr=1.0), NoSchedule(),
                       parts, shares, clip_norm=0.0, loss_tokens=whole.num_target_tokens)
    assert max(float((a - b).detach().abs().max())
               for a, b in zip(model.parameters(), twin.parameters(), strict=True)) < 1e-6


def _events(run_dir: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if e["event"] == kind]


def test_a_run_accumulating_counts_updates_and_resumes_where_the_uninterrupted_one_ends(
        tmp_path: Path, paper: tuple[Path, dict]) -> None:
    """300 pairs in batches of 25: 12 batches, 6 updates of two; the same tokens as without accumulation; stopped
    after 4 updates (its batch 8) and resumed, the run ends with the uninterrupted run's weights."""
    def recipe(name: str, **settings: object) -> Path:
        return tiny_recipe(tmp_path, paper[0], tmp_path / name, max_epochs=1, log_every=1, valid_limit=10,
                           **settings)

    for name, settings in (("plain", {}), ("accumulated", {"accumulate": 2}), ("resumed", {"accumulate": 2})):
        argv = ["train", str(recipe(name, **settings)), "--device", "cpu"]
        if name == "resumed":
            nlgkit_command([*argv, "--set", "train.max_updates=4"])
            argv.append("--resume")
        nlgkit_command(argv)
    summaries = {name: json.loads((tmp_path / name / "summary.json").read_text())
                 for name in ("plain", "accumulated", "resumed")}
    assert summaries["plain"]["update"] == 12 and summaries["accumulated"]["update"] == 6
    assert summaries["plain"]["train_tokens"] == summaries["accumulated"]["train_tokens"]
    assert [e["update"] for e in _events(tmp_path / "accumulated", "train")] == [1, 2, 3, 4, 5, 6]
    resumed = _events(tmp_path / "resumed", "resume")
    assert resumed and resumed[0]["update"] == 4
    weights = {name: load_file(str(tmp_path / name / "checkpoints" / "last" / "model.safetensors"))
               for name in ("plain", "accumulated", "resumed")}
    assert all(torch.equal(weights["resumed"][k], weights["accumulated"][k]) for k in weights["accumulated"])
    assert any(not torch.equal(weights["plain"][k], weights["accumulated"][k]) for k in weights["plain"])
    with pytest.raises(ConfigError, match="train.accumulate = 0: must be positive"):
        load_recipe(recipe("bad"), ["train.accumulate=0"])

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
    accumulated_update(twin, TrainingObjective(twin), torch.optim.SGD(twin.parameters(), lr=1.0), NoSchedule(),
                       parts, [len(first) / 50, len(second) / 50], clip_norm=0.0, loss_tokens=whole.num_target_tokens)
    assert max(float((a - b).detach().abs().max())
               for a, b in zip(model.parameters(), twin.parameters(), strict=True)) < 1e-6


class WithExampleMeans(torch.nn.Module):
    """A stand-in objective whose auxiliary loss is a mean over the batch's examples, as a model's are (IMAGINATION's
    image loss without its in-batch negatives): one weight, read by the token loss and the example loss alike."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(0.5))

    def forward(self, batch, loss_tokens: float, aux_weight: float = 1.0):  # type: ignore[no-untyped-def]
        tokens = batch.targets.float() / 1000
        loss_sum = ((self.weight * tokens) ** 2 * batch.targets.ne(1)).sum()
        lengths = batch.targets.ne(1).sum(dim=1).float()
        aux = ((self.weight - lengths / 10) ** 2).mean()
        return loss_sum / loss_tokens + aux_weight * aux, loss_sum.detach(), {"example": aux.detach()}


def test_auxiliary_means_over_examples_accumulate_as_over_the_whole_batch(tmp_path: Path,
                                                                         paper: tuple[Path, dict]) -> None:
    """Two batches of 25 and 7 examples: their example losses weighted by 25/32 and 7/32 give the whole batch's."""
    trainer = Trainer(load_recipe(tiny_recipe(tmp_path, paper[0], tmp_path / "run", clip_norm=0.0)))
    session = trainer.set_up()
    data, vocab = session.data.train, session.tgt_vocab
    first, second = bucketed_batches(data, 25, "sentences", seed=3, epoch=1)[:2]
    parts = [session.task.collate(data, indices, vocab) for indices in (first, second[:7])]
    whole = session.task.collate(data, first + second[:7], vocab)

    def gradient(batches: list) -> tuple[float, float]:
        stand_in = WithExampleMeans()
        _, aux = trainer.train_step(dataclasses.replace(
            session, model=stand_in, objective=stand_in, optimizer=torch.optim.SGD(stand_in.parameters(), lr=1.0),
            scheduler=NoSchedule()), batches)
        return 0.5 - float(stand_in.weight.detach()), float(aux["example"])

    (accumulated, logged), (one_batch, whole_aux) = gradient(parts), gradient([whole])
    assert accumulated == pytest.approx(one_batch, rel=1e-5) and logged == pytest.approx(whole_aux, rel=1e-5)
    token_weighted = WithExampleMeans()  # what weighting by tokens instead would give: another gradient
    counts = [part.num_target_tokens for part in parts]
    accumulated_update(token_weighted, token_weighted, torch.optim.SGD(token_weighted.parameters(), lr=1.0),
                       NoSchedule(), parts, [n / sum(counts) for n in counts], clip_norm=0.0,
                       loss_tokens=sum(counts))
    assert abs(0.5 - float(token_weighted.weight.detach()) - one_batch) > 0.01 * abs(one_batch)


def _events(run_dir: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if e["event"] == kind]


def test_a_run_accumulating_counts_updates_and_resumes_where_the_uninterrupted_one_ends(
        tmp_path: Path, paper: tuple[Path, dict]) -> None:
    """300 pairs in batches of 25: 12 batches, 3 updates of five, five and two; the same tokens as without
    accumulation; stopped after 2 updates (its batch 10) and resumed, the run ends with the uninterrupted run's
    weights."""
    def recipe(name: str, **settings: object) -> Path:
        return tiny_recipe(tmp_path, paper[0], tmp_path / name, max_epochs=1, log_every=1, valid_limit=10,
                           **settings)

    for name, settings in (("plain", {}), ("accumulated", {"accumulate": 5}), ("resumed", {"accumulate": 5})):
        argv = ["train", str(recipe(name, **settings)), "--device", "cpu"]
        if name == "resumed":
            nlgkit_command([*argv, "--set", "train.max_updates=2"])
            argv.append("--resume")
        nlgkit_command(argv)
    summaries = {name: json.loads((tmp_path / name / "summary.json").read_text())
                 for name in ("plain", "accumulated", "resumed")}
    assert summaries["plain"]["update"] == 12 and summaries["accumulated"]["update"] == 3
    assert summaries["plain"]["train_tokens"] == summaries["accumulated"]["train_tokens"]
    assert [e["update"] for e in _events(tmp_path / "accumulated", "train")] == [1, 2, 3]
    resumed = _events(tmp_path / "resumed", "resume")
    assert resumed and resumed[0]["update"] == 2
    weights = {name: load_file(str(tmp_path / name / "checkpoints" / "last" / "model.safetensors"))
               for name in ("plain", "accumulated", "resumed")}
    assert all(torch.equal(weights["resumed"][k], weights["accumulated"][k]) for k in weights["accumulated"])
    assert any(not torch.equal(weights["plain"][k], weights["accumulated"][k]) for k in weights["plain"])
    with pytest.raises(ConfigError, match="train.accumulate = 0: must be positive"):
        load_recipe(recipe("bad"), ["train.accumulate=0"])

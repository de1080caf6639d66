"""Data-parallel training under torchrun: two gloo processes on CPU, compared with one process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import nlgkit_command, tiny_recipe
from safetensors.torch import load_file

from nlgkit.core.errors import ConfigError
from nlgkit.core.recipes import load_recipe
from nlgkit.train import trainer as trainer_module
from nlgkit.train.distributed import Ranks

GLOBAL_BATCH = 24  # 300 training pairs: 13 batches per epoch, the last of 12


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "checkpoints" / "last" / "model.safetensors"))


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def train(recipe: Path, *args: str, ranks: int = 1) -> subprocess.CompletedProcess[str]:
    """``nlgkit train`` as a user runs it: alone, or under torchrun with ``ranks`` gloo processes."""
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
                if ranks > 1 else [sys.executable])
    environ = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([*launcher, "-m", "nlgkit", "train", str(recipe), "--device", "cpu",
                             "--set", "train.num_threads=1", *args],
                            check=False, capture_output=True, text=True, timeout=300, env=environ)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def runs(paper: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Six updates of the same recipe: one process (this one); two ranks (torchrun); two ranks stopped after three
    and resumed (and a copy of that run as it stopped: ``two_at_three``, for a test to resume otherwise); half the
    batch in one process, alone and with gradients accumulated over two batches, and the latter on two ranks."""
    tmp = tmp_path_factory.mktemp("ddp")
    out = {}
    for name in ("one", "two", "two_resumed", "half_batch", "one_accumulated", "two_accumulated"):
        batch = GLOBAL_BATCH if name in ("one", "two", "two_resumed") else GLOBAL_BATCH // 2
        accumulate = 2 if name.endswith("accumulated") else 1
        out[name] = tmp / name
        recipe = tiny_recipe(tmp, paper[0], out[name], dropout=0.0, batch_size=batch, max_updates=6, log_every=2,
                             accumulate=accumulate)
        if name == "two_resumed":
            train(recipe, "--set", "train.max_updates=3", ranks=2)
            out["two_at_three"] = tmp / "two_at_three"
            shutil.copytree(out[name], out["two_at_three"])
            out["two_at_three_recipe"] = recipe
            train(recipe, "--resume", ranks=2)
        elif name.startswith("two"):
            train(recipe, ranks=2)
        else:  # one process: in this one, as other tests train (a subprocess would import torch again)
            nlgkit_command(["train", str(recipe), "--device", "cpu", "--set", "train.num_threads=1"])
    return out


def test_two_ranks_take_the_steps_of_one_process_with_the_same_global_batch(runs: dict[str, Path]) -> None:
    one, two = weights(runs["one"]), weights(runs["two"])
    ddp_gap = max_difference(one, two)
    # the check can fail: one process with half the batch ends far from it
    other_batch_gap = max_difference(one, weights(runs["half_batch"]))
    assert ddp_gap < 1e-4 and other_batch_gap > 100 * ddp_gap, (ddp_gap, other_batch_gap)
    # the same updates and tokens were counted, and the logged loss is that of the whole global batch
    one_events, two_events = events(runs["one"]), events(runs["two"])
    train_one = [e for e in one_events if e["event"] == "train"]
    train_two = [e for e in two_events if e["event"] == "train"]
    assert [e["update"] for e in train_one] == [e["update"] for e in train_two] == [2, 4, 6]
    assert [e["loss"] for e in train_two] == pytest.approx([e["loss"] for e in train_one], rel=1e-4)
    # the ranks' shares are disjoint and cover the batch: together they saw the one process's tokens
    assert [e["tokens"] for e in train_two] == [e["tokens"] for e in train_one]
    summaries = [json.loads((runs[n] / "summary.json").read_text()) for n in ("one", "two")]
    assert summaries[0]["train_tokens"] == summaries[1]["train_tokens"] > 0


def test_two_ranks_accumulating_take_the_steps_of_one_process_accumulating(runs: dict[str, Path]) -> None:
    """Each update sums two batches' gradients, each batch shared by the ranks, which average once an update."""
    one, two = weights(runs["one_accumulated"]), weights(runs["two_accumulated"])
    ddp_gap = max_difference(one, two)
    other_gap = max_difference(one, weights(runs["half_batch"]))  # the same batches, one update each
    assert ddp_gap < 1e-4 and other_gap > 100 * ddp_gap, (ddp_gap, other_gap)
    train_one, train_two = (events(runs[name]) for name in ("one_accumulated", "two_accumulated"))
    assert [e["update"] for e in train_one if e["event"] == "train"] == [2, 4, 6]
    assert [e["tokens"] for e in train_two if e["event"] == "train"] == \
        [e["tokens"] for e in train_one if e["event"] == "train"]


def test_only_rank_zero_writes(runs: dict[str, Path]) -> None:
    two = events(runs["two"])
    assert [e["event"] for e in two].count("start") == 1
    assert next(e for e in two if e["event"] == "start")["world_size"] == 2
    assert len(two) == len(events(runs["one"]))  # no event written twice
    files = sorted(p.relative_to(runs["two"]).as_posix() for p in runs["two"].rglob("*"))
    assert files == sorted(p.relative_to(runs["one"]).as_posix() for p in runs["one"].rglob("*"))


def test_an_interrupted_two_rank_run_resumes_where_the_uninterrupted_one_ends(runs: dict[str, Path]) -> None:
    assert max_difference(weights(runs["two"]), weights(runs["two_resumed"])) == 0.0
    resumed = [e for e in events(runs["two_resumed"]) if e["event"] == "resume"]
    assert resumed and resumed[0]["update"] == 3 and resumed[0]["saved_world_size"] == 2


def test_a_run_of_two_ranks_resumes_in_one_process_and_says_what_changes(runs: dict[str, Path]) -> None:
    run_dir = runs["two_at_three"]  # stopped by two ranks after three updates
    result = train(runs["two_at_three_recipe"], "--run-dir", str(run_dir), "--resume", "--set", "train.max_updates=5")
    said = [line for line in result.stderr.splitlines() if "saved by 2 rank(s), resumed by 1" in line]
    assert said and len(said[0]) > 80  # one line in a log file, however long its path (no wrap at 80 columns)
    assert json.loads((run_dir / "summary.json").read_text())["update"] == 5
    resumed = [e for e in events(run_dir) if e["event"] == "resume"]
    assert [(e["update"], e["saved_world_size"]) for e in resumed] == [(3, 2)]


def test_ranks_come_from_torchrun_and_share_each_batch_disjointly() -> None:
    assert Ranks.from_environment({}) == Ranks(0, 1, 0)
    ranks = [Ranks.from_environment({"RANK": str(r), "WORLD_SIZE": "3", "LOCAL_RANK": str(r)}) for r in range(3)]
    batch = list(range(10, 21))
    shares = [r.shard(batch) for r in ranks]
    assert sorted(i for share in shares for i in share) == batch and all(len(s) in (3, 4) for s in shares)
    assert not ranks[0].can_share([1, 2]) and ranks[0].can_share([1, 2, 3])
    with pytest.raises(ConfigError, match="RANK=3 is not inside WORLD_SIZE=3"):
        Ranks.from_environment({"RANK": "3", "WORLD_SIZE": "3"})


class _Stop(Exception):
    """Ends a set-up once the data is read (a model wrapped for two ranks needs their process group)."""


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_zero_reads_the_data_while_the_others_wait_then_they_read_what_it_wrote(
        rank: int, paper: tuple[Path, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 prepares, binarises and extracts features alone; the others read after the barrier, so the work is
    done once and they map its caches."""
    said: list[str] = []
    monkeypatch.setattr(Ranks, "from_environment", classmethod(lambda cls, environ=None: cls(rank, 2, rank)))
    monkeypatch.setattr(Ranks, "join", lambda self, device: None)
    monkeypatch.setattr(Ranks, "barrier", lambda self: said.append("barrier"))
    read = trainer_module.Trainer._read_data

    def reading(self: trainer_module.Trainer, task: object, device: torch.device) -> object:
        said.append("read")
        return read(self, task, device)  # type: ignore[arg-type]

    def stop(*args: object, **kwargs: object) -> None:
        raise _Stop

    monkeypatch.setattr(trainer_module.Trainer, "_read_data", reading)
    monkeypatch.setattr(trainer_module, "build_model", stop)
    with pytest.raises(_Stop):
        trainer_module.Trainer(load_recipe(tiny_recipe(tmp_path, paper[0], tmp_path / "run"))).set_up()
    assert said == (["read", "barrier"] if rank == 0 else ["barrier", "read"])

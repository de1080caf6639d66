"""Checkpoint averaging and the epoch checkpoints it reads.

Averaging copies of one checkpoint gives it back bit for bit; two checkpoints average to their element-wise
mean; a run keeps the last and best ``train.keep_epochs`` epochs; ``nlgkit average`` writes a run directory that
loads and translates like any other, records its sources, and refuses bad requests in one line without writing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import tiny_recipe
from safetensors.torch import load_file
from torch import nn
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import CheckpointError, ConfigError
from nlgkit.core.io import sha256_file
from nlgkit.core.recipes import load_recipe
from nlgkit.runs.averaging import average_weights
from nlgkit.runs.checkpoint import save_checkpoint
from nlgkit.runs.epochs import epoch_checkpoints, prune_epoch_checkpoints, select_epochs
from nlgkit.runs.loading import load_trained


def cli(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), input=input)


class Tiny(nn.Module):
    def __init__(self, weight: torch.Tensor, steps: int = 7) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.register_buffer("low", weight.to(torch.bfloat16))
        self.register_buffer("steps", torch.tensor(steps))


def test_averaging_copies_of_one_checkpoint_gives_it_back_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "a", Tiny(torch.randn(50, 7)), {"config": {}})
    averaged = average_weights([tmp_path / "a"] * 3)
    original = load_file(str(tmp_path / "a" / "model.safetensors"))
    assert averaged.keys() == original.keys()
    assert all(torch.equal(averaged[k], original[k]) and averaged[k].dtype == original[k].dtype for k in original)


def test_two_checkpoints_average_to_their_mean_and_integer_tensors_must_agree(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "a", Tiny(torch.tensor([1.0, 2.0, -3.0])), {"config": {}})
    save_checkpoint(tmp_path / "b", Tiny(torch.tensor([2.0, 4.0, 3.0])), {"config": {}})
    averaged = average_weights([tmp_path / "a", tmp_path / "b"])
    assert averaged["weight"].tolist() == [1.5, 3.0, 0.0]
    assert averaged["low"].dtype == torch.bfloat16 and averaged["low"].tolist() == [1.5, 3.0, 0.0]
    assert averaged["steps"].item() == 7
    save_checkpoint(tmp_path / "c", Tiny(torch.tensor([2.0, 4.0, 3.0]), steps=8), {"config": {}})
    with pytest.raises(CheckpointError, match="'steps'.*not a floating-point tensor"):
        average_weights([tmp_path / "a", tmp_path / "c"])
    save_checkpoint(tmp_path / "d", Tiny(torch.zeros(4)), {"config": {}})
    with pytest.raises(CheckpointError, match=r"'(low|weight)' is \(4,\) torch.\w+, but \(3,\)"):
        average_weights([tmp_path / "a", tmp_path / "d"])


def fake_epochs(run_dir: Path, scores: list[float]) -> None:
    """Epoch checkpoints 1… with these validation BLEU scores (files present; the weights are not read)."""
    for epoch, score in enumerate(scores, start=1):
        directory = run_dir / "checkpoints" / f"epoch_{epoch:03d}"
        directory.mkdir(parents=True)
        (directory / "model.safetensors").write_bytes(b"")
        (directory / "meta.json").write_text(json.dumps({"config": {}, "metrics": {"bleu": score}}))


def test_a_run_keeps_its_last_and_best_epochs(tmp_path: Path) -> None:
    fake_epochs(tmp_path, [5.0, 9.0, 7.0, 3.0, 4.0, 2.0])
    removed = prune_epoch_checkpoints(tmp_path, 2, "bleu")
    assert sorted(p.name for p in removed) == ["epoch_001", "epoch_004"]  # neither among the last 2 nor best 2
    assert [c.epoch for c in epoch_checkpoints(tmp_path, "bleu")] == [2, 3, 5, 6]
    assert [c.epoch for c in select_epochs(tmp_path, "bleu", last=2)] == [5, 6]
    with pytest.raises(CheckpointError, match=r"the last 3 epochs are 4-6, not all kept \(missing: 4; epochs kept: "
                                              r"2, 3, 5, 6\)"):  # never the best epoch 3 in the pruned 4's place
        select_epochs(tmp_path, "bleu", last=3)
    assert [c.epoch for c in select_epochs(tmp_path, "bleu", best=2)] == [2, 3]
    with pytest.raises(CheckpointError, match="5 epoch checkpoints wanted, only 4 kept .epochs kept: 2, 3, 5, 6."):
        select_epochs(tmp_path, "bleu", best=5)
    with pytest.raises(CheckpointError, match="exactly one of --last N and --best N"):
        select_epochs(tmp_path, "bleu", last=1, best=1)
    assert prune_epoch_checkpoints(tmp_path, 0, "bleu") and epoch_checkpoints(tmp_path, "bleu") == []


@pytest.mark.parametrize("metrics,message", [({"bleu": "n/a"}, r"metrics\.bleu = 'n/a': not a number"),
                                             ({"bleu": True}, r"metrics\.bleu = True: not a number"),
                                             ([1], r"metrics = \[1\]: not a table of scores")])
def test_an_epoch_whose_meta_records_no_number_is_refused_naming_the_file(tmp_path: Path, metrics: object,
                                                                         message: str) -> None:
    """Epochs are ranked by their recorded scores: one that is not a number is an error naming its meta.json, not a
    traceback from float() (``nlgkit average --best`` and pruning rank them)."""
    fake_epochs(tmp_path / "run", [5.0, 9.0])
    meta = tmp_path / "run" / "checkpoints" / "epoch_002" / "meta.json"
    meta.write_text(json.dumps({"config": {}, "metrics": metrics}))
    with pytest.raises(CheckpointError, match=f"{meta}: {message}"):
        epoch_checkpoints(tmp_path / "run", "bleu")
    with pytest.raises(CheckpointError, match=f"{meta}: {message}"):
        select_epochs(tmp_path / "run", "bleu", best=2)


def test_keep_epochs_is_checked(tmp_path: Path) -> None:
    recipe = tmp_path / "r.toml"
    recipe.write_text('[data]\ndir = "d"\n')
    assert load_recipe(recipe).train.keep_epochs == 3
    with pytest.raises(ConfigError, match="train.keep_epochs = -1: must be 0 or positive"):
        load_recipe(recipe, ["train.keep_epochs=-1"])


@pytest.mark.parametrize("override,message", [("train.seed=-1", r"train\.seed = -1: must be in \[0, 4294967295\]"),
                                              ("train.seed=4294967296", r"train\.seed = 4294967296: must be in"),
                                              ('run.dir=""', r"run\.dir = '': empty path"),
                                              ('data.dir=" "', r"data\.dir = ' ': empty path")])
def test_seeds_outside_every_librarys_range_and_empty_directories_are_refused(tmp_path: Path, override: str,
                                                                              message: str) -> None:
    """A seed torch, numpy or gensim would reject deep inside a run, and an empty run or data directory (pathlib reads
    it as the current folder, into which a run would write its checkpoints), are refused as the recipe is read."""
    recipe = tmp_path / "r.toml"
    recipe.write_text('[data]\ndir = "d"\n')
    assert load_recipe(recipe, ["train.seed=4294967295"]).train.seed == 4294967295
    with pytest.raises(ConfigError, match=message):
        load_recipe(recipe, [override])


@pytest.mark.parametrize("args", [["train", "RECIPE", "--dry-run", "--run-dir", ""],
                                  ["train", "RECIPE", "--dry-run", "--vocab-size", "-5"],
                                  ["embed", "random", "--vocab", "VOCAB", "-o", "OUT", "--seed", "-1"],
                                  ["evaluate", "--hyp", "VOCAB", "--ref", "VOCAB", "--compare", "VOCAB", "--seed",
                                   "4294967296"]])
def test_an_empty_run_directory_a_seed_or_a_count_out_of_range_is_a_usage_error(tmp_path: Path, args: list[str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # (where an empty run directory would have written)
    recipe, vocab = tmp_path / "r.toml", tmp_path / "vocab.txt"
    recipe.write_text('[data]\ndir = "d"\n')
    vocab.write_text("a\nb\n")
    paths = {"RECIPE": str(recipe), "VOCAB": str(vocab), "OUT": str(tmp_path / "out.safetensors")}
    result = cli(*[paths.get(arg, arg) for arg in args])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{args[-2]}'" in result.output, result.output
    assert not (tmp_path / "out.safetensors").exists() and not (tmp_path / "checkpoints").exists()


# -- a real run, through the CLI ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run(paper: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Multi30K DE-EN run of 3 epochs that keeps the last and best 2."""
    tmp = tmp_path_factory.mktemp("average")
    run_dir = tmp / "run"
    result = cli("train", str(tiny_recipe(tmp, paper[0], run_dir, max_epochs=3, keep_epochs=2, valid_limit=20)))
    assert result.exit_code == 0, result.output
    return run_dir


SOURCE = "ein mann fährt fahrrad .\nzwei hunde spielen im schnee .\n"


def test_training_keeps_epoch_checkpoints_without_training_state(run: Path) -> None:
    kept = [c.epoch for c in epoch_checkpoints(run, "bleu")]
    assert kept[-2:] == [2, 3] and len(kept) <= 3
    assert not (run / "checkpoints" / "epoch_003" / "train_state.pt").exists()
    meta = json.loads((run / "checkpoints" / "epoch_003" / "meta.json").read_text())
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert meta["metrics"]["bleu"] == [e for e in events if e["event"] == "valid"][-1]["bleu"]
    last = load_file(str(run / "checkpoints" / "last" / "model.safetensors"))
    epoch3 = load_file(str(run / "checkpoints" / "epoch_003" / "model.safetensors"))
    assert all(torch.equal(last[k], epoch3[k]) for k in last)  # the last epoch's weights


def test_average_of_two_copies_is_the_checkpoint_and_translates_as_it(run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    shutil.copytree(copy / "checkpoints" / "epoch_003", copy / "checkpoints" / "epoch_004")
    result = cli("average", str(copy), "--last", "2", "-o", str(tmp_path / "avg"))
    assert result.exit_code == 0, result.output
    averaged = load_file(str(tmp_path / "avg" / "checkpoints" / "best" / "model.safetensors"))
    epoch3 = load_file(str(run / "checkpoints" / "epoch_003" / "model.safetensors"))
    assert averaged.keys() == epoch3.keys() and all(torch.equal(averaged[k], epoch3[k]) for k in epoch3)
    single = cli("translate", "-m", str(run), "--checkpoint", str(run / "checkpoints" / "epoch_003"),
                 "--nbest", "2", "--device", "cpu", input=SOURCE)
    from_average = cli("translate", "-m", str(tmp_path / "avg"), "--nbest", "2", "--device", "cpu", input=SOURCE)
    assert single.exit_code == 0 and from_average.exit_code == 0, (single.output, from_average.output)
    assert from_average.stdout == single.stdout and single.stdout.strip()


def test_average_writes_a_run_that_loads_like_any_other_and_names_its_sources(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "avg"
    result = cli("average", str(run), "--last", "2", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "average of epochs 2" in result.stdout
    sources = [run / "checkpoints" / "epoch_002", run / "checkpoints" / "epoch_003"]
    two = [load_file(str(path / "model.safetensors")) for path in sources]
    averaged = load_trained(out, "best", "cpu").model.state_dict()
    for key, value in two[0].items():
        if value.is_floating_point():
            expected = ((value.double() + two[1][key].double()) / 2).to(value.dtype)
            assert torch.equal(averaged[key], expected), key
    provenance = json.loads((out / "provenance.json").read_text())
    recorded = provenance["averaged_from"]
    assert recorded["run_dir"] == str(run) and recorded["selection"] == "last 2"
    assert [c["epoch"] for c in recorded["checkpoints"]] == [2, 3]
    assert [c["sha256"] for c in recorded["checkpoints"]] == [sha256_file(p / "model.safetensors") for p in sources]
    assert provenance["env"] == json.loads((run / "provenance.json").read_text())["env"]  # where it was trained
    config = json.loads((out / "config.json").read_text())
    assert config["run"]["dir"] == str(out) and "(average of last 2 epochs)" in config["run"]["name"]
    assert sorted(p.name for p in (out / "data").iterdir()) == sorted(p.name for p in (run / "data").iterdir())
    assert json.loads((out / "checkpoints" / "last" / "meta.json").read_text())["averaged_from"] == recorded
    translated = cli("translate", "-m", str(out), "--device", "cpu", input=SOURCE)
    assert translated.exit_code == 0 and len(translated.stdout.splitlines()) == 2


@pytest.mark.parametrize("args,message", [
    (["--last", "2", "--best", "2"], "exactly one of --last N and --best N"),
    ([], "exactly one of --last N and --best N"),
    (["--last", "9"], "9 epoch checkpoints wanted"),
])
def test_bad_requests_are_one_line_and_write_nothing(run: Path, tmp_path: Path, args: list[str],
                                                     message: str) -> None:
    out = tmp_path / "avg"
    result = cli("average", str(run), *args, "-o", str(out))
    assert result.exit_code != 0 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr and not out.exists() and list(tmp_path.iterdir()) == []


def test_existing_output_mismatched_checkpoints_and_missing_runs_are_refused(run: Path, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    result = cli("average", str(run), "--last", "2", "-o", str(tmp_path / "taken"))
    assert result.exit_code != 0 and "already exists" in result.stderr
    result = cli("average", str(tmp_path / "nowhere"), "--last", "2", "-o", str(tmp_path / "avg"))
    assert result.exit_code != 0 and "run directory not found" in result.stderr
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    meta_path = copy / "checkpoints" / "epoch_003" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["config"]["model"]["decoder_dim"] = 32
    meta_path.write_text(json.dumps(meta))
    result = cli("average", str(copy), "--last", "2", "-o", str(tmp_path / "avg"))
    assert result.exit_code != 0 and "[model] differs" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "avg").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["copy", "taken"]

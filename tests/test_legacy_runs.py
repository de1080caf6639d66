"""Run directories written before the layered package (commit 94a9d5b, tests/fixtures/legacy_94a9d5b) still
load and give the outputs they gave then."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.config import TrainConfig, config_from_dict, to_dict
from nlgkit.runs.loading import load_trained

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy_94a9d5b"
IMAGES = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k-1k" / "images"


def test_an_old_translation_config_loads_with_the_same_settings() -> None:
    raw = json.loads((LEGACY / "translation_config.json").read_text())
    config = config_from_dict(raw, "translation_config.json")
    assert (config.task.type, config.data.src_lang, config.data.tgt_lang) == ("translation", "de", "en")
    kept, old = to_dict(config)["data"], raw["data"]
    dropped = {key: old["prepare"][key] for key in set(old["prepare"]) - set(kept["prepare"])}
    assert dropped == {"images": "", "captions": "", "karpathy": ""}  # captioning's keys, at their defaults
    added = {key: value for key, value in kept.items() if key not in old}
    assert added == {"id_cache": True}  # data keys added since load at their defaults (the binarised-ids cache)
    kept = {key: value for key, value in kept.items() if key not in added}
    assert kept == {**old, "prepare": {k: v for k, v in old["prepare"].items() if k not in dropped}}


def test_an_old_captioning_config_drops_only_the_keys_captioning_never_read() -> None:
    raw = json.loads((LEGACY / "captioning" / "config.json").read_text())
    config = config_from_dict(raw, "config.json")
    assert not hasattr(config.data, "src_lang") and not hasattr(config.data.prepare, "subword")
    kept = to_dict(config)
    assert kept["data"]["dir"] == raw["data"]["dir"] and kept["data"]["tgt_lang"] == raw["data"]["tgt_lang"]
    assert kept["model"] == raw["model"] and kept["head"] == raw["head"]
    # train keys added since (train.keep_epochs, train.tensorboard, …) load at their defaults
    added = {key: value for key, value in kept["train"].items() if key not in raw["train"]}
    assert kept["train"] == {**raw["train"], **added}
    assert added == {key: value for key, value in to_dict(TrainConfig()).items() if key in added}


def test_an_old_captioning_run_captions_as_it_did(tmp_path: Path) -> None:
    names = (LEGACY / "images.txt").read_text().split()
    if not all((IMAGES / name).is_file() for name in names):
        pytest.skip(f"{IMAGES} not available")
    run = load_trained(LEGACY / "captioning", "best", "cpu")
    assert run.config.task.type == "captioning" and run.source_vocab is None
    result = CliRunner().invoke(app, ["caption", "--model", str(LEGACY / "captioning"), "--device", "cpu",
                                      *[str(IMAGES / name) for name in names]])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == (LEGACY / "captions_by_94a9d5b.txt").read_text().splitlines()

"""Fine-tuning: a corpus prepared ``--like`` another data directory, and a run that starts from a trained run's
weights (``train.init_from``) with a fresh optimizer, refusing checkpoints whose vocabularies or model differ."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import nlgkit_command, tiny_recipe

from nlgkit.core.errors import CheckpointError, ConfigError, DataError
from nlgkit.core.io import read_json, read_lines, sha256_file
from nlgkit.core.recipes import load_recipe
from nlgkit.data.prepare import prepare_parallel
from nlgkit.runs.loading import load_trained
from nlgkit.train.init_from import function_settings
from nlgkit.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]


def raw_slice(source: Path, out: Path, first: int, count: int) -> dict[str, str]:
    """Multi30K's raw train lines [first, first + count) and the first 40 validation and test lines as
    ``{split}.{lang}`` files; returns the prefixes for :func:`prepare_parallel`."""
    out.mkdir(parents=True, exist_ok=True)
    splits = {"train": ("train", first, count), "valid": ("val", 0, 40), "test": ("test_2016_flickr", 0, 40)}
    for split, (name, start, n) in splits.items():
        for lang in ("de", "en"):
            with gzip.open(source / "task1" / "raw" / f"{name}.{lang}.gz", "rt", encoding="utf-8") as handle:
                lines = handle.read().splitlines()[start : start + n]
            (out / f"{split}.{lang}").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return {split: str(out / split) for split in splits}


def prepare(prefixes: dict[str, str], out: Path, **options: object) -> dict:
    return prepare_parallel(out, prefixes["train"], prefixes["valid"], prefixes["test"], "de", "en", **options)


def test_a_corpus_prepared_like_another_is_tokenised_segmented_and_indexed_as_it(
        tmp_path: Path, multi30k_source: Path) -> None:
    parent_dir = tmp_path / "parent"
    parent = prepare(raw_slice(multi30k_source, tmp_path / "a", 0, 400), parent_dir, subword="bpe:300",
                     min_freq=1, lowercase=False)
    # the parent's first 150 training lines again, and 150 lines it never saw
    child = prepare(raw_slice(multi30k_source, tmp_path / "b", 0, 150), tmp_path / "same", like=parent_dir)
    other = prepare(raw_slice(multi30k_source, tmp_path / "c", 5000, 150), tmp_path / "other", like=parent_dir,
                    max_len=30)
    for name in ("vocab.de.txt", "vocab.en.txt", "bpe.de.codes", "bpe.en.codes"):
        assert sha256_file(tmp_path / "same" / name) == sha256_file(parent_dir / name), name
        assert (tmp_path / "other" / name).read_bytes() == (parent_dir / name).read_bytes(), name
    for lang in ("de", "en"):  # the same raw lines give the parent's tokens, subword pieces and all
        assert read_lines(tmp_path / "same" / f"train.{lang}") == read_lines(parent_dir / f"train.{lang}")[:150]
        assert read_lines(tmp_path / "same" / f"test.{lang}") == read_lines(parent_dir / f"test.{lang}")
    assert {key: child[key] for key in ("tokenizer", "lowercase", "subword", "min_freq")} == \
        {"tokenizer": "spacy", "lowercase": False, "subword": "bpe:300", "min_freq": 1}
    assert child["like"] == {"dir": str(parent_dir.resolve()),
                             "manifest_sha256": sha256_file(parent_dir / "manifest.json"),
                             "vocab_sha256": {lang: sha256_file(parent_dir / f"vocab.{lang}.txt")
                                              for lang in ("de", "en")}}
    assert child["vocab_size"] == parent["vocab_size"] and other["max_len"] == 30
    # pieces the parent's training text never had are unknown words: none in text it was trained on
    assert child["unknown_token_share"]["train"] == {"de": 0.0, "en": 0.0}
    assert all(0 < share < 0.2 for share in other["unknown_token_share"]["train"].values())


def test_preparing_like_a_directory_of_another_pair_or_none_is_refused(
        tmp_path: Path, multi30k_source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefixes = raw_slice(multi30k_source, tmp_path / "raw", 0, 50)
    prepare(prefixes, tmp_path / "de-en")
    with pytest.raises(SystemExit) as stopped:  # options of its own would be ignored: said, not silently
        nlgkit_command(["prepare", "parallel", "--train", prefixes["train"], "--valid", prefixes["valid"], "--test",
                        prefixes["test"], "--src", "de", "--tgt", "en", "--out", str(tmp_path / "z"), "--like",
                        str(tmp_path / "de-en"), "--subword", "bpe:100", "--no-lowercase"])
    assert stopped.value.code != 0 and not (tmp_path / "z").exists()
    assert capsys.readouterr().err.strip().endswith("the text options come from that directory; leave out "
                                                    "--lowercase, --subword")
    with pytest.raises(DataError, match="prepared for de-en, not en-de"):
        prepare_parallel(tmp_path / "x", prefixes["train"], prefixes["valid"], prefixes["test"], "en", "de",
                         like=tmp_path / "de-en")
    with pytest.raises(DataError, match="no manifest.json there"):
        prepare(prefixes, tmp_path / "y", like=tmp_path / "raw")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()  # nothing half-written


@pytest.fixture(scope="module")
def parent_run(tmp_path_factory: pytest.TempPathFactory, multi30k_source: Path) -> tuple[Path, Path]:
    """A tiny run trained on 300 Multi30K pairs, and a corpus of 300 other pairs prepared like its data."""
    tmp = tmp_path_factory.mktemp("init_from")
    data = tmp / "data"
    prepare(raw_slice(multi30k_source, tmp / "raw_a", 0, 300), data)
    prepare(raw_slice(multi30k_source, tmp / "raw_b", 300, 300), tmp / "new_data", like=data)
    run = tmp / "parent"
    nlgkit_command(["train", str(tiny_recipe(tmp, data, run, max_epochs=4, valid_limit=20)), "--device", "cpu"])
    return run, tmp / "new_data"


def _first_loss(run_dir: Path) -> float:
    return next(json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
                if json.loads(line)["event"] == "train")


def test_a_fine_tuning_run_starts_from_the_parent_weights_with_a_fresh_optimizer(
        tmp_path: Path, parent_run: tuple[Path, Path]) -> None:
    parent, new_data = parent_run
    recipe = tiny_recipe(tmp_path, new_data, tmp_path / "child", max_updates=5, valid_limit=10, dropout=0.3,
                         init_from=str(parent))  # dropout only shapes training: it may differ
    session = Trainer(load_recipe(recipe)).set_up()
    best = load_trained(parent, "best", "cpu").model.state_dict()
    for key, value in session.model.state_dict().items():
        assert torch.equal(value, best[key]), key
    assert session.optimizer.state_dict()["state"] == {}
    nlgkit_command(["train", str(recipe), "--device", "cpu"])
    fresh = tiny_recipe(tmp_path, new_data, tmp_path / "fresh", max_updates=5, valid_limit=10, dropout=0.3)
    nlgkit_command(["train", str(fresh), "--device", "cpu"])
    # the new pairs are new to both, but the fine-tuned model already translates: its loss starts far lower
    assert _first_loss(tmp_path / "child") < _first_loss(tmp_path / "fresh") - 1.0
    started = read_json(tmp_path / "child" / "provenance.json")["init_from"]
    checkpoint = parent / "checkpoints" / "best"
    assert started["checkpoint"] == str(checkpoint.resolve())
    assert started["model_sha256"] == sha256_file(checkpoint / "model.safetensors")
    assert started["epoch"] == read_json(checkpoint / "meta.json")["loop"]["epoch"]
    start = json.loads((tmp_path / "child" / "metrics.jsonl").read_text().splitlines()[0])
    assert start["event"] == "start" and start["init_from"] == started["checkpoint"]
    # resuming continues from the run's own checkpoint: the parent is not read again
    moved = tmp_path / "parent_moved"
    shutil.move(str(parent), moved)
    try:
        nlgkit_command(["train", str(recipe), "--device", "cpu", "--resume", "--set", "train.max_updates=8"])
    finally:
        shutil.move(str(moved), parent)
    assert read_json(tmp_path / "child" / "summary.json")["update"] == 8
    with pytest.raises(CheckpointError, match="train.init_from was .* now ''; a resumed run continues"):
        Trainer(load_recipe(recipe, ["train.init_from=''"]), resume=True).run()


def test_a_checkpoint_that_does_not_fit_is_refused_in_one_line(tmp_path: Path, parent_run: tuple[Path, Path],
                                                                 multi30k_source: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    parent, new_data = parent_run
    own_vocab = tmp_path / "own_vocab"
    prepare(raw_slice(multi30k_source, tmp_path / "raw", 300, 300), own_vocab)  # its own vocabularies
    cases = [
        (tiny_recipe(tmp_path, own_vocab, tmp_path / "a", init_from=str(parent)),
         "vocabulary of this run's data differs from the one"),
        (tiny_recipe(tmp_path, new_data, tmp_path / "b", init_from=str(parent),
                     model='type = "rnn"\nembedding_dim = 48\nencoder_dim = 64\ndecoder_dim = 32\n'
                           'attention_dim = 48\npre_output_dim = 64'),
         "was trained with model.decoder_dim = 64, this recipe has 32"),
        (tiny_recipe(tmp_path, new_data, tmp_path / "c", init_from=str(tmp_path / "nowhere")),
         "no checkpoint there"),
    ]
    for recipe, message in cases:
        with pytest.raises(SystemExit) as stopped:
            nlgkit_command(["train", str(recipe), "--device", "cpu"])
        assert stopped.value.code != 0
        error = capsys.readouterr().err.strip()
        assert error.startswith("error:") and message in error and "\n" not in error, error
        assert not (Path(recipe).parent / Path(recipe).stem / "checkpoints").exists()
    with pytest.raises(CheckpointError, match="differs"):
        Trainer(load_recipe(cases[0][0])).set_up()
    with pytest.raises(ConfigError, match="train.init_from and embeddings tables are both set"):
        load_recipe(tiny_recipe(tmp_path, new_data, tmp_path / "d", init_from=str(parent)),
                    ["embeddings.source='table.safetensors'"])


def test_settings_of_training_alone_may_change_when_fine_tuning() -> None:
    """Each config class names the settings that shape training alone: IMAGINATION's image-loss weight and margin
    (fine-tuning it as a text model: weight 0), dropout, sampled softmax; a width is part of the function."""
    imagination = ROOT / "recipes" / "hirasawa" / "imagination_en-de.toml"
    base = function_settings(load_recipe(imagination))
    same = ["model.image_loss_weight=0.0", "model.margin=0.2", "model.dropout=0.1", "head.sampling.share=0.5"]
    assert function_settings(load_recipe(imagination, same)) == base
    assert "model.image_loss_weight" not in base and "model.latent_dim" in base
    assert function_settings(load_recipe(imagination, ["model.latent_dim=1024"])) != base
    assert function_settings(load_recipe(imagination, ["head.type='fixed'"])) != base

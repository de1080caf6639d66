"""Caption corpora → data directories, on the real files beside the checkout (small slices of them)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.data.caption_sources import prepare_captions
from nlgkit.data.captions import basic_tokenize
from nlgkit.data.vocab import Vocabulary
from nlgkit.errors import DataError
from nlgkit.io import sha256_file

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SMALL = DATA / "flickr8k-1k"
FLICKR8K = DATA / "flickr8k"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def records(out: Path, split: str) -> list[dict]:
    return [json.loads(line) for line in (out / f"{split}.jsonl").read_text().splitlines()]


def test_basic_tokenisation() -> None:
    assert basic_tokenize("A black dog, and a tri-colored dog's ball .") == \
        ["a", "black", "dog", "and", "a", "tri", "colored", "dog", "s", "ball"]


def test_caption_csv_with_split_files(tmp_path: Path) -> None:
    need(SMALL)
    out = tmp_path / "small"
    manifest = prepare_captions(out, "captions", images=SMALL / "images", captions=str(SMALL / "captions.txt"),
                                splits_dir=SMALL, log=lambda _: None)
    assert manifest["splits"] == {"train": {"images": 600, "captions": 3000}, "valid": {"images": 100, "captions": 500},
                                  "test": {"images": 100, "captions": 500}}
    for split in ("train", "valid", "test"):
        for record in records(out, split):
            assert len(record["refs"]) == len(record["tokens"]) == 5
            assert all(t == " ".join(basic_tokenize(r)) for t, r in zip(record["tokens"], record["refs"]))
    vocab = Vocabulary.load(out / "vocab.en.txt")
    assert len(vocab) == manifest["vocab_size"] and min(vocab.counts[4:]) >= 5
    assert all(manifest["files"][name] == sha256_file(out / name) for name in manifest["files"])
    assert manifest["images_dir"] == str((SMALL / "images").resolve()) and manifest["skipped_count"] == 0


def test_flickr8k_official_splits_and_bad_images(tmp_path: Path) -> None:
    need(FLICKR8K)
    images = tmp_path / "images"
    images.mkdir()
    by_split = {name: (FLICKR8K / name).read_text().split()[:12] for name in
                ("Flickr_8k.trainImages.txt", "Flickr_8k.devImages.txt", "Flickr_8k.testImages.txt")}
    keep = {image for names in by_split.values() for image in names}
    for name, names in by_split.items():
        (tmp_path / name).write_text("\n".join(names) + "\n")
    lines = [line for line in (FLICKR8K / "Flickr8k.token.txt").read_text().splitlines()
             if line.split("#")[0] in keep]
    (tmp_path / "Flickr8k.token.txt").write_text("\n".join(lines) + "\n")
    for image in keep:
        shutil.copy(FLICKR8K / "images" / image, images / image)
    train = by_split["Flickr_8k.trainImages.txt"]
    (images / train[0]).write_bytes(b"")  # zero bytes
    (images / train[1]).write_bytes((FLICKR8K / "images" / train[1]).read_bytes()[:500])  # truncated
    (images / train[2]).write_text("not a jpeg")
    (images / train[3]).unlink()  # missing
    logged: list[str] = []
    manifest = prepare_captions(tmp_path / "out", "flickr8k", images=images,
                                captions=str(tmp_path / "Flickr8k.token.txt"), min_freq=1, log=logged.append)
    assert manifest["splits"]["train"] == {"images": 8, "captions": 40}
    assert manifest["splits"]["valid"]["images"] == manifest["splits"]["test"]["images"] == 12
    assert manifest["skipped_count"] == 4 == len(logged)
    reasons = {entry["image"]: entry["reason"] for entry in manifest["skipped"]}
    assert reasons[train[0]] == "empty file" and "unreadable" in reasons[train[1]]
    assert "not an image" in reasons[train[2]] and "not found" in reasons[train[3]]
    assert all(any(image in line for line in logged) for image in train[:4])


def test_coco_annotations_with_missing_images(tmp_path: Path) -> None:
    annotations = need(DATA / "coco-captions" / "captions_val2017.json")
    empty = tmp_path / "none"
    empty.mkdir()
    with pytest.raises(DataError, match="no usable images"):
        prepare_captions(tmp_path / "out", "coco", images=empty, captions=str(annotations), log=lambda _: None)
    data = json.loads(annotations.read_text())
    ids = sorted(image["id"] for image in data["images"])
    names = {image["id"]: image["file_name"] for image in data["images"]}
    present = [names[i] for i in ids[:3]] + [names[i] for i in ids[-3:]]  # first half → valid, second → test
    present += ["train_0001.jpg"]
    images = tmp_path / "images"
    images.mkdir()
    sample = min(need(SMALL / "images").iterdir())
    for name in present:
        shutil.copy(sample, images / name)
    train = tmp_path / "captions_train2017.json"
    train.write_text(json.dumps({"images": [{"id": 1, "file_name": "train_0001.jpg"}],
                                 "annotations": [{"image_id": 1, "caption": "a photo"}]}))
    manifest = prepare_captions(tmp_path / "out", "coco", images=images, captions=f"{annotations},{train}",
                                min_freq=1, log=lambda _: None)
    assert manifest["splits"]["valid"]["images"] == 3 and manifest["splits"]["test"]["images"] == 3
    assert manifest["splits"]["train"]["images"] == 1
    assert manifest["skipped_count"] == 5000 - 6  # every other val2017 image, named in the manifest


def test_karpathy_split_file(tmp_path: Path) -> None:
    sample = sorted(need(SMALL / "images").iterdir())[:4]
    (tmp_path / "val2014").mkdir()
    entries = []
    for i, (path, split) in enumerate(zip(sample, ("train", "restval", "val", "test"))):
        shutil.copy(path, tmp_path / "val2014" / path.name)
        entries.append({"filepath": "val2014", "filename": path.name, "split": split,
                        "sentences": [{"raw": f"A dog number {i}."}, {"raw": "A dog."}]})
    karpathy = tmp_path / "dataset_coco.json"
    karpathy.write_text(json.dumps({"images": entries}))
    manifest = prepare_captions(tmp_path / "out", "coco", images=tmp_path, karpathy=str(karpathy), min_freq=1,
                                log=lambda _: None)
    assert {split: c["images"] for split, c in manifest["splits"].items()} == {"train": 2, "valid": 1, "test": 1}
    assert records(tmp_path / "out", "valid")[0]["image"].startswith("val2014/")
    entries[0]["split"] = "holdout"
    karpathy.write_text(json.dumps({"images": entries}))
    with pytest.raises(DataError, match=r"images\[0\]\.split"):
        prepare_captions(tmp_path / "out2", "coco", images=tmp_path, karpathy=str(karpathy), log=lambda _: None)


def test_multi30k_task2_captions_find_flickr8k_names(tmp_path: Path) -> None:
    multi30k = need(DATA / "multi30k")
    need(FLICKR8K)
    source = tmp_path / "m30k"
    (source / "task1" / "image_splits").mkdir(parents=True)
    (source / "task2" / "raw").mkdir(parents=True)
    images = tmp_path / "images"
    images.mkdir()
    flickr8k = {path.name.split("_")[0]: path for path in FLICKR8K.joinpath("images").glob("*_*.jpg")}
    for prefix, names_file in (("train", "train.txt"), ("val", "val.txt"), ("test_2016", "test_2016_flickr.txt")):
        names = (multi30k / "task1" / "image_splits" / names_file).read_text().split()
        picked = [i for i, n in enumerate(names) if n.split(".")[0] in flickr8k][:3]
        (source / "task1" / "image_splits" / names_file).write_text("\n".join(names[i] for i in picked) + "\n")
        for i in picked:
            found = flickr8k[names[i].split(".")[0]]
            shutil.copy(found, images / found.name)
        for n in range(1, 6):
            with gzip.open(multi30k / "task2" / "raw" / f"{prefix}.{n}.en.gz", "rt") as handle:
                lines = handle.read().splitlines()
            with gzip.open(source / "task2" / "raw" / f"{prefix}.{n}.en.gz", "wt") as handle:
                handle.write("\n".join(lines[i] for i in picked) + "\n")
    manifest = prepare_captions(tmp_path / "out", "multi30k", images=images, source=str(source), min_freq=1,
                                log=lambda _: None)
    assert all(c == {"images": 3, "captions": 15} for c in manifest["splits"].values())
    assert all("_" in r["image"] for r in records(tmp_path / "out", "train"))  # Flickr8k file names


def test_prepare_commands_and_one_line_errors(tmp_path: Path) -> None:
    need(SMALL)
    runner = CliRunner()
    result = runner.invoke(app, ["prepare", "captions", "--csv", str(SMALL / "captions.txt"), "--images",
                                 str(SMALL / "images"), "--splits", str(SMALL), "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert "600" in result.output and (tmp_path / "c" / "manifest.json").is_file()
    bad = tmp_path / "bad.csv"
    bad.write_text("image,caption\nonly-a-name\n")
    result = runner.invoke(app, ["prepare", "captions", "--csv", str(bad), "--images", str(SMALL / "images"),
                                 "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "line 2" in result.output and str(bad) in result.output
    assert not (tmp_path / "d").exists()
    result = runner.invoke(app, ["prepare", "flickr8k", "--images", str(tmp_path), "--captions",
                                 str(tmp_path / "missing.txt"), "--out", str(tmp_path / "e")])
    assert result.exit_code == 2 and "missing.txt" in result.output

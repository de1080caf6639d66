"""Caption corpora → data directories, on the real files beside the checkout (small slices of them)."""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import sha256_file
from nlgkit.data.caption_sources import (
    prepare_caption_csv,
    prepare_captions,
    prepare_coco,
    prepare_flickr8k,
    prepare_karpathy,
    prepare_multi30k_captions,
)
from nlgkit.data.captions import basic_tokenize, hash_split
from nlgkit.data.vocab import Vocabulary

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SMALL = DATA / "flickr8k-1k"
FLICKR8K = DATA / "flickr8k"
MISSING = "2258277193_586949ec62.jpg"  # named by Flickr8k.token.txt, absent from the dataset itself


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def records(out: Path, split: str) -> list[dict]:
    return [json.loads(line) for line in (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()]


def quiet(_: str) -> None:
    pass


def photos(n: int) -> list[Path]:
    return sorted(need(SMALL / "images").iterdir())[:n]


def test_basic_tokenisation() -> None:
    assert basic_tokenize("A black dog, and a tri-colored dog's ball .") == \
        ["a", "black", "dog", "and", "a", "tri-colored", "dog", "s", "ball"]
    assert basic_tokenize("A dog 's ball") == basic_tokenize("A dog's ball")  # pre-tokenised = raw
    assert basic_tokenize('"Two" MEN (in a t-shirt) -- 2 merry-go -round!') == \
        ["two", "men", "in", "a", "t-shirt", "2", "merry-go", "round"]
    assert basic_tokenize("Zwei Männer am Straßenrand.") == ["zwei", "männer", "am", "straßenrand"]
    assert basic_tokenize(" . , ") == []


def test_hash_split_is_a_stable_80_10_10() -> None:
    names = [f"{i}.jpg" for i in range(2000)]
    splits = [hash_split(name) for name in names]
    assert splits == [hash_split(name) for name in names]
    assert 1500 < splits.count("train") < 1700 and 150 < splits.count("valid") < 250


def test_caption_csv_with_split_files(tmp_path: Path) -> None:
    need(SMALL)
    out = tmp_path / "small"
    manifest = prepare_caption_csv(out, SMALL / "captions.txt", SMALL / "images", SMALL, log=quiet)
    assert manifest["splits"] == {"train": {"images": 600, "captions": 3000},
                                  "valid": {"images": 100, "captions": 500},
                                  "test": {"images": 100, "captions": 500}}
    for split in ("train", "valid", "test"):
        rows = records(out, split)
        assert [r["image"] for r in rows] == sorted(r["image"] for r in rows)
        for record in rows:
            assert len(record["refs"]) == len(record["tokens"]) == 5
            assert all(t == " ".join(basic_tokenize(r)) for t, r in zip(record["tokens"], record["refs"]))
            assert all(r == r.strip() and r for r in record["refs"])
    vocab = Vocabulary.load(out / "vocab.en.txt")
    assert len(vocab) == manifest["vocab_size"] and min(vocab.counts[4:]) >= 5
    train_counts: dict[str, int] = {}
    for record in records(out, "train"):
        for caption in record["tokens"]:
            for word in caption.split():
                train_counts[word] = train_counts.get(word, 0) + 1
    assert set(vocab.tokens[4:]) == {w for w, c in train_counts.items() if c >= 5}  # train only, ≥ 5
    assert set(manifest["files"]) == {"train.jsonl", "valid.jsonl", "test.jsonl", "vocab.en.txt"}
    assert all(manifest["files"][name] == sha256_file(out / name) for name in manifest["files"])
    assert manifest["inputs"]["captions"]["sha256"] == sha256_file(SMALL / "captions.txt")
    assert manifest["images_dir"] == str((SMALL / "images").resolve()) and manifest["skipped_count"] == 0
    assert manifest["kind"] == "captions" and manifest["options"]["min_freq"] == 5
    assert not list(tmp_path.glob(".small*"))  # no staging directory left behind


def test_caption_csv_hash_split_and_max_len(tmp_path: Path) -> None:
    images = photos(40)
    rows = ["image,caption"] + [f'{p.name},"A dog, running."' for p in images] + \
        [f"{p.name},A very long caption about a dog that runs on the grass" for p in images]
    (tmp_path / "c.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    manifest = prepare_caption_csv(tmp_path / "out", tmp_path / "c.csv", SMALL / "images", max_len=4,
                                   min_freq=1, log=quiet)
    expected = {split: sorted(p.name for p in images if hash_split(p.name) == split) for split in
                ("train", "valid", "test")}
    assert all(expected.values())
    for split, names in expected.items():
        assert [r["image"] for r in records(tmp_path / "out", split)] == names
    assert all(r["tokens"] == ["a dog running"] and r["refs"] == ["A dog, running."]
               for r in records(tmp_path / "out", "train"))  # the long caption is dropped from train only
    assert all(len(r["refs"]) == 2 for r in records(tmp_path / "out", "test"))
    assert manifest["train_captions_dropped"] == len(expected["train"])
    assert manifest["options"]["max_len"] == 4


@pytest.fixture()
def flickr8k_slice(tmp_path: Path) -> Path:
    """The real token file and split lists cut to 40 / 15 / 15 images (+ the missing image listed in train),
    and an images directory of links to the real files."""
    need(FLICKR8K)
    images = tmp_path / "images"
    images.mkdir()
    keep = set()
    for name, count in (("Flickr_8k.trainImages.txt", 40), ("Flickr_8k.devImages.txt", 15),
                        ("Flickr_8k.testImages.txt", 15)):
        names = (FLICKR8K / name).read_text().split()[:count]
        keep.update(names)
        for image in names:
            (images / image).symlink_to(FLICKR8K / "images" / image)
        if "train" in name:
            names.append(MISSING)
        (tmp_path / name).write_text("\n".join(names) + "\n")
    unassigned = (FLICKR8K / "Flickr_8k.trainImages.txt").read_text().split()[-1]
    keep.update((MISSING, unassigned))
    lines = [line for line in (FLICKR8K / "Flickr8k.token.txt").read_text().splitlines()
             if line.split("#")[0] in keep]
    (tmp_path / "Flickr8k.token.txt").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_flickr8k_official_splits_and_bad_images(flickr8k_slice: Path) -> None:
    images = flickr8k_slice / "images"
    train = (flickr8k_slice / "Flickr_8k.trainImages.txt").read_text().split()
    (images / train[0]).unlink()
    (images / train[0]).write_bytes(b"")  # zero bytes
    data = (FLICKR8K / "images" / train[1]).read_bytes()
    (images / train[1]).unlink()
    (images / train[1]).write_bytes(data[: len(data) // 2])  # truncated JPEG
    (images / train[2]).unlink()
    (images / train[2]).write_text("not a jpeg")
    logged: list[str] = []
    manifest = prepare_flickr8k(flickr8k_slice / "out", images, flickr8k_slice / "Flickr8k.token.txt",
                                min_freq=1, log=logged.append)
    assert manifest["splits"]["train"] == {"images": 37, "captions": 185}
    assert manifest["splits"]["valid"] == manifest["splits"]["test"] == {"images": 15, "captions": 75}
    reasons = {entry["image"]: entry["reason"] for entry in manifest["skipped"]}
    assert manifest["skipped_count"] == 4 == len(reasons)
    assert reasons[train[0]] == "empty file" and "unreadable" in reasons[train[1]]
    assert "not an image" in reasons[train[2]] and reasons[MISSING] == "file not found"
    assert all(entry["split"] == "train" for entry in manifest["skipped"])
    for image in (*train[:3], MISSING):
        assert sum(image in line for line in logged) == 1  # one warning line each
    assert manifest["unassigned_count"] == 1 and manifest["options"]["splits"].startswith("official")
    assert {"captions", "split.train", "split.valid", "split.test"} <= set(manifest["inputs"])


def test_flickr8k_bad_inputs_leave_nothing(flickr8k_slice: Path) -> None:
    token = flickr8k_slice / "Flickr8k.token.txt"
    lines = token.read_text().splitlines()
    token.write_text("\n".join(lines[:3] + ["no tab on this line"] + lines[3:]) + "\n")
    with pytest.raises(DataError, match=r"Flickr8k\.token\.txt: line 4: expected"):
        prepare_flickr8k(flickr8k_slice / "out", flickr8k_slice / "images", token, log=quiet)
    token.write_text("\n".join(lines) + "\n")
    dev = flickr8k_slice / "Flickr_8k.devImages.txt"
    first_train = (flickr8k_slice / "Flickr_8k.trainImages.txt").read_text().split()[0]
    dev.write_text(dev.read_text() + first_train + "\n")
    with pytest.raises(DataError, match="line 16: .* also listed in"):
        prepare_flickr8k(flickr8k_slice / "out", flickr8k_slice / "images", token, log=quiet)
    with pytest.raises(DataError, match="split file not found"):
        prepare_flickr8k(flickr8k_slice / "out", flickr8k_slice / "images", token, flickr8k_slice / "images",
                         log=quiet)
    assert not (flickr8k_slice / "out").exists() and not list(flickr8k_slice.glob(".out*"))


def test_coco_val2017_annotations(tmp_path: Path) -> None:
    annotations = need(DATA / "coco-captions" / "captions_val2017.json")
    empty = tmp_path / "none"
    empty.mkdir()
    with pytest.raises(DataError, match=f"no usable images in {empty} \\(5000 skipped"):
        prepare_coco(tmp_path / "out", empty, [annotations], log=quiet)
    assert not (tmp_path / "out").exists()

    data = json.loads(annotations.read_text())
    names = sorted(image["file_name"] for image in data["images"])
    present = [next(n for n in names if hash_split(n) == split) for split in ("train", "valid", "test")]
    present += [n for n in names if hash_split(n) == "train"][1:4]
    images = tmp_path / "images"
    images.mkdir()
    for name, photo in zip(present, photos(len(present))):
        shutil.copy(photo, images / name)
    logged: list[str] = []
    manifest = prepare_coco(tmp_path / "out", images, [annotations], min_freq=1, log=logged.append)
    assert {s: c["images"] for s, c in manifest["splits"].items()} == {"train": 4, "valid": 1, "test": 1}
    assert manifest["skipped_count"] == 5000 - 6 == len(logged)  # every other val2017 image, named
    assert {r["image"] for r in records(tmp_path / "out", "valid")} == {present[1]}
    caption_count = sum(1 for note in data["annotations"] if note["image_id"] == next(
        image["id"] for image in data["images"] if image["file_name"] == present[1]))
    assert manifest["splits"]["valid"]["captions"] == caption_count >= 5

    # With a train file, val2017 is split in halves by image id: lowest ids valid, highest test.
    by_id = sorted(data["images"], key=lambda image: image["id"])
    halves = [by_id[0]["file_name"], by_id[-1]["file_name"]]
    for name, photo in zip(halves, photos(2)):
        shutil.copy(photo, images / name)
    train = tmp_path / "captions_train2017.json"
    train.write_text(json.dumps({"images": [{"id": 1, "file_name": "train_0001.jpg"}],
                                 "annotations": [{"image_id": 1, "caption": "A photo."}]}))
    shutil.copy(photos(1)[0], images / "train_0001.jpg")
    manifest = prepare_captions(tmp_path / "out", "coco", images=images, captions=f"{annotations},{train}",
                                min_freq=1, log=quiet)  # a recipe's [data.prepare], replacing the directory
    assert manifest["splits"]["train"] == {"images": 1, "captions": 1}
    assert halves[0] in {r["image"] for r in records(tmp_path / "out", "valid")}
    assert halves[1] in {r["image"] for r in records(tmp_path / "out", "test")}


def test_coco_malformed_annotations(tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    path = tmp_path / "captions_val.json"
    for content, message in (
        ({"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"image_id": 1}]},
         r"annotations\[0\]: missing key 'caption'"),
        ({"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [{"image_id": 7, "caption": "x"}]},
         r"annotations\[0\]\.image_id = 7: no such entry"),
        ({"images": [{"id": "1", "file_name": "a.jpg"}], "annotations": []},
         r"images\[0\]\.id = '1': expected int"),
        ({"annotations": []}, "list 'images'"),
    ):
        path.write_text(json.dumps(content))
        with pytest.raises(DataError, match=message):
            prepare_coco(tmp_path / "out", images, [path], log=quiet)
    path.write_text('{"images": [,]}')
    with pytest.raises(DataError, match="line 1: invalid JSON"):
        prepare_coco(tmp_path / "out", images, [path], log=quiet)
    with pytest.raises(DataError, match="cannot tell the split"):
        prepare_coco(tmp_path / "out", images, [tmp_path / "captions_2017.json"], log=quiet)
    with pytest.raises(ConfigError, match="not both"):
        prepare_coco(tmp_path / "out", images, [path], tmp_path / "dataset_coco.json", log=quiet)


def test_karpathy_split_file(tmp_path: Path) -> None:
    sample = photos(5)
    (tmp_path / "val2014").mkdir()
    entries = []
    for i, (path, split) in enumerate(zip(sample, ("train", "restval", "val", "test", "test"))):
        folder = tmp_path if i == 4 else tmp_path / "val2014"  # the last one: every image in one folder
        shutil.copy(path, folder / path.name)
        entries.append({"filepath": "val2014", "filename": path.name, "split": split,
                        "sentences": [{"raw": f"A dog number {i}."}, {"raw": "A dog."}]})
    karpathy = tmp_path / "dataset_coco.json"
    karpathy.write_text(json.dumps({"dataset": "coco", "images": entries}))
    manifest = prepare_karpathy(tmp_path / "out", karpathy, tmp_path, min_freq=1, log=quiet)
    assert manifest["corpus"] == "coco"
    assert {s: c["images"] for s, c in manifest["splits"].items()} == {"train": 2, "valid": 1, "test": 2}
    assert records(tmp_path / "out", "valid")[0]["image"] == f"val2014/{sample[2].name}"
    test_images = {r["image"] for r in records(tmp_path / "out", "test")}
    assert test_images == {f"val2014/{sample[3].name}", sample[4].name}
    assert records(tmp_path / "out", "valid")[0]["refs"] == ["A dog number 2.", "A dog."]
    for change, message in (({"split": "holdout"}, r"images\[0\]\.split = 'holdout'"),
                            ({"sentences": [{"tokens": []}]},
                             r"images\[0\]\.sentences\[0\]: missing key 'raw'")):
        broken = [dict(entries[0], **change)] + entries[1:]
        karpathy.write_text(json.dumps({"images": broken}))
        with pytest.raises(DataError, match=message):
            prepare_karpathy(tmp_path / "out2", karpathy, tmp_path, log=quiet)
    assert not (tmp_path / "out2").exists()


def test_multi30k_task2_finds_flickr8k_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    multi30k = need(DATA / "multi30k")
    need(FLICKR8K)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    flickr8k = {path.name.split("_")[0]: path for path in (FLICKR8K / "images").glob("*_*.jpg")}
    images = tmp_path / "images"
    images.mkdir()
    expected = {}
    for split, names_file in (("train", "train.txt"), ("valid", "val.txt"), ("test", "test_2016_flickr.txt")):
        names = (multi30k / "task1" / "image_splits" / names_file).read_text().split()
        picked = [n for n in names if n.split(".")[0] in flickr8k][:3]
        for name in picked:
            (images / flickr8k[name.split(".")[0]].name).symlink_to(flickr8k[name.split(".")[0]])
        expected[split] = (names, picked)
    manifest = prepare_multi30k_captions(tmp_path / "out", images, lang="de", source=str(multi30k),
                                         min_freq=1, log=quiet)
    assert all(c == {"images": 3, "captions": 15} for c in manifest["splits"].values())
    assert manifest["skipped_count"] == 29000 + 1014 + 1000 - 9 and manifest["lang"] == "de"
    rows = records(tmp_path / "out", "train")
    assert {r["image"] for r in rows} == {flickr8k[n.split(".")[0]].name for n in expected["train"][1]}
    first = expected["train"][0].index(expected["train"][1][0])  # the caption files follow the image list
    with gzip.open(multi30k / "task2" / "raw" / "train.3.de.gz", "rt", encoding="utf-8") as handle:
        third = handle.read().splitlines()[first]
    record = next(r for r in rows if r["image"] == flickr8k[expected["train"][1][0].split(".")[0]].name)
    assert record["refs"][2] == third.strip() and (tmp_path / "out" / "vocab.de.txt").is_file()
    with pytest.raises(ConfigError, match="no language 'fr'"):
        prepare_multi30k_captions(tmp_path / "o", images, lang="fr", source=str(multi30k), log=quiet)


    # The same files from a URL (download.DEFAULT_URL's form: the repository's data/task1/raw/).
    handler = functools.partial(Quiet, directory=str(multi30k))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/task1/raw/"
        via_url = prepare_multi30k_captions(tmp_path / "url", images, lang="de", source=url, min_freq=1,
                                            log=quiet)
    finally:
        server.shutdown()
        server.server_close()
    assert via_url["files"] == manifest["files"]
    base = url.removesuffix("task1/raw/")
    assert via_url["inputs"]["train.1.de.gz"]["path"] == base + "task2/raw/train.1.de.gz"
    assert via_url["inputs"]["train.1.de.gz"]["sha256"] == manifest["inputs"]["train.1.de.gz"]["sha256"]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_bad_images_in_a_split_are_named(tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    good = photos(6)
    for photo in good:
        shutil.copy(photo, images / photo.name)
    (images / "zero.jpg").write_bytes(b"")
    (images / "cut.jpg").write_bytes(good[0].read_bytes()[:300])
    (images / "text.jpg").write_text("hello")
    (images / "folder.jpg").mkdir()
    (tmp_path / "train.txt").write_text("\n".join([p.name for p in good[:4]] +
                                                  ["zero.jpg", "cut.jpg", "text.jpg", "folder.jpg"]))
    (tmp_path / "val.txt").write_text(good[4].name + "\nno-captions.jpg\n")
    (tmp_path / "test.txt").write_text(good[5].name + "\n")
    named = [p.name for p in good] + ["zero.jpg", "cut.jpg", "text.jpg", "folder.jpg"]
    (tmp_path / "c.csv").write_text("".join(f"{name},A dog.\n" for name in named))  # no header
    logged: list[str] = []
    manifest = prepare_caption_csv(tmp_path / "out", tmp_path / "c.csv", images, tmp_path, min_freq=1,
                                   log=logged.append)
    reasons = {entry["image"]: entry["reason"] for entry in manifest["skipped"]}
    assert set(reasons) == {"zero.jpg", "cut.jpg", "text.jpg", "folder.jpg", "no-captions.jpg"}
    assert reasons["zero.jpg"] == "empty file" and reasons["folder.jpg"] == "not a regular file"
    assert reasons["no-captions.jpg"] == "no captions"
    assert reasons["cut.jpg"].startswith("unreadable image")
    assert reasons["text.jpg"].startswith("not an image")
    assert manifest["skipped_count"] == 5 == len(logged) and manifest["splits"]["train"]["images"] == 4


def test_prepare_commands_and_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need(SMALL)
    runner = CliRunner()
    result = runner.invoke(app, ["prepare", "captions", "--csv", str(SMALL / "captions.txt"), "--images",
                                 str(SMALL / "images"), "--splits", str(SMALL), "--out", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert "600" in result.stdout and "3,000" in result.stdout
    assert (tmp_path / "c" / "manifest.json").is_file()

    def one_line_error(args: list[str], *expected: str) -> None:
        result = runner.invoke(app, ["prepare", *args])
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
        assert all(text in lines[0] for text in expected), lines[0]

    bad = tmp_path / "bad.csv"
    bad.write_text("image,caption\nonly-a-name\n")
    csv_args = ["captions", "--csv", str(bad), "--images", str(SMALL / "images"), "--out", f"{tmp_path}/d"]
    one_line_error(csv_args, str(bad), "line 2")
    bad.write_bytes(b"image,caption\na.jpg,fine\nb.jpg,caf\xe9\n")
    one_line_error(csv_args, str(bad), "line 3", "UTF-8")
    one_line_error(["flickr8k", "--images", str(tmp_path), "--captions", str(tmp_path / "missing.txt"),
                    "--out", str(tmp_path / "e")], "missing.txt", "not found")
    one_line_error(["coco", "--images", str(tmp_path), "--out", str(tmp_path / "f")], "--karpathy")
    one_line_error(["multi30k", "--task", "captions", "--out", str(tmp_path / "g")], "--images")
    one_line_error(["multi30k", "--task", "pictures", "--out", str(tmp_path / "g")], "--task")
    assert not any((tmp_path / name).exists() for name in "defg")
    monkeypatch.chdir(tmp_path)  # no ../shared/data/flickr8k from here: the error says what to pass
    one_line_error(["flickr8k"], "--images DIR", "--captions")


def test_cli_flickr30k_karpathy(tmp_path: Path) -> None:
    sample = photos(3)
    for photo in sample:
        shutil.copy(photo, tmp_path / photo.name)
    karpathy = tmp_path / "dataset_flickr30k.json"
    karpathy.write_text(json.dumps({"images": [
        {"filename": p.name, "split": split, "sentences": [{"raw": "A dog runs."}]}
        for p, split in zip(sample, ("train", "val", "test"))]}))
    result = CliRunner().invoke(app, ["prepare", "flickr30k", "--karpathy", str(karpathy), "--images",
                                      str(tmp_path), "--min-freq", "1", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "flickr30k" in result.stdout and "vocabulary" in result.stdout
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["vocab_size"] == 4 + 3


def test_a_folder_given_as_a_caption_file_or_a_corpus_side_is_named_as_one(tmp_path: Path) -> None:
    """A folder was "caption CSV not found" / "file not found", as if nothing were there."""
    from nlgkit.data.caption_sources import read_caption_csv
    from nlgkit.data.prepare import prepare_parallel

    (tmp_path / "captions.csv").mkdir()
    with pytest.raises(DataError, match=r"captions\.csv: a directory, not a caption CSV$"):
        read_caption_csv(tmp_path / "captions.csv")
    (tmp_path / "train.de").mkdir()
    (tmp_path / "train.en").write_text("a dog .\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.de: a directory, not a file \(nor is there a train\.de\.gz\)$"):
        prepare_parallel(tmp_path / "out", str(tmp_path / "train"), str(tmp_path / "train"), str(tmp_path / "train"),
                         "de", "en", tokenizer="none")


def test_a_caption_csv_byte_that_is_not_utf8_is_named_by_its_line_and_place_in_it(tmp_path: Path) -> None:
    """The byte's place was its offset in the whole file ("line 3: … (byte 41)"), not in the line the message names."""
    from nlgkit.data.caption_sources import read_caption_csv

    path = tmp_path / "captions.csv"
    path.write_bytes(b"image,caption\nA.jpg,a dog runs .\nB.jpg,a caf\xe9 .\n")
    with pytest.raises(DataError, match=r"captions\.csv: line 3: not valid UTF-8 \(byte 11\)$"):
        read_caption_csv(path)

"""Readers for the caption corpora users have: each returns ``{split: {image: [captions]}}`` and its inputs.

Every malformed line, row or key is a one-line error naming the file and the line or key.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

from nlgkit.data.captions import Corpus, build_caption_dir, describe_inputs
from nlgkit.data.download import default_source
from nlgkit.errors import DataError

SHARED_FLICKR8K = Path("..") / "shared" / "data" / "flickr8k"
FLICKR8K_SPLITS = {"train": "Flickr_8k.trainImages.txt", "valid": "Flickr_8k.devImages.txt",
                   "test": "Flickr_8k.testImages.txt"}
KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "valid", "test": "test"}


def _need(path: Path, what: str) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{path}: {what} not found")
    return path


def _names(path: Path) -> list[str]:
    return [line.strip() for line in _need(path, "split file").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def flickr8k_defaults(images: str | Path = "", captions: str | Path = "") -> tuple[Path, Path]:
    """``images``/``captions``, or the copy in ../shared/data/flickr8k (relative to the current directory)."""
    if images and captions:
        return Path(images), Path(captions)
    shared = SHARED_FLICKR8K
    if not (shared / "Flickr8k.token.txt").is_file():
        raise DataError("Flickr8k: pass --images DIR and --captions Flickr8k.token.txt (no copy found at "
                        f"{shared})")
    return Path(images or shared / "images"), Path(captions or shared / "Flickr8k.token.txt")


def read_flickr8k(captions: Path, splits_dir: Path | None = None) -> Corpus:
    """``Flickr8k.token.txt`` (``image#n<TAB>caption``) with the official split files beside it."""
    captions = _need(captions, "Flickr8k caption file")
    splits_dir = Path(splits_dir) if splits_dir else captions.parent
    by_image: dict[str, list[str]] = {}
    for number, line in enumerate(captions.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        key, tab, caption = line.partition("\t")
        image, hash_sign, _ = key.partition("#")
        if not tab or not hash_sign or not image:
            raise DataError(f"{captions}: line {number}: expected 'IMAGE#N<TAB>caption'")
        by_image.setdefault(image, []).append(caption)
    corpus: Corpus = {}
    for split, name in FLICKR8K_SPLITS.items():
        corpus[split] = {image: by_image.get(image, []) for image in _names(splits_dir / name)}
    return corpus


def read_caption_csv(path: Path, splits_dir: Path | None = None) -> Corpus:
    """``image,caption`` rows; splits from ``train.txt``/``val.txt``/``test.txt`` or 80/10/10 by name hash."""
    path = _need(path, "caption CSV")
    by_image: dict[str, list[str]] = {}
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or [h.strip().lower() for h in header[:2]] != ["image", "caption"]:
            raise DataError(f"{path}: line 1: expected the header 'image,caption'")
        for number, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) < 2 or not row[0].strip():
                raise DataError(f"{path}: line {number}: expected 'image,caption'")
            by_image.setdefault(row[0].strip(), []).append(",".join(row[1:]))
    if splits_dir is not None:
        names = {"train": "train.txt", "valid": "val.txt", "test": "test.txt"}
        return {split: {image: by_image.get(image, []) for image in _names(Path(splits_dir) / name)}
                for split, name in names.items()}
    corpus: Corpus = {"train": {}, "valid": {}, "test": {}}
    for image, captions in by_image.items():
        bucket = int(hashlib.sha256(image.encode()).hexdigest(), 16) % 10
        corpus["valid" if bucket == 8 else "test" if bucket == 9 else "train"][image] = captions
    return corpus


def _load_json(path: Path) -> Any:
    try:
        return json.loads(_need(path, "annotation file").read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None


def read_karpathy(path: Path) -> Corpus:
    """Karpathy's ``dataset_{coco,flickr8k,flickr30k}.json``: the papers' splits (restval joins train)."""
    data = _load_json(path)
    corpus: Corpus = {"train": {}, "valid": {}, "test": {}}
    try:
        for i, image in enumerate(data["images"]):
            split = KARPATHY_SPLITS.get(image["split"])
            if split is None:
                raise DataError(f"{path}: images[{i}].split = {image['split']!r}: expected train, restval, val "
                                f"or test")
            name = f"{image['filepath']}/{image['filename']}" if image.get("filepath") else image["filename"]
            corpus[split][name] = [sentence["raw"] for sentence in image["sentences"]]
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path}: not a Karpathy split file (missing key {exc})") from None
    return corpus


def read_coco(annotation_files: list[Path]) -> Corpus:
    """Official COCO caption files: a name with ``train`` → train, with ``val`` → split in two halves by
    image id (valid, test), as there is no official caption test set; several files merge."""
    corpus: Corpus = {"train": {}, "valid": {}, "test": {}}
    for path in annotation_files:
        data = _load_json(path)
        try:
            names = {image["id"]: image["file_name"] for image in data["images"]}
            captions: dict[str, list[str]] = {name: [] for name in names.values()}
            for note in data["annotations"]:
                captions[names[note["image_id"]]].append(note["caption"])
        except (KeyError, TypeError) as exc:
            raise DataError(f"{path}: not a COCO caption file (missing key {exc})") from None
        if "train" in path.name:
            corpus["train"].update(captions)
        elif "val" in path.name:
            ids = {name: image_id for image_id, name in names.items()}
            ordered = sorted(captions, key=ids.__getitem__)
            half = len(ordered) // 2
            corpus["valid"].update({n: captions[n] for n in ordered[:half]})
            corpus["test"].update({n: captions[n] for n in ordered[half:]})
        else:
            raise DataError(f"{path}: cannot tell the split from the name (expected 'train' or 'val' in it)")
    return corpus


def read_multi30k_captions(source: str | Path, lang: str, images: Path) -> Corpus:
    """Multi30K task 2: five captions per image (``task2/raw/{split}.N.{lang}.gz``) in the image order of
    ``task1/image_splits``. A Flickr30K name ``ID.jpg`` is found as itself or as Flickr8k's ``ID_*.jpg``."""
    root = Path(source or default_source()).expanduser()
    raw, splits = root / "task2" / "raw", root / "task1" / "image_splits"
    files = {"train": ("train", "train.txt"), "valid": ("val", "val.txt"), "test": ("test_2016", "test_2016_flickr.txt")}
    by_id = {path.name.split("_")[0]: path.name for path in Path(images).glob("*_*.jpg")}
    corpus: Corpus = {}
    for split, (prefix, names_file) in files.items():
        names = _names(splits / names_file)
        streams = []
        for n in range(1, 6):
            path = _need(raw / f"{prefix}.{n}.{lang}.gz", "Multi30K task 2 file")
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                lines = handle.read().splitlines()
            if len(lines) != len(names):
                raise DataError(f"{path}: {len(lines)} lines, {splits / names_file} names {len(names)} images")
            streams.append(lines)
        corpus[split] = {}
        for i, name in enumerate(names):
            found = name if (Path(images) / name).is_file() else by_id.get(name.rsplit(".", 1)[0], name)
            corpus[split][found] = [stream[i] for stream in streams]
    return corpus


def prepare_captions(out_dir: Path, corpus: str, *, images: str | Path = "", captions: str = "", karpathy: str = "",
                     source: str = "", splits_dir: str | Path = "", lang: str = "en", min_freq: int = 5,
                     max_len: int = 0, log: Any = print) -> dict[str, Any]:
    """Read the caption corpus ``corpus`` from the user's files and build ``out_dir``; return the manifest.

    flickr8k: ``captions`` = Flickr8k.token.txt (split files beside it or in ``splits_dir``); captions: an
    ``image,caption`` CSV; coco: ``karpathy`` json, else ``captions`` = comma-separated COCO annotation
    files; flickr30k: ``karpathy`` json; multi30k: task 2 of the Multi30K ``source`` in language ``lang``.
    """
    splits = Path(splits_dir) if splits_dir else None
    if corpus == "flickr8k":
        images_dir, caption_file = flickr8k_defaults(images, captions)
        data = read_flickr8k(caption_file, splits)
        inputs = describe_inputs(captions=caption_file)
    elif corpus == "captions":
        if not captions or not images:
            raise DataError("captions: pass the CSV (--csv / captions) and the images directory (--images)")
        images_dir, data = Path(images), read_caption_csv(Path(captions), splits)
        inputs = describe_inputs(captions=Path(captions))
    elif corpus in ("coco", "flickr30k"):
        if not images:
            raise DataError(f"{corpus}: pass the images directory (--images)")
        images_dir = Path(images)
        if karpathy:
            data, inputs = read_karpathy(Path(karpathy)), describe_inputs(karpathy=Path(karpathy))
        elif corpus == "coco" and captions:
            files = [Path(p.strip()) for p in captions.split(",") if p.strip()]
            data = read_coco(files)
            inputs = {f"annotations{i}": describe_inputs(f=path)["f"] for i, path in enumerate(files)}
        else:
            raise DataError(f"{corpus}: pass Karpathy's split file (--karpathy)"
                            + (" or COCO annotation files (--annotations)" if corpus == "coco" else ""))
    elif corpus == "multi30k":
        if not images:
            raise DataError("multi30k captions: pass the images directory (--images)")
        images_dir, data = Path(images), read_multi30k_captions(source, lang, Path(images))
        inputs = {"source": str(Path(source or default_source()).resolve())}
    else:
        raise DataError(f"{corpus!r}: not a caption corpus (flickr8k, captions, coco, flickr30k, multi30k)")
    return build_caption_dir(Path(out_dir), data, corpus_name=corpus, images_dir=images_dir, lang=lang,
                             min_freq=min_freq, max_len=max_len, inputs=inputs, log=log)

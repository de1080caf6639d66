"""The caption corpora users have → :class:`CaptionCorpus` → a data directory (``build_caption_dir``).

One ``prepare_*`` function per corpus, each returning the manifest:

- :func:`prepare_flickr8k`: ``Flickr8k.token.txt`` and the official 6,000 / 1,000 / 1,000 split files;
- :func:`prepare_coco`: Karpathy's ``dataset_coco.json``, or the official ``captions_*.json`` files;
- :func:`prepare_karpathy`: any of Karpathy's ``dataset_{coco,flickr8k,flickr30k}.json`` (restval → train);
- :func:`prepare_caption_csv`: ``image,caption`` rows, with split files or an 80/10/10 hash split;
- :func:`prepare_multi30k_captions`: Multi30K task 2, five independent captions per image.

Every malformed line, row or key is a one-line :class:`DataError` naming the file and the line or key.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import invalid_utf8, read_lines, require_file
from nlgkit.data.captions import CaptionCorpus, Log, build_caption_dir, describe_input, hash_split
from nlgkit.data.download import default_source
from nlgkit.data.multi30k_files import flickr30k_locator, multi30k_file

SHARED_FLICKR8K = Path("..") / "shared" / "data" / "flickr8k"
FLICKR8K_SPLITS = {"train": "Flickr_8k.trainImages.txt", "valid": "Flickr_8k.devImages.txt",
                   "test": "Flickr_8k.testImages.txt"}
CSV_SPLITS = {"train": "train.txt", "valid": "val.txt", "test": "test.txt"}
KARPATHY_SPLITS = {"train": "train", "restval": "train", "val": "valid", "test": "test"}
# Multi30K task 2: split → (caption file prefix, image list in task1/image_splits; the same images, in order)
MULTI30K_TASK2 = {"train": ("train", "train.txt"), "valid": ("val", "val.txt"),
                  "test": ("test_2016", "test_2016_flickr.txt")}
MULTI30K_CAPTION_LANGS = ("en", "de")


# -- Flickr8k ---------------------------------------------------------------------------------------------


def prepare_flickr8k(out_dir: Path, images: str | Path | None = None, captions: str | Path | None = None,
                     splits_dir: str | Path | None = None, *, min_freq: int = 5, max_len: int = 0,
                     log: Log = print) -> dict[str, Any]:
    """Flickr8k with its official splits (``Flickr_8k.{train,dev,test}Images.txt``, default: beside the
    caption file). ``images``/``captions`` default to the copy at ``../shared/data/flickr8k``."""
    images_dir, caption_file = flickr8k_defaults(images, captions)
    corpus = read_flickr8k(caption_file, Path(splits_dir) if splits_dir else None)
    return build_caption_dir(Path(out_dir), corpus, corpus_name="flickr8k", images_dir=images_dir,
                             min_freq=min_freq, max_len=max_len, log=log)


def flickr8k_defaults(images: str | Path | None = None,
                      captions: str | Path | None = None) -> tuple[Path, Path]:
    """``images``/``captions``, each defaulting to the copy in ../shared/data/flickr8k (from the current
    directory, where a checkout's commands run) when that copy exists."""
    if images and captions:
        return Path(images), Path(captions)
    if not (SHARED_FLICKR8K / "Flickr8k.token.txt").is_file():
        raise DataError(f"Flickr8k: no copy at {SHARED_FLICKR8K} (relative to the current directory): pass "
                        "--images DIR and --captions Flickr8k.token.txt")
    return (Path(images or SHARED_FLICKR8K / "images"),
            Path(captions or SHARED_FLICKR8K / "Flickr8k.token.txt"))


def read_flickr8k(captions: Path, splits_dir: Path | None = None) -> CaptionCorpus:
    """``image#n<TAB>caption`` lines; the splits from the official image lists."""
    by_image: dict[str, list[str]] = {}
    for number, line in enumerate(_lines(captions, "Flickr8k caption file"), start=1):
        if not line.strip():
            continue
        key, tab, caption = line.partition("\t")
        image, hash_sign, n = key.strip().rpartition("#")
        if not tab or not hash_sign or not image or not n.isdigit():
            raise DataError(f"{captions}: line {number}: expected 'IMAGE#N<TAB>caption', got {line[:60]!r}")
        by_image.setdefault(image, []).append(caption)
    folder = splits_dir or captions.parent
    return _assign(by_image, {split: folder / name for split, name in FLICKR8K_SPLITS.items()},
                   {"captions": describe_input(captions)}, "official Flickr_8k.{train,dev,test}Images.txt")


# -- CSV ---------------------------------------------------------------------------------------------------


def prepare_caption_csv(out_dir: Path, csv_file: str | Path, images: str | Path,
                        splits_dir: str | Path | None = None, *, min_freq: int = 5, max_len: int = 0,
                        log: Log = print) -> dict[str, Any]:
    """Your own captions: ``image,caption`` rows; splits from ``train.txt``/``val.txt``/``test.txt`` in
    ``splits_dir`` (one image name a line), else 80/10/10 by image-name hash (:func:`hash_split`)."""
    corpus = read_caption_csv(Path(csv_file), Path(splits_dir) if splits_dir else None)
    images_dir = _images(images, "captions")
    return build_caption_dir(Path(out_dir), corpus, corpus_name="captions", images_dir=images_dir,
                             min_freq=min_freq, max_len=max_len, log=log)


def read_caption_csv(path: Path, splits_dir: Path | None = None) -> CaptionCorpus:
    """Rows ``image,caption`` (an ``image,caption`` header is optional; unquoted commas in a caption are
    kept, as the fields after the first joined by commas)."""
    raw = _need(path, "caption CSV").read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(invalid_utf8(path)) from None  # (the line, and the byte within it)
    by_image: dict[str, list[str]] = {}
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for row in reader:
            if not row or (reader.line_num == 1 and [f.strip().lower() for f in row] == ["image", "caption"]):
                continue
            if len(row) < 2 or not row[0].strip():
                raise DataError(f"{path}: line {reader.line_num}: expected 'image,caption', got {row[:2]!r}")
            by_image.setdefault(row[0].strip(), []).append(",".join(row[1:]))
    except csv.Error as exc:
        raise DataError(f"{path}: line {reader.line_num}: malformed CSV ({exc})") from None
    inputs = {"captions": describe_input(path)}
    if splits_dir is not None:
        return _assign(by_image, {split: splits_dir / name for split, name in CSV_SPLITS.items()}, inputs,
                       "split files train.txt, val.txt, test.txt")
    splits: dict[str, dict[str, list[str]]] = {"train": {}, "valid": {}, "test": {}}
    for image, captions in by_image.items():
        splits[hash_split(image)][image] = captions
    return CaptionCorpus(splits, inputs, "80/10/10 by sha256 of the image name")


# -- COCO and Karpathy's split files ------------------------------------------------------------------------


def prepare_coco(out_dir: Path, images: str | Path, annotations: Sequence[str | Path] = (),
                 karpathy: str | Path | None = None, *, min_freq: int = 5, max_len: int = 0,
                 log: Log = print) -> dict[str, Any]:
    """MSCOCO: Karpathy's ``dataset_coco.json`` (the papers' splits), or the official ``captions_*.json``.

    Official files: a name containing ``train`` is train, one containing ``val`` is held out — split in
    halves by image id (lower ids valid, the rest test) when a train file is given too, as there is no
    public caption test set; alone, its images are split 80/10/10 by file-name hash (:func:`hash_split`).
    """
    if karpathy and annotations:
        raise ConfigError("coco: pass either --karpathy (Karpathy's splits) or --annotations, not both")
    if karpathy:
        return prepare_karpathy(out_dir, karpathy, images, corpus="coco", min_freq=min_freq, max_len=max_len,
                                log=log)
    if not annotations:
        raise ConfigError("coco: pass --karpathy dataset_coco.json or --annotations captions_*.json")
    corpus = read_coco([Path(p) for p in annotations])
    return build_caption_dir(Path(out_dir), corpus, corpus_name="coco", images_dir=_images(images, "coco"),
                             min_freq=min_freq, max_len=max_len, log=log)


def read_coco(files: Sequence[Path]) -> CaptionCorpus:
    """Official COCO caption files (``images[*].id/file_name``, ``annotations[*].image_id/caption``)."""
    train: dict[str, list[str]] = {}
    held_out: dict[str, list[str]] = {}
    ids: dict[str, int] = {}  # held-out file name → image id
    inputs: dict[str, dict[str, str]] = {}
    for path in files:
        if "train" in path.name.lower():
            captions = train
        elif "val" in path.name.lower():
            captions = held_out
        else:
            raise DataError(f"{path}: cannot tell the split from the file name (expected 'train' or 'val')")
        data = _json(path, "COCO caption file")
        names: dict[int, str] = {}
        for i, image in enumerate(_list(data, "images", path)):
            image_id = _key(image, "id", int, f"images[{i}]", path)
            names[image_id] = _key(image, "file_name", str, f"images[{i}]", path)
            captions.setdefault(names[image_id], [])
            if captions is held_out:
                ids[names[image_id]] = image_id
        for j, note in enumerate(_list(data, "annotations", path)):
            image_id = _key(note, "image_id", int, f"annotations[{j}]", path)
            caption = _key(note, "caption", str, f"annotations[{j}]", path)
            if image_id not in names:
                raise DataError(f"{path}: annotations[{j}].image_id = {image_id}: no such entry in 'images'")
            captions[names[image_id]].append(caption)
        inputs[f"annotations.{len(inputs)}"] = describe_input(path)
    splits: dict[str, dict[str, list[str]]] = {"train": train, "valid": {}, "test": {}}
    if train:
        ordered = sorted(held_out, key=ids.__getitem__)
        for k, name in enumerate(ordered):
            splits["valid" if k < len(ordered) // 2 else "test"][name] = held_out[name]
        rule = "train files → train; val files → valid / test halves by image id"
    else:
        for name, image_captions in held_out.items():
            splits[hash_split(name)][name] = image_captions
        rule = "val files only → 80/10/10 by sha256 of the file name"
    return CaptionCorpus(splits, inputs, rule)


def prepare_karpathy(out_dir: Path, karpathy: str | Path, images: str | Path, *, corpus: str = "",
                     min_freq: int = 5, max_len: int = 0, log: Log = print) -> dict[str, Any]:
    """Karpathy's split file: ``images[*]`` with ``split`` (train, restval → train; val → valid; test),
    ``filepath`` (optional) and ``filename``, ``sentences[*].raw``. An image is looked for at
    ``DIR/filepath/filename``, else at ``DIR/filename`` (all images in one folder)."""
    data = _json(Path(karpathy), "Karpathy split file")
    name = corpus or (data.get("dataset") if isinstance(data, dict) and isinstance(data.get("dataset"), str)
                      else "") or "karpathy"
    images_dir = _images(images, name)

    def locate(image: str) -> tuple[str, str]:
        flat = image.rsplit("/", 1)[-1]
        use_flat = not (images_dir / image).exists() and (images_dir / flat).is_file()
        return (flat if use_flat else image), ""

    return build_caption_dir(Path(out_dir), read_karpathy(Path(karpathy), data), corpus_name=name,
                             images_dir=images_dir, min_freq=min_freq, max_len=max_len, locate=locate,
                             log=log)


def read_karpathy(path: Path, data: Any = None) -> CaptionCorpus:
    """The images of Karpathy's ``dataset_*.json`` (already parsed as ``data``, or read from ``path``)."""
    data = _json(path, "Karpathy split file") if data is None else data
    splits: dict[str, dict[str, list[str]]] = {"train": {}, "valid": {}, "test": {}}
    for i, image in enumerate(_list(data, "images", path)):
        where = f"images[{i}]"
        split = KARPATHY_SPLITS.get(_key(image, "split", str, where, path))
        if split is None:
            raise DataError(f"{path}: {where}.split = {image['split']!r}: expected train, restval, val or "
                            "test")
        filename = _key(image, "filename", str, where, path)
        folder = image.get("filepath") or ""
        captions = [_key(s, "raw", str, f"{where}.sentences[{j}]", path)
                    for j, s in enumerate(_key(image, "sentences", list, where, path))]
        splits[split].setdefault(f"{folder}/{filename}" if folder else filename, []).extend(captions)
    return CaptionCorpus(splits, {"karpathy": describe_input(path)}, "Karpathy's (train + restval → train, "
                                                                     "val → valid, test)")


# -- Multi30K task 2 ---------------------------------------------------------------------------------------


def prepare_multi30k_captions(out_dir: Path, images: str | Path, *, lang: str = "en", source: str = "",
                              min_freq: int = 5, max_len: int = 0, log: Log = print) -> dict[str, Any]:
    """Multi30K task 2 (``task2/raw/{train,val,test_2016}.N.LANG.gz``, N = 1..5: five independent captions
    per image, line i of each describing line i of ``task1/image_splits``). ``source`` as for task 1
    (default ../shared/data/multi30k, else the public repository). Flickr30K's ``ID.jpg`` is found as itself
    or as the one Flickr8k file ``ID_*.jpg`` in ``images``."""
    if lang not in MULTI30K_CAPTION_LANGS:
        raise ConfigError(f"Multi30K task 2 has no language {lang!r} (choose from en, de)")
    images_dir = _images(images, "multi30k")
    source = source or default_source()
    with tempfile.TemporaryDirectory(prefix="nlgkit-multi30k-") as downloads:
        corpus = read_multi30k_captions(source, lang, Path(downloads))
    return build_caption_dir(Path(out_dir), corpus, corpus_name="multi30k", images_dir=images_dir, lang=lang,
                             min_freq=min_freq, max_len=max_len,
                             options={"task": "captions", "source": source},
                             locate=flickr30k_locator(images_dir), log=log)


def read_multi30k_captions(source: str, lang: str, download_dir: Path) -> CaptionCorpus:
    """Task 2's captions by image; a URL source is downloaded into ``download_dir`` first."""
    splits: dict[str, dict[str, list[str]]] = {}
    inputs: dict[str, dict[str, str]] = {}
    for split, (prefix, names_file) in MULTI30K_TASK2.items():
        names_path, where = multi30k_file(source, f"task1/image_splits/{names_file}", download_dir)
        inputs[f"image_splits/{names_file}"] = describe_input(names_path, where)
        names = [line.strip() for line in _lines(names_path, "Multi30K image list")]
        splits[split] = {}
        for n in range(1, 6):
            path, where = multi30k_file(source, f"task2/raw/{prefix}.{n}.{lang}.gz", download_dir)
            lines = _lines(path, "Multi30K task 2 file")
            if len(lines) != len(names):
                raise DataError(f"{path}: {len(lines)} lines, but {names_path} names {len(names)} images")
            inputs[path.name] = describe_input(path, where)
            for name, caption in zip(names, lines, strict=True):
                splits[split].setdefault(name, []).append(caption)
    return CaptionCorpus(splits, inputs, "Multi30K's train / val / test_2016 (task1/image_splits)")


# -- shared helpers ----------------------------------------------------------------------------------------


def prepare_captions(out_dir: Path, corpus: str, *, images: str | Path = "", captions: str = "",
                     karpathy: str = "", source: str = "", splits_dir: str | Path = "", lang: str = "en",
                     min_freq: int = 5, max_len: int = 0, log: Log = print) -> dict[str, Any]:
    """A recipe's ``[data.prepare]`` → the corpus's ``prepare_*`` (``captions``: Flickr8k.token.txt, the
    CSV, or comma-separated COCO annotation files; "" = not given)."""
    options: dict[str, Any] = {"min_freq": min_freq, "max_len": max_len, "log": log}
    if corpus == "flickr8k":
        return prepare_flickr8k(out_dir, images or None, captions or None, splits_dir or None, **options)
    if not images:
        raise DataError(f"{corpus}: pass the images directory (--images, or images in [data.prepare])")
    if corpus == "captions":
        if not captions:
            raise DataError("captions: pass the CSV (--csv, or captions in [data.prepare])")
        return prepare_caption_csv(out_dir, captions, images, splits_dir or None, **options)
    if corpus == "coco":
        files = [p.strip() for p in captions.split(",") if p.strip()]
        return prepare_coco(out_dir, images, files, karpathy or None, **options)
    if corpus == "flickr30k":
        if not karpathy:
            raise DataError("flickr30k: pass Karpathy's dataset_flickr30k.json (--karpathy)")
        return prepare_karpathy(out_dir, karpathy, images, corpus="flickr30k", **options)
    if corpus == "multi30k":
        return prepare_multi30k_captions(out_dir, images, lang=lang, source=source, **options)
    raise ConfigError(f"{corpus!r}: not a caption corpus (flickr8k, coco, flickr30k, captions, multi30k)")


def _images(images: str | Path | None, corpus: str) -> Path:
    if images is None or (isinstance(images, str) and not images.strip()):
        raise DataError(f"{corpus}: pass the images directory (--images)")
    return Path(images)


def _need(path: Path, what: str) -> Path:
    require_file(path, what)  # (a folder is named as one, not as a file not found)
    return Path(path)


def _lines(path: Path, what: str) -> list[str]:
    """The lines of a UTF-8 text file (``.gz`` too); undecodable bytes are an error naming the line."""
    return read_lines(_need(path, what))


def _assign(by_image: dict[str, list[str]], split_files: dict[str, Path], inputs: dict[str, Any],
            rule: str) -> CaptionCorpus:
    """Split ``by_image`` by image lists, one name a line. A listed image without captions stays (to be
    skipped as such); a captioned image that no list names is unassigned; one listed twice is an error."""
    splits: dict[str, dict[str, list[str]]] = {}
    listed: dict[str, Path] = {}
    for split, path in split_files.items():
        splits[split] = {}
        for number, line in enumerate(_lines(path, f"{split} split file"), start=1):
            name = line.strip()
            if not name:
                continue
            if name in listed:
                raise DataError(f"{path}: line {number}: {name} is also listed in {listed[name]}")
            listed[name] = path
            splits[split][name] = by_image.get(name, [])
        inputs[f"split.{split}"] = describe_input(path)
    return CaptionCorpus(splits, inputs, rule, sorted(set(by_image) - set(listed)))


def _json(path: Path, what: str) -> Any:
    try:
        return json.loads(_need(path, what).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None


def _list(data: Any, key: str, path: Path) -> list[Any]:
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise DataError(f"{path}: expected a top-level object with a list '{key}'")
    return data[key]


def _key(entry: Any, key: str, kind: type, where: str, path: Path) -> Any:
    """``entry[key]``, which must be a ``kind``; else an error naming the file and the key's JSON path."""
    if not isinstance(entry, dict):
        raise DataError(f"{path}: {where}: expected an object")
    if key not in entry:
        raise DataError(f"{path}: {where}: missing key '{key}'")
    value = entry[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DataError(f"{path}: {where}.{key} = {str(value)[:40]!r}: expected {kind.__name__}")
    return value

"""Multi30K task 1 with the image of each sentence pair (multimodal translation, Hirasawa & Komachi 2019).

A translation data directory (see :mod:`nlgkit.data.prepare`) plus ``{split}.images``: the image file of
each line, relative to the manifest's ``images_dir``, or an empty line where the photograph is not in the
user's images directory. Multi30K names each line's Flickr30K image in ``task1/image_splits``; Flickr30K
contains the Flickr8k photographs, so a Flickr8k folder (``ID_SECRET.jpg``) covers part of it (6,993 /
242 / 243 lines of train / val / test2016) and a full Flickr30K folder all of it. ``covered_only`` keeps
just the covered pairs in every split, for models that need the image at test time and for the text-only
baseline trained and tested on the same sentences.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import read_lines
from nlgkit.data.captions import describe_input
from nlgkit.data.download import MULTI30K_LANGS, SPLIT_FILES, default_source, fetch_multi30k
from nlgkit.data.multi30k_files import flickr30k_locator, multi30k_file
from nlgkit.data.prepare import (
    SPLITS,
    build_directory,
    check_options,
    describe_raw_input,
    read_corpus,
    staging,
)

IMAGES_SUFFIX = "images"  # {split}.images beside {split}.{lang}
IMAGE_LISTS = {"train": "train.txt", "valid": "val.txt", "test": "test_2016_flickr.txt"}


def prepare_multimodal_multi30k(out_dir: Path, src_lang: str, tgt_lang: str, images: str | Path, *,
                                covered_only: bool = False, source: str = "", tokenizer: str = "spacy",
                                lowercase: bool = True, min_freq: int = 2, max_len: int = 0,
                                subword: str = "none", log: Callable[[str], None] = print) -> dict[str, Any]:
    """Prepare Multi30K task 1 for ``src_lang``→``tgt_lang`` with each line's image; return the manifest."""
    for lang in (src_lang, tgt_lang):
        if lang not in MULTI30K_LANGS:
            raise ConfigError(f"Multi30K has no language {lang!r} (choose from {', '.join(MULTI30K_LANGS)})")
    if not str(images).strip():
        raise ConfigError("multimodal Multi30K: pass the images directory (--images, or images in "
                          "[data.prepare])")
    images_dir = Path(images).expanduser().resolve()
    if not images_dir.is_dir():
        raise DataError(f"{images_dir}: images directory not found")
    options = check_options(src_lang, tgt_lang, tokenizer, lowercase, min_freq, max_len, subword)
    resolved = source or default_source()
    with staging(Path(out_dir)) as tmp, tempfile.TemporaryDirectory(prefix="nlgkit-images-") as downloads:
        files = fetch_multi30k(resolved, (src_lang, tgt_lang), tmp / "raw")
        corpus = read_corpus(files, src_lang, tgt_lang)
        inputs = {f"{split}.{lang}": describe_raw_input(resolved, path)
                  for split, by_lang in files.items() for lang, path in by_lang.items()}
        names = {}
        for split in SPLITS:
            path, where = multi30k_file(resolved, f"task1/image_splits/{IMAGE_LISTS[split]}", Path(downloads))
            inputs[f"image_splits/{IMAGE_LISTS[split]}"] = describe_input(path, where)
            names[split] = _image_list(path, len(corpus[split][src_lang]), files[split][src_lang])
        attached = attach_images(names, images_dir)
        coverage = {split: {"covered": sum(1 for name in attached[split] if name), "lines": len(attached[split])}
                    for split in SPLITS}
        for split in SPLITS:
            log(f"{split}: {coverage[split]['covered']:,} of {coverage[split]['lines']:,} lines have their image "
                f"in {images_dir}")
        if covered_only:
            for split in SPLITS:
                keep = [i for i, name in enumerate(attached[split]) if name]
                if not keep:
                    raise DataError(f"{images_dir}: none of Multi30K's {SPLIT_FILES[split]} images is there, so "
                                    "--covered-only leaves no pairs")
                corpus[split] = {lang: [lines[i] for i in keep] for lang, lines in corpus[split].items()}
                attached[split] = [attached[split][i] for i in keep]
        extra = {"images_dir": str(images_dir), "covered_only": covered_only, "image_coverage": coverage}
        return build_directory(tmp, corpus, "multi30k", resolved, inputs, src_lang, tgt_lang, options,
                               side_files={IMAGES_SUFFIX: attached}, extra=extra)


def attach_images(names: dict[str, list[str]], images_dir: Path) -> dict[str, list[str]]:
    """Each Flickr30K name → the file in ``images_dir`` holding that photograph, or "" when none does."""
    locate = flickr30k_locator(images_dir)
    attached: dict[str, list[str]] = {}
    for split, split_names in names.items():
        files = []
        for name in split_names:
            found, _problem = locate(name)
            files.append(found if (images_dir / found).is_file() else "")
        attached[split] = files
    return attached


def _image_list(path: Path, lines: int, text: Path) -> list[str]:
    names = [line.strip() for line in read_lines(path)]  # (a bad byte: an error naming the file and line)
    if len(names) != lines:
        raise DataError(f"{path}: names {len(names)} images, but {text} has {lines} lines")
    return names

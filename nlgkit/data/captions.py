"""Build a caption data directory: one JSON record per image, the target vocabulary and a manifest.

Layout of ``out_dir``::

    train.jsonl valid.jsonl test.jsonl   {"image": path relative to images_dir, "tokens": [...], "refs": [...]}
                                         per image, sorted by image; tokens: each caption in model form
                                         (basic tokenisation, lowercase, joined by spaces); refs: the
                                         original captions, for evaluation (pycocoevalcap tokenises them)
    vocab.{lang}.txt                     words of the training captions seen at least ``min_freq`` times
    manifest.json                        corpus, options, images_dir, inputs with checksums, counts,
                                         every skipped image with the reason, checksums of every file

Tokenisation follows Shalev et al.'s appendix ("basic tokenization, keeping all words that appeared at
least 5 times in the training set"), done as the captioning papers' common preprocessing (Karpathy's
neuraltalk): lowercase, punctuation removed, split on whitespace. Missing or unreadable images are
named in the log, skipped with all their captions and listed in the manifest — never silently dropped.
"""

from __future__ import annotations

import json
import string
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nlgkit import __version__
from nlgkit.data.prepare import SPLITS, _staging
from nlgkit.data.vocab import Vocabulary
from nlgkit.errors import ConfigError, DataError
from nlgkit.io import sha256_file, write_json
from nlgkit.vision.images import ImageError, load_image

MANIFEST_FORMAT = 1
Corpus = dict[str, dict[str, list[str]]]  # split → image (relative path) → its captions
_PUNCTUATION = str.maketrans({c: " " for c in string.punctuation})


def basic_tokenize(caption: str) -> list[str]:
    """Lowercase, punctuation removed, split on whitespace ("A dog's ball." → a dog s ball)."""
    return caption.lower().translate(_PUNCTUATION).split()


def build_caption_dir(out_dir: Path, corpus: Corpus, *, corpus_name: str, images_dir: Path, lang: str = "en",
                      min_freq: int = 5, max_len: int = 0, inputs: dict[str, Any] | None = None,
                      log: Callable[[str], None] = print) -> dict[str, Any]:
    """Check every image, tokenise, build the vocabulary from train, and write ``out_dir`` atomically."""
    if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 1:
        raise ConfigError(f"min_freq = {min_freq!r}: must be a positive integer")
    if max_len < 0:
        raise ConfigError(f"max_len = {max_len!r}: must be 0 (no limit) or positive")
    images_dir = Path(images_dir).expanduser()
    if not images_dir.is_dir():
        raise DataError(f"{images_dir}: images directory not found")
    skipped: list[dict[str, str]] = []
    records: dict[str, list[dict[str, Any]]] = {}
    for split in SPLITS:
        records[split] = []
        for image in sorted(corpus.get(split, {})):
            refs = [c.strip() for c in corpus[split][image] if c.strip()]
            reason = "no captions" if not refs else _unusable(images_dir / image)
            if reason:
                log(f"skipped {images_dir / image} ({split}): {reason}")
                skipped.append({"image": image, "split": split, "reason": reason})
                continue
            tokens = [" ".join(basic_tokenize(ref)) for ref in refs]
            if split == "train" and max_len:
                tokens = [t for t in tokens if len(t.split()) <= max_len]
            records[split].append({"image": image, "tokens": tokens, "refs": refs})
    for split in SPLITS:
        if not records[split]:
            raise DataError(f"no usable images in {images_dir} for the {split} split "
                            f"({len(skipped)} skipped, e.g. {skipped[0]['image'] if skipped else 'none'})")
    counter: Counter[str] = Counter(w for r in records["train"] for t in r["tokens"] for w in t.split())
    vocab = Vocabulary.build(counter, min_freq)
    with _staging(Path(out_dir)) as tmp:
        for split in SPLITS:
            with open(tmp / f"{split}.jsonl", "w", encoding="utf-8", newline="\n") as handle:
                handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records[split])
        vocab.save(tmp / f"vocab.{lang}.txt")
        files = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest: dict[str, Any] = {
            "format": MANIFEST_FORMAT, "kind": "captions", "nlgkit_version": __version__, "corpus": corpus_name,
            "lang": lang, "tgt_lang": lang, "images_dir": str(images_dir.resolve()),
            "options": {"tokenizer": "basic (lowercase, punctuation removed)", "min_freq": min_freq,
                        "max_len": max_len},
            "inputs": inputs or {},
            "splits": {split: {"images": len(records[split]),
                               "captions": sum(len(r["tokens"]) for r in records[split])} for split in SPLITS},
            "vocab_size": len(vocab), "skipped": skipped, "skipped_count": len(skipped), "files": files,
        }
        write_json(tmp / "manifest.json", manifest)
    return manifest


def _unusable(path: Path) -> str:
    """Why the image at ``path`` cannot be used ("" when it can)."""
    try:
        load_image(path)
    except ImageError as exc:
        return str(exc).split(": ", 1)[-1]
    return ""


def describe_inputs(**paths: Path | None) -> dict[str, Any]:
    """Path and sha256 of each input file, for the manifest."""
    return {name: {"path": str(Path(p).resolve()), "sha256": sha256_file(p)} for name, p in paths.items() if p}

"""Build a caption data directory: one JSON record per image, the target vocabulary and a manifest.

Layout of ``out_dir``::

    train.jsonl valid.jsonl test.jsonl   one record per usable image, sorted by image:
                                         {"image": path relative to images_dir, "tokens": [..], "refs": [..]}
                                         tokens: each caption in model form (:func:`basic_tokenize`,
                                         joined by one space); refs: the same captions as written
                                         (stripped), for evaluation (pycocoevalcap tokenises them itself);
                                         same count and order as tokens
    vocab.{lang}.txt                     words of the training tokens seen at least ``min_freq`` times
    manifest.json                        corpus, lang, images_dir, every option, inputs with checksums,
                                         counts, every skipped image with the reason, checksums of the files

The per-corpus readers (``caption_sources``) turn the user's files into :class:`CaptionCorpus`; everything
after that — tokenising, checking images, the vocabulary, the atomic write — happens once, here.

Images are checked by decoding them whole with :func:`nlgkit.vision.images.load_image`, exactly as feature
extraction will read them: a missing, empty, truncated or corrupt file, a non-image or a decompression bomb
is named in the log, skipped with all its captions and listed in the manifest — never silently dropped.
(A header check or Pillow's ``verify()`` is no cheaper way out: for JPEG ``verify()`` reads nothing past the
header, so truncation goes unnoticed. Decoding costs about 1.1 ms per 224×224 Flickr8k image on one core —
9 s for all 8,091 — and about 5 ms per 640×480 COCO image, ~10 minutes for COCO's 123k, once.)
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from nlgkit import __version__
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import sha256_file, write_json
from nlgkit.data.prepare import SPLITS, staging
from nlgkit.data.vocab import Vocabulary
from nlgkit.vision.images import ImageError, load_image

MANIFEST_FORMAT = 1
TOKENIZER = "basic: lowercase; words = runs of letters/digits, inner hyphens kept; other punctuation dropped"
IMAGE_CHECK = "full decode (nlgkit.vision.images.load_image)"
Log = Callable[[str], None]
Locate = Callable[[str], tuple[str, str]]  # corpus name → (path relative to images_dir, why it is unusable)

# A word: letters or digits (any script: German captions too), joined by inner hyphens ("t-shirt"); the
# apostrophe, periods, commas, quotes and every other symbol separate words and are dropped.
_WORD = re.compile(r"[^\W_]+(?:-[^\W_]+)*")


def basic_tokenize(caption: str) -> list[str]:
    """Shalev et al.'s "basic tokenization" of a caption: lowercase, punctuation dropped.

    "A tri-colored dog's ball ." → ``a tri-colored dog s ball``. This is the captioning papers' usual
    preprocessing (Karpathy's: lowercase, strip punctuation, split on spaces) with two deliberate choices:
    punctuation *separates* words instead of being deleted, so a pre-tokenised ``dog 's`` (Flickr8k) and a
    raw ``dog's`` (COCO) give the same tokens; and inner hyphens are kept, so ``t-shirt`` stays the one word
    pycocoevalcap's PTB tokenizer makes of every reference (deleting it gives ``tshirt``, which no
    reference contains). It is also the metrics' own fallback tokenisation, so model output and references
    agree on word boundaries.
    """
    return _WORD.findall(caption.lower())


def hash_split(name: str) -> str:
    """A deterministic 80/10/10 split by image name: sha256 of the name, mod 10 — 0-7 train, 8 valid, 9 test.

    Hashing (not the order of the file) keeps an image's split stable when rows are added or reordered.
    """
    bucket = int(hashlib.sha256(name.encode("utf-8")).hexdigest()[:8], 16) % 10
    return "train" if bucket < 8 else "valid" if bucket == 8 else "test"


@dataclass
class CaptionCorpus:
    """What a reader found: images by split with their captions, and how it got them (for the manifest)."""

    splits: dict[str, dict[str, list[str]]]  # split → image name → captions as written
    inputs: dict[str, dict[str, str]]  # input name → {"path", "sha256"}
    split_rule: str  # how images were assigned to splits
    unassigned: list[str] = field(default_factory=list)  # captioned images that no split names


def describe_input(path: Path, where: str = "") -> dict[str, str]:
    """Path (or URL ``where``) and sha256 of an input file, for the manifest."""
    return {"path": where or str(Path(path).resolve()), "sha256": sha256_file(path)}


def check_options(min_freq: int, max_len: int) -> None:
    """``min_freq`` ≥ 1 and ``max_len`` ≥ 0 (0 = no limit), as integers."""
    for name, value, low in (("min_freq", min_freq, 1), ("max_len", max_len, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} = {value!r}: must be an integer ≥ {low}")


def build_caption_dir(out_dir: Path, corpus: CaptionCorpus, *, corpus_name: str, images_dir: Path,
                      lang: str = "en", min_freq: int = 5, max_len: int = 0,
                      options: dict[str, Any] | None = None, locate: Locate | None = None,
                      log: Log = print) -> dict[str, Any]:
    """Check every image, tokenise, build the vocabulary from train, and write ``out_dir`` atomically.

    ``locate`` maps a corpus name to the file to use (e.g. Flickr30K ``ID.jpg`` → Flickr8k ``ID_x.jpg``).
    Training captions that tokenise to nothing or to more than ``max_len`` tokens are dropped (nothing or
    too much to learn from); valid/test keep every reference. Returns the manifest.
    """
    check_options(min_freq, max_len)
    images_dir = Path(images_dir).expanduser()
    if not images_dir.is_dir():
        raise DataError(f"{images_dir}: images directory not found")
    locate = locate or (lambda name: (name, ""))
    records: dict[str, dict[str, dict[str, Any]]] = {split: {} for split in SPLITS}
    skipped: list[dict[str, str]] = []
    counts = Counter[str]()
    seen: dict[str, str] = {}  # located image → its split
    for split in SPLITS:
        for name in sorted(corpus.splits.get(split, {})):
            captions = corpus.splits[split][name]
            image, reason = locate(name)
            if seen.setdefault(image, split) != split:
                raise DataError(f"{image}: in both the {seen[image]} and the {split} split")
            refs = [c.strip() for c in captions if c.strip()]
            counts["blank_captions"] += len(captions) - len(refs)
            pairs = [(" ".join(basic_tokenize(ref)), ref) for ref in refs]
            if split == "train":
                kept = [(t, r) for t, r in pairs if t and (not max_len or len(t.split()) <= max_len)]
                counts["train_captions_dropped"] += len(pairs) - len(kept)
                if pairs and not kept:
                    reason = reason or f"every caption is empty or longer than max_len = {max_len} tokens"
                pairs = kept
            reason = reason or ("no captions" if not pairs else _unusable(images_dir, image))
            if reason:
                log(f"skipped {image} ({split}): {reason}")
                skipped.append({"image": image, "split": split, "reason": reason})
                continue
            record = records[split].setdefault(image, {"image": image, "tokens": [], "refs": []})
            record["tokens"] += [t for t, _ in pairs]
            record["refs"] += [r for _, r in pairs]
    _require_every_split(records, skipped, images_dir)
    if corpus.unassigned:
        log(f"{len(corpus.unassigned)} names with captions are in no split, not used (listed in the manifest)")

    counter = Counter(w for r in records["train"].values() for t in r["tokens"] for w in t.split())
    vocab = Vocabulary.build(counter, min_freq)
    with staging(Path(out_dir)) as tmp:
        for split in SPLITS:
            with open(tmp / f"{split}.jsonl", "w", encoding="utf-8", newline="\n") as handle:
                for image in sorted(records[split]):
                    handle.write(json.dumps(records[split][image], ensure_ascii=False) + "\n")
        vocab.save(tmp / f"vocab.{lang}.txt")
        files = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest: dict[str, Any] = {
            "format": MANIFEST_FORMAT, "kind": "captions", "corpus": corpus_name, "lang": lang,
            "images_dir": str(images_dir.resolve()),
            "options": {"tokenizer": TOKENIZER, "lowercase": True, "min_freq": min_freq, "max_len": max_len,
                        "lang": lang, "splits": corpus.split_rule, "image_check": IMAGE_CHECK,
                        **(options or {})},
            "inputs": corpus.inputs,
            "splits": {split: {"images": len(records[split]),
                               "captions": sum(len(r["tokens"]) for r in records[split].values())}
                       for split in SPLITS},
            "vocab_size": len(vocab),
            "skipped": skipped, "skipped_count": len(skipped),
            "train_captions_dropped": counts["train_captions_dropped"],
            "blank_captions": counts["blank_captions"],
            "unassigned_count": len(corpus.unassigned), "unassigned": sorted(corpus.unassigned),
            "files": files, "nlgkit_version": __version__,
        }
        write_json(tmp / "manifest.json", manifest)
    return manifest


def _require_every_split(records: dict[str, dict[str, Any]], skipped: list[dict[str, str]],
                         images_dir: Path) -> None:
    """Training needs train and valid, evaluation test: an empty split is an error naming the cause."""

    def example(entries: list[dict[str, str]]) -> str:
        return f", e.g. {entries[0]['image']}: {entries[0]['reason']}" if entries else ""

    if not any(records.values()):
        raise DataError(f"no usable images in {images_dir} ({len(skipped)} skipped{example(skipped)})")
    for split in SPLITS:
        if not records[split]:
            where = [s for s in skipped if s["split"] == split]
            raise DataError(f"no usable images for the {split} split in {images_dir} ({len(where)} of its "
                            f"images skipped{example(where)})")


def _unusable(images_dir: Path, image: str) -> str:
    """Why ``images_dir / image`` cannot be used ("" when it can): the reason from :func:`load_image`."""
    relative = PurePosixPath(image)
    if relative.is_absolute() or ".." in relative.parts or not image:
        return "not a relative path inside the images directory"
    try:
        load_image(images_dir / image)
    except ImageError as exc:
        return str(exc).removeprefix(f"{images_dir / image}: ")
    return ""

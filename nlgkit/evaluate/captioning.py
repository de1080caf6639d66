"""Captioning results behind Table 1: test captions of a run, a nearest-neighbour baseline, and examples
where two heads differ (Shalev et al.'s Fig. 3)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.errors import DataError
from nlgkit.core.io import atomic_write, read_json, write_json


@dataclass
class SplitCaptions:
    names: list[str]  # image paths relative to the data directory's images_dir
    texts: list[str]  # one caption per image
    refs: list[list[str]]  # every reference caption of each image


def _records(data_dir: Path, split: str) -> list[dict[str, Any]]:
    from nlgkit.tasks.captioning import read_records

    return read_records(data_dir / f"{split}.jsonl")


def checkpoint_stamp(run_dir: Path, checkpoint: str = "best") -> str:
    """Identity of a run's checkpoint: the SHA-256 of its ``meta.json`` (step, epoch, scores, config).

    Outputs cached under this stamp stay valid where only the run's logs and metadata were copied (a run
    trained on a lent GPU, say), not its weights.
    """
    meta = Path(run_dir) / "checkpoints" / checkpoint / "meta.json"
    if not meta.is_file():
        raise DataError(f"{meta}: not found (no {checkpoint} checkpoint in this run directory)")
    return hashlib.sha256(meta.read_bytes()).hexdigest()


def _run_config(run_dir: Path) -> Any:
    from nlgkit.core.config import config_from_dict

    path = Path(run_dir) / "config.json"
    return config_from_dict(read_json(path), str(path))


def caption_data_dir(run_dir: Path, config: Any) -> Path:
    """Where a run's test records live: its data directory, or the copy a run record keeps."""
    from nlgkit.runs.records import is_record

    return Path(run_dir) / "data" if is_record(Path(run_dir)) else Path(config.data.dir)


def _stamp(run_dir: Path, config: Any, images: int) -> dict[str, Any]:
    """What cached captions were made by: the checkpoint, the search and the number of images."""
    return {"checkpoint": checkpoint_stamp(run_dir), "search": asdict(config.search), "images": images}


def _cached(run_dir: Path, config: Any, split: str) -> tuple[list[dict[str, Any]], list[str] | None]:
    """The split's image records and the cached captions of the best checkpoint with the recipe's search
    (None when missing or made by another checkpoint or search)."""
    records = _records(caption_data_dir(run_dir, config), split)
    names = [r["image"] for r in records]
    cached, stamp_file = run_dir / f"{split}.captions.jsonl", run_dir / f"{split}.captions.json"
    if cached.is_file() and stamp_file.is_file() and read_json(stamp_file) == _stamp(run_dir, config, len(names)):
        rows = [json.loads(line) for line in cached.read_text(encoding="utf-8").splitlines()]
        if [row["image"] for row in rows] == names:
            return records, [row["caption"] for row in rows]
    return records, None


def cached_captions_current(run_dir: Path, config: Any, split: str = "test") -> bool:
    return _cached(Path(run_dir), config, split)[1] is not None


def caption_split(run_dir: Path, split: str = "test", device: str = "auto") -> SplitCaptions:
    """The best checkpoint's captions of ``split`` with the recipe's search (beam 10 in the paper's setting).

    They are kept in ``RUN_DIR/{split}.captions.jsonl`` with ``{split}.captions.json`` naming the checkpoint
    (:func:`checkpoint_stamp`) and search that made them, and reused while both still match. A run record
    (:mod:`nlgkit.runs.records`) has no weights: its kept captions are the only ones it can give.
    """
    from nlgkit.runs.records import check_record, is_record
    from nlgkit.generation.decode import best_texts, generate
    from nlgkit.runs.loading import load_trained

    run_dir = Path(run_dir)
    if is_record(run_dir):
        check_record(run_dir)
    config = _run_config(run_dir)
    records, texts = _cached(run_dir, config, split)
    names, refs = [r["image"] for r in records], [list(r["refs"]) for r in records]
    if texts is not None:
        return SplitCaptions(names, texts, refs)
    if is_record(run_dir):
        raise DataError(f"{run_dir / f'{split}.captions.jsonl'}: not in this run record (or not of its best "
                        "checkpoint), which keeps no weights to caption with")
    data_dir = Path(config.data.dir)
    run = load_trained(run_dir, "best", device)
    spatial, pooled = run.task.features(data_dir, read_json(data_dir / "manifest.json"), names)  # type: ignore[attr-defined]
    search = run.config.search
    found = generate(run.model, run.task, [(spatial[i], pooled[i]) for i in range(len(names))], run.tgt_vocab,
                     beam=search.beam, length_penalty=search.length_penalty, max_len_a=search.max_len_a,
                     max_len_b=search.max_len_b, batch_size=search.batch_size, device=run.device)
    texts = best_texts(found, run.tgt_vocab, run.detokenizer())
    with atomic_write(run_dir / f"{split}.captions.jsonl") as handle:
        handle.writelines(json.dumps({"image": n, "caption": t}) + "\n" for n, t in zip(names, texts))
    write_json(run_dir / f"{split}.captions.json", _stamp(run_dir, config, len(names)))
    return SplitCaptions(names, texts, refs)


def nearest_neighbour_captions(run_dir: Path, split: str = "test", device: str = "cpu") -> SplitCaptions:
    """The baseline that shows what retrieval alone achieves: each image gets the first caption of the
    training image whose pooled CNN feature is closest by cosine (same data and features as the run; its
    weights are not needed)."""
    from nlgkit.data.captions import basic_tokenize
    from nlgkit.tasks import build_task

    config = _run_config(Path(run_dir))
    task = build_task(config)
    data_dir = Path(config.data.dir)
    manifest = read_json(data_dir / "manifest.json")
    train, test = _records(data_dir, "train"), _records(data_dir, split)
    _, train_pooled = task.features(data_dir, manifest, [r["image"] for r in train], device)  # type: ignore[attr-defined]
    _, test_pooled = task.features(data_dir, manifest, [r["image"] for r in test], device)  # type: ignore[attr-defined]
    a = torch.nn.functional.normalize(test_pooled.float(), dim=1)  # (N_test, P)
    b = torch.nn.functional.normalize(train_pooled.float(), dim=1)  # (N_train, P)
    nearest = (a @ b.T).argmax(dim=1).tolist()
    texts = [" ".join(basic_tokenize(train[j]["refs"][0])) for j in nearest]
    return SplitCaptions([r["image"] for r in test], texts, [list(r["refs"]) for r in test])


def differing_examples(a: SplitCaptions, b: SplitCaptions, train_counts: dict[str, int], n: int = 6) -> list[dict]:
    """Images where B's caption uses a word A's does not, rarest such word first (Fig. 3's comparison).

    Special tokens (``<unk>``) are not words: an image whose only extra token is one is not an example.
    """
    from nlgkit.data.vocab import SPECIALS

    rows = []
    for name, text_a, text_b in zip(a.names, a.texts, b.texts):
        extra = set(text_b.split()) - set(text_a.split()) - set(SPECIALS)
        if text_a == text_b or not extra:
            continue
        rarest = min(extra, key=lambda w: (train_counts.get(w, 0), w))
        rows.append({"image": name, "a": text_a, "b": text_b, "word": rarest,
                     "word_count": train_counts.get(rarest, 0)})
    return sorted(rows, key=lambda r: (r["word_count"], r["image"]))[:n]

"""Captioning results behind Table 1: test captions of a run, a nearest-neighbour baseline, and examples
where two heads differ (Shalev et al.'s Fig. 3)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nlgkit.io import atomic_write, read_json


@dataclass
class SplitCaptions:
    names: list[str]  # image paths relative to the data directory's images_dir
    texts: list[str]  # one caption per image
    refs: list[list[str]]  # every reference caption of each image


def _records(data_dir: Path, split: str) -> list[dict[str, Any]]:
    from nlgkit.tasks.captioning import read_records

    return read_records(data_dir / f"{split}.jsonl")


def caption_split(run_dir: Path, split: str = "test", device: str = "auto") -> SplitCaptions:
    """The best checkpoint's captions of ``split`` with the recipe's search (beam 10 in the paper's setting).

    They are kept in ``RUN_DIR/{split}.captions.jsonl`` and reused while newer than the checkpoint.
    """
    from nlgkit.inference import best_texts, generate
    from nlgkit.runs import load_trained, resolve_checkpoint

    run_dir = Path(run_dir)
    cached = run_dir / f"{split}.captions.jsonl"
    checkpoint = resolve_checkpoint(run_dir, "best")
    run_config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    data_dir = Path(run_config["data"]["dir"])
    records = _records(data_dir, split)
    refs = [list(r["refs"]) for r in records]
    if cached.is_file() and cached.stat().st_mtime_ns > max(p.stat().st_mtime_ns for p in checkpoint.iterdir()):
        rows = [json.loads(line) for line in cached.read_text(encoding="utf-8").splitlines()]
        if [row["image"] for row in rows] == [r["image"] for r in records]:
            return SplitCaptions([row["image"] for row in rows], [row["caption"] for row in rows], refs)
    run = load_trained(run_dir, "best", device)
    names = [r["image"] for r in records]
    spatial, pooled = run.task.features(data_dir, read_json(data_dir / "manifest.json"), names)  # type: ignore[attr-defined]
    search = run.config.search
    found = generate(run.model, run.task, [(spatial[i], pooled[i]) for i in range(len(names))], run.tgt_vocab,
                     beam=search.beam, length_penalty=search.length_penalty, max_len_a=search.max_len_a,
                     max_len_b=search.max_len_b, batch_size=search.batch_size, device=run.device)
    texts = best_texts(found, run.tgt_vocab, run.detokenizer())
    with atomic_write(cached) as handle:
        handle.writelines(json.dumps({"image": n, "caption": t}) + "\n" for n, t in zip(names, texts))
    return SplitCaptions(names, texts, refs)


def nearest_neighbour_captions(run_dir: Path, split: str = "test") -> SplitCaptions:
    """The baseline that shows what retrieval alone achieves: each image gets the first caption of the
    training image whose pooled CNN feature is closest by cosine (same features as the run's models)."""
    from nlgkit.data.captions import basic_tokenize
    from nlgkit.runs import load_trained

    run = load_trained(Path(run_dir), "best", "cpu")
    data_dir = Path(run.config.data.dir)
    manifest = read_json(data_dir / "manifest.json")
    train, test = _records(data_dir, "train"), _records(data_dir, split)
    _, train_pooled = run.task.features(data_dir, manifest, [r["image"] for r in train])  # type: ignore[attr-defined]
    _, test_pooled = run.task.features(data_dir, manifest, [r["image"] for r in test])  # type: ignore[attr-defined]
    a = torch.nn.functional.normalize(test_pooled.float(), dim=1)  # (N_test, P)
    b = torch.nn.functional.normalize(train_pooled.float(), dim=1)  # (N_train, P)
    nearest = (a @ b.T).argmax(dim=1).tolist()
    texts = [" ".join(basic_tokenize(train[j]["refs"][0])) for j in nearest]
    return SplitCaptions([r["image"] for r in test], texts, [list(r["refs"]) for r in test])


def differing_examples(a: SplitCaptions, b: SplitCaptions, train_counts: dict[str, int], n: int = 6) -> list[dict]:
    """Images where B's caption uses a word A's does not, rarest such word first (Fig. 3's comparison)."""
    rows = []
    for name, text_a, text_b in zip(a.names, a.texts, b.texts):
        extra = set(text_b.split()) - set(text_a.split())
        if text_a == text_b or not extra:
            continue
        rarest = min(extra, key=lambda w: (train_counts.get(w, 0), w))
        rows.append({"image": name, "a": text_a, "b": text_b, "word": rarest,
                     "word_count": train_counts.get(rarest, 0)})
    return sorted(rows, key=lambda r: (r["word_count"], r["image"]))[:n]

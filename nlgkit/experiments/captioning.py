"""Captioning results behind Table 1: test captions of a run, a nearest-neighbour baseline, and examples
where two heads differ (Shalev et al.'s Fig. 3)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.io import read_json
from nlgkit.data.captions import basic_tokenize
from nlgkit.data.vocab import SPECIALS
from nlgkit.evaluate.outputs import split_outputs
from nlgkit.runs.outputs import references_dir, run_config
from nlgkit.tasks import build_task
from nlgkit.tasks.captioning import read_records


@dataclass
class SplitCaptions:
    names: list[str]  # image paths relative to the data directory's images_dir
    texts: list[str]  # one caption per image
    refs: list[list[str]]  # every reference caption of each image


def _records(data_dir: Path, split: str) -> list[dict[str, Any]]:
    return read_records(data_dir / f"{split}.jsonl")


def caption_split(run_dir: Path, split: str = "test", device: str = "auto") -> SplitCaptions:
    """The best checkpoint's captions of ``split`` with the recipe's search (beam 10 in the paper's setting),
    by the images' names: the run's kept outputs while they are current, else captioned now and kept
    (:mod:`nlgkit.evaluate.outputs`). A run record has no weights: its kept captions are the only ones."""
    run_dir = Path(run_dir)
    outputs = split_outputs(run_dir, split, device=device)
    records = _records(references_dir(run_dir, run_config(run_dir)), split)
    return SplitCaptions([r["image"] for r in records], outputs.texts, outputs.refs)


def nearest_neighbour_captions(run_dir: Path, split: str = "test", device: str = "cpu") -> SplitCaptions:
    """The baseline that shows what retrieval alone achieves: each image gets the first caption of the
    training image whose pooled CNN feature is closest by cosine (same data and features as the run; its
    weights are not needed)."""
    config = run_config(Path(run_dir))
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
    rows = []
    for name, text_a, text_b in zip(a.names, a.texts, b.texts):
        extra = set(text_b.split()) - set(text_a.split()) - set(SPECIALS)
        if text_a == text_b or not extra:
            continue
        rarest = min(extra, key=lambda w: (train_counts.get(w, 0), w))
        rows.append({"image": name, "a": text_a, "b": text_b, "word": rarest,
                     "word_count": train_counts.get(rarest, 0)})
    return sorted(rows, key=lambda r: (r["word_count"], r["image"]))[:n]

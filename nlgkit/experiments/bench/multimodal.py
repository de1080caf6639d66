"""Multimodal translation training in ``make bench``: the image-reading models against text-only NMT.

Hirasawa & Komachi's comparison (``recipes/hirasawa/``, EN→DE): the doubly-attentive decoder and VAG-NMT read
the image of every pair, so they train on the pairs whose photograph is here (``*_covered``) and are compared
with ``text-covered``; IMAGINATION trains on all pairs (its image loss on the covered ones) and is compared with
``text``. Every model has the same sizes (300-dim embeddings, 256-dim GRUs), so a ratio to the text-only row
is what reading the image costs.

Each row is the training benchmark's own measurement (``nlgkit bench --worker train``,
:func:`nlgkit.experiments.bench.measure.measure_training`): real batches of epoch 1 with the cached image features,
after warm-up updates, in a process of its own (peak RSS). The ratios are taken between rows of the same run, so
they move much less with the machine's load than the tokens/s do.

Training a recipe whose data directory or feature cache is missing would prepare the data and run the CNN over
every image first (minutes): such a row is not measured, and the section says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import read_json
from nlgkit.core.recipes import load_recipe
from nlgkit.runs.data import SPLITS
from nlgkit.tasks import build_task
from nlgkit.tasks.multimodal import MultimodalTranslationTask
from nlgkit.vision.cache import FEATURES_FILE, MANIFEST_FILE
from nlgkit.vision.encoders import encoder_dims

RECIPES = "recipes/hirasawa"
# recipe → the text-only recipe on the same pairs it is compared with (None: it is that text-only model)
CASES: dict[str, str | None] = {
    "text-covered_en-de": None,
    "doubly_attentive_en-de": "text-covered_en-de",
    "vag_nmt_en-de": "text-covered_en-de",
    "text_en-de": None,
    "imagination_en-de": "text_en-de",
}


def multimodal_benchmarks(root: Path, updates: int, warmup: int,
                          spawn: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Measure every recipe of :data:`CASES` whose data and features are here (``spawn`` runs one
    ``nlgkit bench`` worker process); the others are listed with the reason they were skipped."""
    rows, skipped = [], []
    for name, baseline in CASES.items():
        recipe = f"{RECIPES}/{name}.toml"
        about = describe_recipe(root, recipe)
        if "missing" in about:
            skipped.append({"recipe": recipe, "model": about["model"], "note": about["missing"]})
            continue
        figures = spawn("--worker", "train", "--recipe", recipe, "--updates", str(updates), "--warmup", str(warmup))
        rows.append({**figures, **about, "baseline": f"{RECIPES}/{baseline}.toml" if baseline else None})
    return {"updates": updates, "warmup": warmup, "rows": rows, "skipped": skipped}


def describe_recipe(root: Path, recipe: str) -> dict[str, Any]:
    """The recipe's model, training pairs and feature grid, with ``missing`` saying why it cannot be measured
    without preparing its data or extracting its features first (relative paths are the repository's: the
    worker runs there)."""
    config = load_recipe(root / recipe)
    about: dict[str, Any] = {"model": config.model.type}
    data_dir = root / config.data.dir
    if not (data_dir / "manifest.json").is_file():
        return {**about, "missing": f"data directory `{config.data.dir}` not prepared (training the recipe "
                                    "once prepares it and extracts the image features: minutes)"}
    task = build_task(config)
    if not isinstance(task, MultimodalTranslationTask):
        raise ConfigError(f"{recipe}: task.type = {config.task.type!r}: this benchmark needs "
                          "multimodal_translation")
    encoder = config.task.encoder
    try:
        names = {name for split in SPLITS for name in task.split_images(data_dir, split) if name}
    except DataError as exc:
        return {**about, "missing": f"{exc}"}
    _, regions, _ = encoder_dims(encoder)
    grid = math.isqrt(regions)
    about.update(pairs=read_json(data_dir / "manifest.json")["lines"]["train"], image_grid=grid)
    features_dir = config.task.features_dir or str(Path(config.data.dir) / "features")
    if not _cached(root / features_dir, f"{encoder.name}-{encoder.resolved_layer}-{grid}x{grid}-*", names):
        about["missing"] = (f"no cached {encoder.name} {grid}×{grid} features of its {len(names):,} images in "
                            f"`{features_dir}` (training the recipe once extracts them: minutes)")
    return about


def _cached(features_dir: Path, pattern: str, names: set[str]) -> bool:
    """Whether a feature cache of this encoder setting holds every image of ``names`` (the manifests are read;
    the features themselves are loaded by the worker)."""
    for manifest in sorted(features_dir.glob(f"{pattern}/{MANIFEST_FILE}")):
        try:
            images = read_json(manifest).get("images", [])
        except DataError:
            continue
        if (manifest.parent / FEATURES_FILE).is_file() and names <= set(images):
            return True
    return False

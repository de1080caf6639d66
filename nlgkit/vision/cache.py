"""A feature cache: the CNN runs once per image, training reads float16 features from disk.

Training a captioner for tens of epochs must not run the CNN every epoch, so the features of every image
are extracted once into ``CACHE_DIR/<cache_key>/``:

- ``features.safetensors``: ``spatial`` (N, L, C) and ``pooled`` (N, P), float16, one row per image;
- ``manifest.json``: the encoder's description (weights checksum, layer, grid, image size,
  preprocessing), the image names in row order with each image's sha256, the counts and the nlgkit version.

The directory name is a digest of the encoder's description, so another encoder (or other weights) gets a
cache of its own. Within it, rows are reused only for images whose sha256 is unchanged; new or changed
images are extracted (and the reason is logged). The cache is written to a temporary directory and
renamed into place, so an interrupted extraction never looks finished.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from nlgkit import __version__
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import atomic_directory, read_json, sha256_file, write_json
from nlgkit.vision.encoders import EncoderConfig, ImageEncoder, build_encoder, encoder_dims
from nlgkit.vision.images import load_image

FEATURES_FILE = "features.safetensors"
MANIFEST_FILE = "manifest.json"
FORMAT = 1


def cache_key(encoder: ImageEncoder) -> str:
    """A short stable directory name: readable prefix + digest of everything the features depend on."""
    description = encoder.describe()
    digest = hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:12]
    name, layer, grid = description["name"], description["layer"], description["grid"]
    return f"{name}-{layer}-{grid}x{grid}-{digest}"


class FeatureCache:
    """Features of a set of images, one row per name: spatial (N, L, C) and pooled (N, P), float16."""

    def __init__(self, names: list[str], spatial: Tensor, pooled: Tensor, manifest: dict[str, Any]) -> None:
        self.names = names
        self.index = {name: i for i, name in enumerate(names)}
        self.spatial = spatial  # (N, L, C) float16, L = grid * grid
        self.pooled = pooled  # (N, P) float16
        self.manifest = manifest

    @classmethod
    def load(cls, cache_dir: Path) -> FeatureCache:
        """The cache in ``cache_dir`` (one ``<cache_key>`` directory), checked for consistency."""
        cache_dir = Path(cache_dir)
        manifest = read_json(cache_dir / MANIFEST_FILE)
        path = cache_dir / FEATURES_FILE
        if not path.is_file():
            raise DataError(f"{path}: file not found (an incomplete feature cache: extract it again)")
        try:
            tensors = load_file(str(path))
            names = list(manifest["images"])
            spatial, pooled = tensors["spatial"], tensors["pooled"]
        except (SafetensorError, OSError, KeyError, TypeError) as exc:
            raise DataError(f"{path}: unreadable feature cache ({type(exc).__name__}: {exc})") from None
        if spatial.dim() != 3 or pooled.dim() != 2 or not len(names) == len(spatial) == len(pooled):
            raise DataError(f"{path}: {len(names)} names but features {tuple(spatial.shape)} and "
                            f"{tuple(pooled.shape)}")
        return cls(names, spatial, pooled, manifest)

    def rows(self, names: Sequence[str], dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """Spatial (B, L, C) and pooled (B, P) features of ``names``, in that order, as ``dtype``."""
        missing = [name for name in names if name not in self.index]
        if missing:
            raise DataError(f"feature cache: no features for {missing[0]!r} ({len(missing)} images missing)")
        index = torch.tensor([self.index[name] for name in names], dtype=torch.long)
        return self.spatial.index_select(0, index).to(dtype), self.pooled.index_select(0, index).to(dtype)


def _to_stderr(line: str) -> None:
    """The cache's lines are diagnostics: stdout is the command's own output (``--json``, a report)."""
    print(line, file=sys.stderr)


def extract_features(encoder_config: EncoderConfig, images_dir: Path, image_names: list[str], cache_dir: Path,
                     *, batch_size: int = 32, device: str | torch.device = "cpu",
                     log: Callable[[str], None] = _to_stderr, progress: bool = False) -> FeatureCache:
    """Features of every image in ``image_names`` (paths relative to ``images_dir``), extracted at most once.

    Rows come from the cache when the encoder and the image's sha256 are unchanged; the rest are extracted
    (``batch_size`` images at a time on ``device``) and the whole cache is rewritten atomically. An image
    that cannot be read is a DataError naming it: data preparation has already skipped unreadable ones.
    """
    images_dir, cache_dir = Path(images_dir), Path(cache_dir)
    try:
        if not images_dir.is_dir():
            raise DataError(f"{images_dir}: images directory not found")
        encoder = build_encoder(encoder_config)
    except (ConfigError, DataError) as exc:  # no images or CNN weights here: a complete cache still serves
        cache = cached_without_encoder(encoder_config, cache_dir, image_names)
        if cache is None:
            raise
        log(f"{exc}; using the features of every image already cached in {cache_dir}")
        return cache
    description = encoder.describe()
    directory = cache_dir / cache_key(encoder)
    names = sorted(set(image_names))
    if not names:
        raise DataError(f"{images_dir}: no images to extract features of")
    hashes = [_image_sha256(images_dir / name) for name in names]
    old, reason = _previous(directory, description)
    reuse: dict[int, int] = {}  # row → row of the old cache, for unchanged images
    if old is not None:
        reuse, reason = _reusable(old, names, hashes)
        if len(reuse) == len(names):
            log(f"features of {len(names):,} images from {directory} (cached)")
            return old
    todo = [row for row in range(len(names)) if row not in reuse]
    stage = " (below the last block)" if description.get("stage") else ""
    log(f"extracting {description['name']} {description['layer']}{stage} features of {len(todo):,} of "
        f"{len(names):,} images into {directory} ({reason})")

    regions, channels, pooled_dim = encoder.cached_dims()
    spatial = torch.empty(len(names), regions, channels, dtype=torch.float16)  # (N, L, C)
    pooled = torch.empty(len(names), pooled_dim, dtype=torch.float16)  # (N, P)
    if old is not None:
        pairs = torch.tensor(list(reuse.items()), dtype=torch.long).reshape(-1, 2)  # (n, 2): new row, old row
        for chunk in pairs.split(1024):  # in chunks: never a second full copy of the old features
            new, at = chunk[:, 0], chunk[:, 1]
            spatial[new], pooled[new] = old.spatial[at], old.pooled[at]
        del old  # free the old features before the encoder runs
    seconds = _run_encoder(encoder.to(device), images_dir, names, todo, spatial, pooled, batch_size,
                           torch.device(device), log, progress)
    log(f"extracted {len(todo):,} images in {seconds:.1f} s ({len(todo) / max(seconds, 1e-9):.1f} images/s)")
    manifest = {"format": FORMAT, "nlgkit_version": __version__, "encoder": description, "count": len(names),
                "images": names, "sha256": hashes, "spatial_shape": list(spatial.shape),
                "pooled_shape": list(pooled.shape), "dtype": "float16",
                "images_dir": str(images_dir.resolve()),
                "extracted": len(todo), "reused": len(reuse), "seconds": round(seconds, 1)}
    _write(directory, spatial, pooled, manifest)
    return FeatureCache(names, spatial, pooled, manifest)


def gather_features(spatial: Tensor, pooled: Tensor, rows: Sequence[int]) -> dict[str, Tensor]:
    """A batch's image inputs from the cached tables: ``image_spatial`` (B, L, C) and ``image_pooled`` (B, P) of
    ``rows``, float32 (the cache keeps float16). One gathering for every task that batches cached features
    (captioning, multimodal translation), so that they hand models the same inputs."""
    index = torch.tensor(list(rows), dtype=torch.long)
    return {"image_spatial": spatial.index_select(0, index).float(),  # (B, L, C)
            "image_pooled": pooled.index_select(0, index).float()}  # (B, P)


def cached_without_encoder(config: EncoderConfig, cache_dir: Path, image_names: Sequence[str]) -> FeatureCache | None:
    """The one cache in ``cache_dir`` made by this encoder setting (name, layer, grid, image size: whatever its
    weights file) that holds every image of ``image_names``, or None.

    Features are extracted once and often used elsewhere (a GPU machine without the CNN's weights package): there
    neither the weights' checksum nor the images can be checked, so the cache is trusted as extracted.
    """
    channels, regions, _ = encoder_dims(config)
    wanted = {"name": config.name, "layer": config.resolved_layer, "grid": math.isqrt(regions),
              "image_size": config.image_size, "channels": channels}
    found = []
    for manifest_path in sorted(Path(cache_dir).glob(f"{config.name}-{config.resolved_layer}-*/{MANIFEST_FILE}")):
        try:
            manifest = read_json(manifest_path)
        except DataError:
            continue
        described = manifest.get("encoder", {})
        if manifest.get("format") == FORMAT and all(described.get(k) == v for k, v in wanted.items()) \
                and not described.get("stage") and set(image_names) <= set(manifest.get("images", [])):
            found.append(manifest_path.parent)
    return FeatureCache.load(found[0]) if len(found) == 1 else None


def _image_sha256(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"{path}: image not found (prepare the data again?)")
    return sha256_file(path)


def _reusable(old: FeatureCache, names: list[str], hashes: list[str]) -> tuple[dict[int, int], str]:
    """Rows of ``old`` for the unchanged images (row in ``names`` → row in ``old``); why the rest aren't."""
    cached = old.manifest["sha256"]
    reuse, changed = {}, []
    for row, (name, digest) in enumerate(zip(names, hashes)):
        if name in old.index:
            if cached[old.index[name]] == digest:
                reuse[row] = old.index[name]
            else:
                changed.append(name)
    reason = f"{len(changed):,} changed, e.g. {changed[0]}; " if changed else ""
    return reuse, reason + f"{len(names) - len(reuse) - len(changed):,} not cached"


def _previous(directory: Path, description: dict[str, Any]) -> tuple[FeatureCache | None, str]:
    """The cache already in ``directory`` if it was made by this encoder, else None and why not."""
    if not (directory / MANIFEST_FILE).is_file():
        return None, "no cache for this encoder yet"
    try:
        manifest = read_json(directory / MANIFEST_FILE)
    except DataError as exc:
        return None, f"unreadable cache: {exc}"
    if manifest.get("format") != FORMAT or manifest.get("encoder") != description:
        return None, "the encoder changed"
    try:
        return FeatureCache.load(directory), ""
    except DataError as exc:
        return None, f"unreadable cache: {exc}"


def _run_encoder(encoder: ImageEncoder, images_dir: Path, names: list[str], todo: list[int], spatial: Tensor,
                 pooled: Tensor, batch_size: int, device: torch.device, log: Callable[[str], None],
                 progress: bool) -> float:
    """Fill rows ``todo`` of the float16 ``spatial``/``pooled`` batch by batch; returns the seconds taken."""
    start = last_report = time.perf_counter()
    with torch.inference_mode():
        for first in range(0, len(todo), batch_size):
            rows = todo[first : first + batch_size]
            pictures = [load_image(images_dir / names[i]) for i in rows]
            pixels = torch.stack([encoder.preprocess(picture) for picture in pictures])  # (B, 3, S, S)
            batch_spatial, batch_pooled = encoder(pixels.to(device))  # (B, L, C), (B, P)
            index = torch.tensor(rows)
            spatial[index] = batch_spatial.to("cpu", torch.float16)
            pooled[index] = batch_pooled.to("cpu", torch.float16)
            now = time.perf_counter()
            if progress and now - last_report >= 30:
                done = first + len(rows)
                log(f"  {done:,}/{len(todo):,} images, {done / (now - start):.1f} images/s")
                last_report = now
    return time.perf_counter() - start


def _write(directory: Path, spatial: Tensor, pooled: Tensor, manifest: dict[str, Any]) -> None:
    """Write a complete cache next to ``directory``, then swap it in by renames (as checkpoints are)."""
    with atomic_directory(directory) as tmp:
        save_file({"spatial": spatial.contiguous(), "pooled": pooled.contiguous()}, str(tmp / FEATURES_FILE),
                  metadata={"format": "nlgkit-features"})
        write_json(tmp / MANIFEST_FILE, manifest)

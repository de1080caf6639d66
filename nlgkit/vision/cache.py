"""A feature cache: the CNN runs once per image, training reads float16 features from disk.

``CACHE_DIR/<key>/features.safetensors`` holds ``spatial`` (N, L, C) and ``pooled`` (N, P) in float16, and
``manifest.json`` the encoder's description (weights checksum, layer, grid, image size), the image names in
row order with each image's sha256. The cache is reused only when the encoder and every requested image
are unchanged; otherwise it is extracted again (and the reason is logged). It is written to a temporary
directory and renamed into place, so an interrupted extraction never looks finished.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from nlgkit import __version__
from nlgkit.errors import DataError
from nlgkit.io import read_json, sha256_file, write_json
from nlgkit.vision.encoders import EncoderConfig, ImageEncoder, build_encoder
from nlgkit.vision.images import load_image

FEATURES_FILE = "features.safetensors"
MANIFEST_FILE = "manifest.json"


def cache_key(description: dict[str, Any]) -> str:
    """A short stable directory name for an encoder description."""
    text = json.dumps(description, sort_keys=True)
    return f"{description['name']}-{description['layer']}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@dataclass
class FeatureCache:
    names: list[str]
    spatial: Tensor  # (N, L, C) float16
    pooled: Tensor  # (N, P) float16
    manifest: dict[str, Any]

    def __post_init__(self) -> None:
        self.index = {name: i for i, name in enumerate(self.names)}

    @classmethod
    def load(cls, directory: Path) -> FeatureCache:
        manifest = read_json(directory / MANIFEST_FILE)
        tensors = load_file(str(directory / FEATURES_FILE))
        return cls(list(manifest["images"]), tensors["spatial"], tensors["pooled"], manifest)

    def rows(self, names: Sequence[str], dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
        """Spatial (B, L, C) and pooled (B, P) features of ``names``, in that order."""
        missing = [name for name in names if name not in self.index]
        if missing:
            raise DataError(f"feature cache: no features for {missing[0]!r} (and {len(missing) - 1} more)")
        index = torch.tensor([self.index[name] for name in names], dtype=torch.long)
        return self.spatial.index_select(0, index).to(dtype), self.pooled.index_select(0, index).to(dtype)


def _stale(directory: Path, description: dict[str, Any], hashes: dict[str, str]) -> str:
    """Why the cache in ``directory`` cannot serve these images ("" when it can)."""
    if not (directory / MANIFEST_FILE).is_file() or not (directory / FEATURES_FILE).is_file():
        return "no cache yet"
    manifest = read_json(directory / MANIFEST_FILE)
    if manifest.get("encoder") != description:
        return "the encoder changed"
    cached = dict(zip(manifest.get("images", []), manifest.get("sha256", [])))
    for name, digest in hashes.items():
        if name not in cached:
            return f"{name} is not in the cache"
        if cached[name] != digest:
            return f"{name} changed"
    return ""


def extract_features(encoder_config: EncoderConfig, images_dir: Path, image_names: Sequence[str], cache_dir: Path,
                     *, batch_size: int = 32, device: str | torch.device = "cpu",
                     log: Callable[[str], None] = print, progress: bool = False) -> FeatureCache:
    """Features of every image in ``image_names`` (paths relative to ``images_dir``), from the cache if valid."""
    images_dir, cache_dir = Path(images_dir), Path(cache_dir)
    encoder = build_encoder(encoder_config)
    description = encoder.describe()
    directory = cache_dir / cache_key(description)
    names = sorted(set(image_names))
    hashes = {}
    for name in names:
        path = images_dir / name
        if not path.is_file():
            raise DataError(f"{path}: image not found (prepare the data again?)")
        hashes[name] = sha256_file(path)
    reason = _stale(directory, description, hashes)
    if not reason:
        return FeatureCache.load(directory)
    log(f"extracting {description['name']} features of {len(names):,} images into {directory} ({reason})")
    spatial, pooled, seconds = _run_encoder(encoder, images_dir, names, batch_size, torch.device(device), log,
                                            progress)
    log(f"extracted {len(names):,} images in {seconds:.0f} s ({len(names) / max(seconds, 1e-9):.1f} images/s)")
    manifest = {"format": 1, "nlgkit_version": __version__, "encoder": description, "images": names,
                "sha256": [hashes[name] for name in names], "shape": {"spatial": list(spatial.shape),
                                                                     "pooled": list(pooled.shape)},
                "images_dir": str(images_dir.resolve()), "seconds": round(seconds, 1)}
    tmp = directory.with_name(f".{directory.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file({"spatial": spatial, "pooled": pooled}, str(tmp / FEATURES_FILE), metadata={"format": "nlgkit"})
    write_json(tmp / MANIFEST_FILE, manifest)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    return FeatureCache(names, spatial, pooled, manifest)


def _run_encoder(encoder: ImageEncoder, images_dir: Path, names: list[str], batch_size: int, device: torch.device,
                 log: Callable[[str], None], progress: bool) -> tuple[Tensor, Tensor, float]:
    """float16 spatial (N, L, C) and pooled (N, P), filled batch by batch (no float32 copy of everything)."""
    encoder = encoder.to(device)
    spatial = torch.empty(len(names), encoder.grid**2, encoder.channels, dtype=torch.float16)
    pooled = torch.empty(len(names), encoder.pooled_dim, dtype=torch.float16)
    start = time.perf_counter()
    next_report = 1000
    with torch.inference_mode():
        for first in range(0, len(names), batch_size):
            chunk = names[first : first + batch_size]
            pixels = torch.stack([encoder.preprocess(load_image(images_dir / name)) for name in chunk])
            batch_spatial, batch_pooled = encoder(pixels.to(device))
            spatial[first : first + len(chunk)] = batch_spatial.to("cpu", torch.float16)
            pooled[first : first + len(chunk)] = batch_pooled.to("cpu", torch.float16)
            done = first + len(chunk)
            if progress and done >= next_report:
                log(f"  {done:,}/{len(names):,} images")
                next_report += 1000
    return spatial, pooled, time.perf_counter() - start

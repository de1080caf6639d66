"""Builders: validated config → objects (device, model with its head, optimizer, scheduler)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nlgkit.config import RunConfig
from nlgkit.data.vocab import Vocabulary
from nlgkit.errors import ConfigError
from nlgkit.models import MODELS, Generator


def select_device(name: str) -> torch.device:
    """``auto`` picks CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"train.device = {name!r}: not a device (use auto, cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"train.device = {name!r}: CUDA is not available on this machine")
    return device


def build_model(config: RunConfig, src_vocab: Vocabulary, tgt_vocab: Vocabulary) -> Generator:
    """The model named by ``[model]`` owning the head named by ``[head]``."""
    if src_vocab.pad_index != tgt_vocab.pad_index:
        raise ConfigError("source and target vocabularies use different padding indices")
    return MODELS.build(
        config.model,
        src_vocab_size=len(src_vocab),
        tgt_vocab_size=len(tgt_vocab),
        pad_index=tgt_vocab.pad_index,
        head_config=config.head,
        seed=config.train.seed,
        token_counts=tuple(tgt_vocab.counts),
    )


def count_parameters(model: nn.Module) -> dict[str, Any]:
    """Trainable parameters, frozen parameters and fixed buffers (in elements), total and per component."""
    components: dict[str, dict[str, int]] = {}
    trainable = frozen = 0
    seen: set[int] = set()
    for name, param in model.named_parameters():
        if id(param) in seen:  # a tied weight is counted once
            continue
        seen.add(id(param))
        part = components.setdefault(name.split(".")[0], {"trainable": 0, "frozen": 0, "buffers": 0})
        if param.requires_grad:
            trainable += param.numel()
            part["trainable"] += param.numel()
        else:
            frozen += param.numel()
            part["frozen"] += param.numel()
    buffers = 0
    for name, buffer in model.named_buffers():
        buffers += buffer.numel()
        components.setdefault(name.split(".")[0], {"trainable": 0, "frozen": 0, "buffers": 0})["buffers"] += \
            buffer.numel()
    return {"trainable": trainable, "frozen": frozen, "buffers": buffers, "components": components}


def build_optimizer(config: RunConfig, model: nn.Module) -> torch.optim.Optimizer:
    """Adam over trainable parameters only: fixed heads get neither gradients nor optimizer state."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.Adam(params, lr=config.train.lr, weight_decay=config.train.weight_decay)


def build_scheduler(config: RunConfig, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.ReduceLROnPlateau:
    """lr × lr_decay after ``lr_patience`` epochs without validation-BLEU improvement.

    torch reduces once the number of bad epochs *exceeds* ``patience``, hence ``lr_patience - 1``.
    """
    t = config.train
    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max", factor=t.lr_decay, patience=max(t.lr_patience - 1, 0), min_lr=t.min_lr,
        threshold=0.0,
    )

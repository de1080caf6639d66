"""Builders: validated config → objects (device, model with its head, optimizer, scheduler).

Training and inference both import this module: the model a run trains is the model a run loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from nlgkit.core.config import RunConfig
from nlgkit.core.devices import select_device
from nlgkit.core.errors import ConfigError
from nlgkit.data.vocab import SPECIALS, Vocabulary
from nlgkit.heads import HeadContext, build_head
from nlgkit.models import MODELS, Generator
from nlgkit.models.base import ModelContext
from nlgkit.runs.data import ensure_data_dir
from nlgkit.tasks import Task, build_task

__all__ = ["build_model", "build_untrained", "count_parameters", "placeholder_vocabulary", "select_device"]


def build_model(config: RunConfig, context: ModelContext, tgt_vocab: Vocabulary) -> Generator:
    """The model named by ``[model]``, then the head named by ``[head]`` built from what the model offers.

    The head is created after the model's own layers, so a seed draws the same initial weights as when
    models built their head last themselves (runs trained before keep reproducing).
    """
    model = MODELS.build(config.model, context=context)
    model.attach_head(build_head(config.head, HeadContext(
        feature_dim=model.feature_dim, vocab_size=context.tgt_vocab_size, pad_index=context.pad_index,
        target_embedding=model.target_embedding(), seed=config.train.seed, token_counts=tuple(tgt_vocab.counts),
        vocab_tokens=tuple(tgt_vocab.tokens), vocab_source=str(Path(config.data.dir) / f"vocab.{config.data.tgt_lang}.txt"),
    )))
    return context.finish(model) if context.finish is not None else model


def build_untrained(config: RunConfig, log: Any = print,
                    vocab_size: int = 0) -> tuple[Task, dict[str, Vocabulary], Generator]:
    """The task, vocabularies and freshly initialised model of a recipe (data prepared if missing).

    ``vocab_size > 0`` uses placeholder vocabularies of that many entries instead of the data's, so that
    parameter counts of a paper's setting can be printed without its data (Shalev et al.'s COCO: 9,490).
    """
    task = build_task(config)
    if vocab_size > 0:
        vocabs = {lang: placeholder_vocabulary(vocab_size) for lang in task.languages}
    else:
        vocabs = task.load_vocabularies(ensure_data_dir(config, task, log=log))
    return task, vocabs, build_model(config, task.model_context(vocabs), vocabs[task.target_lang])


def placeholder_vocabulary(size: int) -> Vocabulary:
    """A vocabulary of ``size`` entries (the specials included) with made-up words, for counting."""
    if size <= len(SPECIALS):
        raise ConfigError(f"--vocab-size {size}: must exceed the {len(SPECIALS)} special tokens")
    words = [f"w{i}" for i in range(size - len(SPECIALS))]
    return Vocabulary(list(SPECIALS) + words, [0] * len(SPECIALS) + [1] * len(words))


def _component(name: str) -> str:
    """A parameter's component: its top-level module, looking through a wrapper's ``inner`` model."""
    parts = name.split(".")
    return parts[1] if parts[0] == "inner" and len(parts) > 1 else parts[0]


def count_parameters(model: nn.Module) -> dict[str, Any]:
    """Trainable parameters, frozen parameters and fixed buffers (in elements), total and per component."""
    components: dict[str, dict[str, int]] = {}
    trainable = frozen = 0
    seen: set[int] = set()
    for name, param in model.named_parameters():
        if id(param) in seen:  # a tied weight is counted once
            continue
        seen.add(id(param))
        part = components.setdefault(_component(name), {"trainable": 0, "frozen": 0, "buffers": 0})
        if param.requires_grad:
            trainable += param.numel()
            part["trainable"] += param.numel()
        else:
            frozen += param.numel()
            part["frozen"] += param.numel()
    buffers = 0
    for name, buffer in model.named_buffers():
        buffers += buffer.numel()
        components.setdefault(_component(name), {"trainable": 0, "frozen": 0, "buffers": 0})["buffers"] += \
            buffer.numel()
    return {"trainable": trainable, "frozen": frozen, "buffers": buffers, "components": components}

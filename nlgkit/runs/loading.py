"""Loading a trained run for inference: config, task, vocabularies and weights, all checked."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.config import RunConfig, config_from_dict
from nlgkit.core.devices import autocast_to, cpu_bf16_instructions
from nlgkit.core.errors import CheckpointError, ConfigError
from nlgkit.data.vocab import Vocabulary
from nlgkit.models.base import Generator
from nlgkit.runs.build import build_model, select_device
from nlgkit.runs.checkpoint import find_checkpoint, load_meta, load_weights
from nlgkit.tasks import Task, build_task

# what a trained model computes in at inference (``--compute-type``): float32, or autocast to a 16-bit type (the
# heads normalise in float32 whatever the type, and the search adds float32 scores)
COMPUTE_TYPES: dict[str, torch.dtype | None] = {"float32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class TrainedRun:
    config: RunConfig
    task: Task
    model: Generator
    vocabs: dict[str, Vocabulary]  # by language, the target language's last
    assets: Path  # RUN_DIR/data (vocabularies, tokenizer and subword files)
    device: torch.device
    checkpoint: Path
    compute_type: str = "float32"  # a key of COMPUTE_TYPES: what inference computes in (:meth:`computing`)

    @property
    def tgt_vocab(self) -> Vocabulary:
        return self.vocabs[self.task.target_lang]

    @property
    def source_vocab(self) -> Vocabulary | None:
        """The vocabulary of the source tokens the model embeds (None for a task without source text)."""
        return self.task.source_vocabulary(self.vocabs)

    def detokenizer(self) -> Callable[[list[str]], str]:
        return self.task.detokenizer(self.assets)

    def computing(self) -> AbstractContextManager[Any]:
        """The context the model searches and scores in: autocast to ``compute_type`` on its device, or nothing
        for float32."""
        return autocast_to(self.device, COMPUTE_TYPES[self.compute_type])

    def compute_note(self) -> str:
        """A warning line where ``compute_type`` runs slower than float32 on this device ("" otherwise)."""
        if self.device.type != "cpu" or self.compute_type == "float32":
            return ""
        if self.compute_type == "float16":
            return ("--compute-type float16: emulated on the CPU, slower than float32 (2.4-3.4 times here); it is "
                    "for GPUs (bfloat16 pays on CPUs with AMX or AVX512-BF16)")
        if not cpu_bf16_instructions():
            return ("--compute-type bfloat16: this CPU has no bf16 instructions (AMX, AVX512-BF16): emulated, "
                    "slower than float32")
        return ""

    def computing_in(self, compute_type: str) -> TrainedRun:
        """This run searching in ``compute_type`` (``default``: float32), or a ConfigError naming the choices."""
        name = "float32" if compute_type == "default" else compute_type
        if name not in COMPUTE_TYPES:
            raise ConfigError(f"--compute-type {compute_type}: nlgkit's search computes in {', '.join(COMPUTE_TYPES)} "
                              "(CTranslate2's types, such as int8, are --engine ct2's)")
        return dataclasses.replace(self, compute_type=name)


def resolve_checkpoint(run_dir: Path, checkpoint: str) -> Path:
    """``best``/``last`` inside RUN_DIR/checkpoints, or a checkpoint directory given by path."""
    run_dir = Path(run_dir)
    if not checkpoint.strip():
        raise ConfigError("--checkpoint: empty (best, last, or a checkpoint directory)")
    candidate = run_dir / "checkpoints" / checkpoint if checkpoint in ("best", "last") else Path(checkpoint)
    if find_checkpoint(candidate) is None:
        if not run_dir.exists():
            raise CheckpointError(f"{run_dir}: run directory not found")
        raise CheckpointError(f"{candidate}: no checkpoint found")
    return candidate


def load_trained(run_dir: Path, checkpoint: str = "best", device: str = "auto",
                 assets_dir: Path | None = None) -> TrainedRun:
    """Rebuild the model of ``run_dir`` and load its weights.

    ``assets_dir`` (default RUN_DIR/data) holds the vocabularies and tokenizer files; their checksums must
    equal those recorded in the checkpoint, so a model is never paired with the wrong vocabulary.
    """
    run_dir = Path(run_dir)
    path = resolve_checkpoint(run_dir, checkpoint)
    meta = load_meta(path)
    config = config_from_dict(meta["config"], str(path / "meta.json"))
    task = build_task(config)
    assets = Path(assets_dir) if assets_dir else run_dir / "data"
    vocabs = task.load_vocabularies(assets)
    recorded = meta.get("vocab_checksums", {})
    for lang, vocab in vocabs.items():
        if recorded.get(lang) != vocab.checksum():
            raise CheckpointError(f"{assets / f'vocab.{lang}.txt'}: does not match the vocabulary of checkpoint "
                                  f"{path} (checksum differs)")
    torch_device = select_device(device, "--device")
    model = build_model(config, task.model_context(vocabs), vocabs[task.target_lang])
    load_weights(path, model)
    model.to(torch_device).eval()
    return TrainedRun(config, task, model, vocabs, assets, torch_device, path)

"""Loading a trained run for inference: config, vocabularies, text pipelines and weights, all checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from nlgkit.config import RunConfig, config_from_dict
from nlgkit.data.tokenize import TextPipeline, load_pipeline
from nlgkit.data.vocab import Vocabulary
from nlgkit.errors import CheckpointError
from nlgkit.models.base import Generator
from nlgkit.train.builders import build_model, select_device
from nlgkit.train.checkpoint import find_checkpoint, load_meta, load_weights
from nlgkit.train.rundata import load_vocabularies


@dataclass
class TrainedRun:
    config: RunConfig
    model: Generator
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    src_pipeline: TextPipeline
    tgt_pipeline: TextPipeline
    device: torch.device
    checkpoint: Path


def resolve_checkpoint(run_dir: Path, checkpoint: str) -> Path:
    """``best``/``last`` inside RUN_DIR/checkpoints, or a checkpoint directory given by path."""
    run_dir = Path(run_dir)
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
    assets = Path(assets_dir) if assets_dir else run_dir / "data"
    src_lang, tgt_lang = config.data.src_lang, config.data.tgt_lang
    src_vocab, tgt_vocab = load_vocabularies(assets, src_lang, tgt_lang)
    recorded = meta.get("vocab_checksums", {})
    for lang, vocab in ((src_lang, src_vocab), (tgt_lang, tgt_vocab)):
        if recorded.get(lang) != vocab.checksum():
            raise CheckpointError(f"{assets / f'vocab.{lang}.txt'}: does not match the vocabulary of checkpoint "
                                  f"{path} (checksum differs)")
    torch_device = select_device(device)
    model = build_model(config, src_vocab, tgt_vocab)
    load_weights(path, model)
    model.to(torch_device).eval()
    return TrainedRun(config, model, src_vocab, tgt_vocab, load_pipeline(assets, src_lang),
                      load_pipeline(assets, tgt_lang), torch_device, path)

"""``nlgkit export ct2``: a trained Transformer run as a CTranslate2 model directory, and reading one back.

The directory holds what CTranslate2 reads (``model.bin``, ``config.json``, the vocabularies, written by its
model-spec API; :mod:`nlgkit.export.ct2_spec` fills the spec) and what nlgkit needs to translate text the way
the run does: ``nlgkit.json`` (the run's resolved config, vocabulary checksums, where it came from) and ``data/``
(a copy of the run's vocabularies and tokenizer/subword files). ``nlgkit translate --engine ct2 --model DIR``
then tokenises, segments and detokenises exactly as ``nlgkit translate`` does with the run.

Only what CTranslate2 computes exactly as nlgkit does is exported: the Transformer translation model with an
output layer that is one matrix + bias at inference (learned, tied, fixed, Hadamard heads). Anything else is refused
with one line naming what CTranslate2 cannot express, never exported as something different. The directory is written
to a temporary sibling and renamed into place.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgkit import __version__
from nlgkit.core.config import RunConfig, config_from_dict
from nlgkit.core.errors import CheckpointError, ConfigError, DataError
from nlgkit.core.io import atomic_directory, read_json, write_json
from nlgkit.data.vocab import Vocabulary
from nlgkit.export.ct2_spec import transformer_spec
from nlgkit.heads.tied import TiedHeadConfig
from nlgkit.models.transformer import TransformerConfig, TransformerModel
from nlgkit.runs.checkpoint import load_meta
from nlgkit.runs.loading import load_trained, resolve_checkpoint
from nlgkit.tasks import Task, build_task

META_FILE = "nlgkit.json"
ASSETS_DIR = "data"
FORMAT = 1
# what an export's alignments are (nlgkit.json "alignment"); earlier exports have none: CTranslate2's first head
ALIGNMENT = "last layer, mean of heads"
# what `optimize` may store the weights as (CTranslate2 can also convert them when it loads the model)
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16", "int8_bfloat16")
# the Hadamard head's fast transform is a fixed matrix, exported as that matrix
LINEAR_HEADS = ("learned", "tied", "fixed", "hadamard")
# why the other built-in heads are not a matrix + bias at inference
NOT_A_MATRIX = {
    "continuous": "it scores words by a von Mises–Fisher likelihood of the cosine to fixed target vectors, not by a "
                  "softmax over W·f + b",
    "joint": "its word table meets the features through a nonlinearity, σ(V·h + b_v), so it is no single matrix",
}


def ctranslate2_module() -> Any:
    """The ``ctranslate2`` package, or a one-line error saying how to install it."""
    try:
        import ctranslate2  # lazy: an optional extra (`pip install nlgkit[ct2]`)
    except ImportError:
        raise ConfigError("CTranslate2 is not installed (pip install ctranslate2, or the `ct2` extra)") from None
    return ctranslate2


# a line of CTranslate2's C++ log: "[2026-12-07 05:06:12.564] [ctranslate2] [thread 10781] [warning] The compute …"
ENGINE_LOG_LINE = re.compile(r"\[[^]]*\] \[ctranslate2\] \[thread \d+\] \[(\w+)\] (.*)")


@contextmanager
def engine_messages(warn: Callable[[str], None]) -> Iterator[None]:
    """CTranslate2's own warnings while the block runs, each given to ``warn`` as one line ("CTranslate2: …"):
    its C++ library logs straight to file descriptor 2 with a date and thread prefix (a float16 model loaded on a
    CPU, say, is computed in float32), past nlgkit's "warning:" lines, and Python warnings of its converter would
    print their source line too. Anything else written to the descriptor meanwhile is written back as it came; when
    the block fails, its error says why, and CTranslate2's log lines are dropped (one line for one error)."""
    sys.stderr.flush()
    saved = os.dup(2)
    failed = True
    with tempfile.TemporaryFile() as captured, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        os.dup2(captured.fileno(), 2)
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().splitlines(keepends=True):
                logged = ENGINE_LOG_LINE.fullmatch(line.decode("utf-8", "replace").strip())
                if logged is None:
                    os.write(2, line)  # not CTranslate2's: not ours to reword
                elif not failed and logged[1] != "info":
                    warn(f"CTranslate2: {logged[2]}")
            if not failed:
                for caught_warning in caught:
                    warn(f"CTranslate2: {' '.join(str(caught_warning.message).split())}")


def check_exportable(config: RunConfig, source: str) -> None:
    """Refuse, naming the key and the reason, a run CTranslate2 would not compute exactly."""
    if config.task.type != "translation":
        raise ConfigError(f"{source}: task.type = {config.task.type!r}: only text translation runs export to "
                          "CTranslate2")
    if config.model.type != "transformer":
        raise ConfigError(f"{source}: model.type = {config.model.type!r}: only the Transformer exports to "
                          "CTranslate2 (as its TransformerSpec)")
    head = config.head.type
    if head not in LINEAR_HEADS:
        reason = NOT_A_MATRIX.get(head, f"CTranslate2's output layer is a matrix + bias, which only the "
                                        f"{', '.join(LINEAR_HEADS)} heads are")
        raise ConfigError(f"{source}: head.type = {head!r} cannot be exported to CTranslate2: {reason}")
    model = config.model
    if isinstance(config.head, TiedHeadConfig) and isinstance(model, TransformerConfig) \
            and config.head.projection_activation != "none" and model.output_dim not in (0, model.size("dim")):
        raise ConfigError(f"{source}: head.projection_activation = {config.head.projection_activation!r}: the tied "
                          "head's projection is not linear, so its output layer is not one matrix (CTranslate2 "
                          "cannot express it)")


@dataclass(frozen=True)
class ExportSummary:
    directory: Path
    quantization: str
    size_bytes: int
    ctranslate2_version: str


def export_ct2(run_dir: Path, output: Path, checkpoint: str = "best", quantization: str = "float32",
               force: bool = False, warn: Callable[[str], None] = print) -> ExportSummary:
    """Write the CTranslate2 model of ``run_dir``'s checkpoint to ``output`` (weights stored as ``quantization``).

    ``force`` replaces an earlier export at ``output``; any other existing path is left alone. What CTranslate2
    warns of while it converts goes to ``warn``, one line each (:func:`engine_messages`).
    """
    run_dir, output = Path(run_dir), Path(output)
    path = resolve_checkpoint(run_dir, checkpoint)
    meta = load_meta(path)
    check_exportable(config_from_dict(meta["config"], str(path / "meta.json")), str(path / "meta.json"))
    if quantization not in QUANTIZATIONS:
        raise ConfigError(f"--quantization {quantization!r}: choose from {', '.join(QUANTIZATIONS)}")
    if output.exists():
        if not force:
            raise DataError(f"{output}: already exists (--force replaces an earlier export)")
        if not (output / META_FILE).is_file():
            raise DataError(f"{output}: exists and is not an nlgkit CTranslate2 export ({META_FILE} missing): "
                            "not replaced")
    ct2 = ctranslate2_module()
    from ctranslate2 import specs  # lazy: an optional extra (`pip install nlgkit[ct2]`)

    run = load_trained(run_dir, checkpoint, "cpu")
    if not isinstance(run.model, TransformerModel) or run.source_vocab is None:
        raise ConfigError(f"{path}: not a Transformer translation model")
    spec = transformer_spec(specs, run.model, run.source_vocab.tokens, run.tgt_vocab.tokens)
    with engine_messages(warn):
        spec.validate()
        spec.optimize(quantization=quantization)
    with atomic_directory(output) as tmp:
        with engine_messages(warn):
            spec.save(str(tmp))
        shutil.copytree(run.assets, tmp / ASSETS_DIR)
        write_json(tmp / META_FILE, {
            "format": FORMAT, "engine": "ctranslate2", "ctranslate2": ct2.__version__, "nlgkit": __version__,
            "quantization": quantization, "run": str(run_dir), "checkpoint": str(path),
            "config": meta["config"], "vocab_checksums": meta.get("vocab_checksums", {}),
            "alignment": ALIGNMENT})
    size = sum(p.stat().st_size for p in output.rglob("*") if p.is_file())
    return ExportSummary(output, quantization, size, ct2.__version__)


@dataclass(frozen=True)
class ExportedModel:
    """A directory written by :func:`export_ct2`, with the run's config, task and vocabularies loaded."""

    directory: Path
    config: RunConfig
    task: Task
    vocabs: dict[str, Vocabulary]
    meta: dict[str, Any]

    @property
    def assets(self) -> Path:
        return self.directory / ASSETS_DIR

    @property
    def tgt_vocab(self) -> Vocabulary:
        return self.vocabs[self.task.target_lang]

    @property
    def src_vocab(self) -> Vocabulary:
        vocab = self.task.source_vocabulary(self.vocabs)
        if vocab is None:
            raise DataError(f"{self.directory}: the exported task reads no source text")
        return vocab


def load_export(directory: Path) -> ExportedModel:
    """Read an export's ``nlgkit.json`` and vocabularies; their checksums must be those the run recorded."""
    directory = Path(directory)
    meta_path = directory / META_FILE
    if not meta_path.is_file():
        if not directory.exists():
            raise DataError(f"{directory}: no such directory")
        raise DataError(f"{directory}: not an nlgkit CTranslate2 export ({META_FILE} missing; write one with "
                        "`nlgkit export ct2 RUN_DIR -o DIR`)")
    meta = read_json(meta_path)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or "config" not in meta:
        raise DataError(f"{meta_path}: not an export of format {FORMAT} (re-export the run with this nlgkit)")
    config = config_from_dict(meta["config"], str(meta_path))
    task = build_task(config)
    assets = directory / ASSETS_DIR
    vocabs = task.load_vocabularies(assets)
    checksums = meta.get("vocab_checksums") or {}
    for lang, vocab in vocabs.items():
        if checksums.get(lang) != vocab.checksum():
            raise CheckpointError(f"{assets / f'vocab.{lang}.txt'}: does not match the vocabulary the model was "
                                  f"exported with (checksum differs)")
    _check_engine_vocabularies(directory, task.source_vocabulary(vocabs), vocabs[task.target_lang])
    return ExportedModel(directory, config, task, vocabs, meta)


def _check_engine_vocabularies(directory: Path, source: Vocabulary | None, target: Vocabulary) -> None:
    """CTranslate2's own token lists must be the run's vocabularies, id for id: CTranslate2 loads any list, and one
    edited or damaged after the export fails mid-translation ("Invalid token ID") or maps ids to other words."""
    expected = {"source_vocabulary.json": source, "target_vocabulary.json": target, "shared_vocabulary.json": target}
    for name, vocab in expected.items():
        path = directory / name
        if vocab is None or not path.is_file():
            continue
        tokens = read_json(path)
        if tokens != vocab.tokens:
            held = f"{len(tokens):,} tokens" if isinstance(tokens, list) else "not a token list"
            raise CheckpointError(f"{path}: not the run's vocabulary ({held}, the run's has {len(vocab):,}; "
                                  "re-export the run)")

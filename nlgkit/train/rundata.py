"""The data side of a run: locate (or prepare) the data directory, load vocabularies and splits.

A run copies the small files of its data directory (manifest, vocabularies, subword models) into
``RUN_DIR/data`` so that translating with the run never depends on the data directory still existing.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgkit.config import RunConfig
from nlgkit.data.batching import ParallelData, load_split
from nlgkit.data.vocab import Vocabulary
from nlgkit.errors import DataError
from nlgkit.io import read_json, read_lines

SPLITS = ("train", "valid", "test")


def ensure_data_dir(config: RunConfig, log: Any = print) -> Path:
    """``data.dir``, prepared from ``[data.prepare]`` first if it does not exist yet."""
    data_dir = Path(config.data.dir)
    if (data_dir / "manifest.json").is_file():
        return data_dir
    prep = config.data.prepare
    if prep.corpus == "none":
        raise DataError(f"{data_dir}: data directory not found (run `nlgkit prepare` first)")
    from nlgkit.data.prepare import prepare_multi30k

    log(f"preparing {data_dir} from Multi30K ({config.data.src_lang}-{config.data.tgt_lang})")
    prepare_multi30k(data_dir, config.data.src_lang, config.data.tgt_lang, source=prep.source,
                     tokenizer=prep.tokenizer, lowercase=prep.lowercase, min_freq=prep.min_freq,
                     max_len=prep.max_len, subword=prep.subword)
    return data_dir


def is_model_asset(path: Path) -> bool:
    """Files a trained model needs at inference: everything but the split token files and references."""
    stem = path.name.split(".")[0]
    return path.is_file() and stem not in SPLITS


def copy_model_assets(data_dir: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(data_dir.iterdir()):
        if is_model_asset(path):
            shutil.copy2(path, target / path.name)


@dataclass
class RunData:
    data_dir: Path
    manifest: dict[str, Any]
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    train: ParallelData
    valid: ParallelData
    valid_refs: list[str]


def load_vocabularies(directory: Path, src_lang: str, tgt_lang: str) -> tuple[Vocabulary, Vocabulary]:
    return (Vocabulary.load(directory / f"vocab.{src_lang}.txt"),
            Vocabulary.load(directory / f"vocab.{tgt_lang}.txt"))


def load_run_data(config: RunConfig, data_dir: Path) -> RunData:
    src_lang, tgt_lang = config.data.src_lang, config.data.tgt_lang
    manifest = read_json(data_dir / "manifest.json")
    src_vocab, tgt_vocab = load_vocabularies(data_dir, src_lang, tgt_lang)
    train = load_split(data_dir, "train", src_lang, tgt_lang, src_vocab, tgt_vocab, config.data.train_limit)
    valid = load_split(data_dir, "valid", src_lang, tgt_lang, src_vocab, tgt_vocab, config.data.valid_limit)
    refs = read_lines(data_dir / f"valid.ref.{tgt_lang}")
    if config.data.valid_limit:
        refs = refs[: config.data.valid_limit]
    if len(refs) != len(valid):
        raise DataError(f"{data_dir / f'valid.ref.{tgt_lang}'}: {len(refs)} lines, expected {len(valid)}")
    if len(train) == 0:
        raise DataError(f"{data_dir / f'train.{src_lang}'}: no training sentences")
    return RunData(data_dir, manifest, src_vocab, tgt_vocab, train, valid, refs)

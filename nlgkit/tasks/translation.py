"""Translation: token-id source sentences in, target sentences out, corpus BLEU on one reference."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch

from nlgkit.core.config import DataConfig, DataSection, PrepareConfig
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import read_json, read_lines
from nlgkit.core.registry import TASKS, PluginConfig
from nlgkit.data.batching import load_split
from nlgkit.data.prepare import prepare_multi30k
from nlgkit.data.tokenize import load_pipeline
from nlgkit.data.vocab import Vocabulary
from nlgkit.models.base import ModelContext
from nlgkit.tasks.base import TaskData, TextInput
from nlgkit.tasks.tokens import TokenSourceTask


@dataclass(frozen=True)
class TranslationPrepareConfig(PrepareConfig):
    """``[data.prepare]`` of translation: the options of ``nlgkit prepare multi30k``."""

    corpus: Literal["multi30k", "none"] = "multi30k"  # Multi30K: source is a URL or directory ("" = ../shared)
    tokenizer: Literal["spacy", "moses", "none"] = "spacy"
    lowercase: bool = True
    subword: str = "none"  # none | bpe:N | bpe-joint:N | spm:N


@dataclass(frozen=True)
class TranslationDataConfig(DataConfig):
    """``[data]`` of translation: a source and a target language."""

    dir: str = "data/multi30k_de-en"
    src_lang: str = "de"
    tgt_lang: str = "en"
    id_cache: bool = True  # binarise the token files once into DIR/ids, memory-map them after (nlgkit.data.id_cache)
    prepare: TranslationPrepareConfig = field(default_factory=TranslationPrepareConfig)


@dataclass(frozen=True)
class TranslationConfig(PluginConfig):
    """Source sentences ``data.src_lang`` → target sentences ``data.tgt_lang``."""

    data_config: ClassVar[DataSection] = TranslationDataConfig
    type: str = "translation"

    def validate(self, source: str, run_config: Any) -> None:
        data = run_config.data
        if data.src_lang == data.tgt_lang:
            raise ConfigError(f"{source}: data.src_lang and data.tgt_lang are both {data.src_lang!r}")


@TASKS.register("translation", TranslationConfig, default=True)
class TranslationTask(TokenSourceTask):
    item_name = "sentence"
    @property
    def data(self) -> TranslationDataConfig:
        return self.data_section(TranslationDataConfig)

    metric = "bleu"

    @property
    def languages(self) -> tuple[str, ...]:
        return (self.data.src_lang, self.data.tgt_lang)

    def prepare(self, data_dir: Path, log: Callable[[str], None]) -> None:

        cfg = self.data
        prep = cfg.prepare
        if prep.corpus != "multi30k":
            raise ConfigError(f"data.prepare.corpus = {prep.corpus!r}: the translation task prepares "
                              f"'multi30k' (or 'none' for a directory made with `nlgkit prepare`)")
        log(f"preparing {data_dir} from Multi30K ({cfg.src_lang}-{cfg.tgt_lang})")
        prepare_multi30k(data_dir, cfg.src_lang, cfg.tgt_lang, source=prep.source, tokenizer=prep.tokenizer,
                         lowercase=prep.lowercase, min_freq=prep.min_freq, max_len=prep.max_len,
                         subword=prep.subword)

    def load_data(self, data_dir: Path, vocabs: dict[str, Vocabulary], device: torch.device) -> TaskData:
        cfg = self.data
        src_vocab, tgt_vocab = vocabs[cfg.src_lang], vocabs[cfg.tgt_lang]
        manifest = read_json(data_dir / "manifest.json")
        cache_root = data_dir / "ids" if cfg.id_cache else None
        train = load_split(data_dir, "train", cfg.src_lang, cfg.tgt_lang, src_vocab, tgt_vocab, cfg.train_limit,
                           cache_root)
        valid = load_split(data_dir, "valid", cfg.src_lang, cfg.tgt_lang, src_vocab, tgt_vocab, cfg.valid_limit,
                           cache_root)
        refs = read_lines(data_dir / f"valid.ref.{cfg.tgt_lang}")
        if len(refs) != valid.lines_in_files:  # the whole file: a limit reads the first lines of a file that fits
            raise DataError(f"{data_dir / f'valid.ref.{cfg.tgt_lang}'}: {len(refs)} lines, expected "
                            f"{valid.lines_in_files}")
        refs = refs[: len(valid)]
        if len(train) == 0:
            raise DataError(f"{data_dir / f'train.{cfg.src_lang}'}: no training sentences")
        return TaskData(data_dir, manifest, vocabs, train, valid, valid.src, [[ref] for ref in refs])

    def model_context(self, vocabs: dict[str, Vocabulary]) -> ModelContext:
        tgt = vocabs[self.target_lang]
        return ModelContext(task="translation", tgt_vocab_size=len(tgt), pad_index=tgt.pad_index,
                            inputs={"src_vocab_size": len(vocabs[self.data.src_lang])})

    def split_sources(self, data_dir: Path, split: str, vocabs: dict[str, Vocabulary],
                      device: torch.device | str = "cpu") -> list[Any]:
        src = self.data.src_lang
        vocab = vocabs[src]
        return [vocab.encode(line.split()) for line in read_lines(Path(data_dir) / f"{split}.{src}")]

    def reference_files(self, data_dir: Path, split: str) -> list[Path]:
        return [Path(data_dir) / f"{split}.ref.{self.target_lang}"]

    def split_references(self, data_dir: Path, split: str) -> list[list[str]]:
        """The raw (detokenised, as prepared) reference of each sentence."""
        return [[line] for line in read_lines(self.reference_files(data_dir, split)[0])]

    def split_target_tokens(self, data_dir: Path, split: str) -> list[list[list[str]]]:
        """Each sentence's one reference: its line of the prepared target tokens."""
        path = Path(data_dir) / f"{split}.{self.target_lang}"
        if not path.is_file():
            raise DataError(f"{path}: no prepared target tokens of split {split!r}")
        return [[line.split()] for line in read_lines(path)]

    def text_input(self, assets_dir: Path, vocabs: dict[str, Vocabulary]) -> TextInput:
        src = self.data.src_lang
        return TextInput(load_pipeline(assets_dir, src).encode, vocabs[src].encode)

    def target_tokenizer(self, assets_dir: Path) -> Callable[[str], list[str]]:
        return load_pipeline(assets_dir, self.target_lang).encode

    def source_vocabulary(self, vocabs: dict[str, Vocabulary]) -> Vocabulary | None:
        return vocabs[self.data.src_lang]

    def report_keys(self, manifest: dict[str, Any]) -> dict[str, Any]:
        data = self.data
        return {**super().report_keys(manifest), "pair": f"{data.src_lang}-{data.tgt_lang}", "src": data.src_lang,
                "subword": manifest.get("subword", data.prepare.subword)}

    def detokenizer(self, assets_dir: Path) -> Callable[[list[str]], str]:
        return load_pipeline(assets_dir, self.target_lang).decode

    def score(self, texts: list[str], refs: list[list[str]]) -> dict[str, float]:
        # lazy: translating text scores nothing, so sacreBLEU loads only when a validation or report scores
        from nlgkit.metrics.corpus import bleu

        return {"bleu": bleu(texts, [r[0] for r in refs])}

"""A test-only task: write the source tokens in reverse order.

It registers itself like the built-in tasks do and is never named anywhere under ``nlgkit/``: importing this
module is all it takes for ``train``, ``translate``, ``evaluate report``, ``bench`` and the analyses to
serve it. Its data directory holds ``{train,valid,test}.txt`` (one tokenised sentence a line), the one
vocabulary ``vocab.{lang}.txt`` shared by sources and targets, and a manifest; ``prepare`` makes it from
any text file of sentences.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch

from nlgkit.core.config import DataConfig, DataSection, PrepareConfig
from nlgkit.core.errors import DataError
from nlgkit.core.io import read_json, read_lines, write_json
from nlgkit.core.registry import TASKS, PluginConfig
from nlgkit.data.batching import ParallelData
from nlgkit.data.vocab import Vocabulary
from nlgkit.metrics.corpus import bleu
from nlgkit.models.base import ModelContext
from nlgkit.tasks.base import TaskData, TextInput
from nlgkit.tasks.tokens import TokenSourceTask

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class ReversePrepareConfig(PrepareConfig):
    corpus: Literal["lines", "none"] = "lines"  # source: a text file of sentences, split in order
    valid_size: int = 50
    test_size: int = 50


@dataclass(frozen=True)
class ReverseDataConfig(DataConfig):
    tgt_lang: str = "xx"
    prepare: ReversePrepareConfig = field(default_factory=ReversePrepareConfig)


@dataclass(frozen=True)
class ReverseConfig(PluginConfig):
    data_config: ClassVar[DataSection] = ReverseDataConfig
    type: str = "reverse"


def reverse(tokens: list[str]) -> list[str]:
    return tokens[::-1]


@TASKS.register("reverse", ReverseConfig)
class ReverseTask(TokenSourceTask):
    item_name = "sentence"
    metric = "bleu"

    @property
    def languages(self) -> tuple[str, ...]:
        return (self.run_config.data.tgt_lang,)

    def prepare(self, data_dir: Path, log: Callable[[str], None]) -> None:
        prep = self.run_config.data.prepare
        lines = [line.split() for line in read_lines(Path(prep.source))]
        lines = [tokens for tokens in lines if tokens and len(tokens) <= prep.max_len] if prep.max_len else lines
        sizes = {"valid": prep.valid_size, "test": prep.test_size}
        if len(lines) <= sizes["valid"] + sizes["test"]:
            raise DataError(f"{prep.source}: {len(lines)} sentences, too few for the validation and test splits")
        splits = {"valid": lines[: sizes["valid"]], "test": lines[sizes["valid"]: sizes["valid"] + sizes["test"]],
                  "train": lines[sizes["valid"] + sizes["test"]:]}
        data_dir.mkdir(parents=True, exist_ok=True)
        for split, sentences in splits.items():
            (data_dir / f"{split}.txt").write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
        counts = Counter(token for sentence in splits["train"] for token in sentence)
        Vocabulary.build(counts, prep.min_freq).save(data_dir / f"vocab.{self.target_lang}.txt")
        write_json(data_dir / "manifest.json", {"corpus": "reverse", "lang": self.target_lang})
        log(f"prepared {data_dir}: {', '.join(f'{k} {len(v)}' for k, v in splits.items())}")

    def _pairs(self, data_dir: Path, split: str, vocab: Vocabulary, limit: int = 0) -> ParallelData:
        lines = [line.split() for line in read_lines(Path(data_dir) / f"{split}.txt")]
        lines = lines[:limit] if limit else lines
        return ParallelData([vocab.encode(s) for s in lines], [vocab.encode(reverse(s)) for s in lines])

    def load_data(self, data_dir: Path, vocabs: dict[str, Vocabulary], device: torch.device) -> TaskData:
        data, vocab = self.run_config.data, vocabs[self.target_lang]
        train = self._pairs(data_dir, "train", vocab, data.train_limit)
        valid = self._pairs(data_dir, "valid", vocab, data.valid_limit)
        refs = self.split_references(data_dir, "valid")[: len(valid)]
        return TaskData(data_dir, read_json(data_dir / "manifest.json"), vocabs, train, valid, valid.src, refs)

    def model_context(self, vocabs: dict[str, Vocabulary]) -> ModelContext:
        vocab = vocabs[self.target_lang]
        return ModelContext(task="reverse", tgt_vocab_size=len(vocab), pad_index=vocab.pad_index,
                            inputs={"src_vocab_size": len(vocab)})

    def split_sources(self, data_dir: Path, split: str, vocabs: dict[str, Vocabulary],
                      device: torch.device | str = "cpu") -> list[Any]:
        return self._pairs(data_dir, split, vocabs[self.target_lang]).src

    def reference_files(self, data_dir: Path, split: str) -> list[Path]:
        return [Path(data_dir) / f"{split}.txt"]

    def split_references(self, data_dir: Path, split: str) -> list[list[str]]:
        return [[" ".join(reverse(line.split()))] for line in read_lines(self.reference_files(data_dir, split)[0])]

    def text_input(self, assets_dir: Path, vocabs: dict[str, Vocabulary]) -> TextInput:
        return TextInput(str.split, vocabs[self.target_lang].encode)

    def source_vocabulary(self, vocabs: dict[str, Vocabulary]) -> Vocabulary | None:
        return vocabs[self.target_lang]

    def detokenizer(self, assets_dir: Path) -> Callable[[list[str]], str]:
        return " ".join

    def score(self, texts: list[str], refs: list[list[str]]) -> dict[str, float]:
        exact = sum(text == ref[0] for text, ref in zip(texts, refs, strict=True))
        return {"bleu": bleu(texts, [r[0] for r in refs]), "exact": 100.0 * exact / max(1, len(texts))}

"""The task protocol shared by translation and captioning (and, later, multimodal translation).

A *source* is whatever one generation starts from (a token-id sentence, an image's features); an
*example* is a (source, target) pair used for teacher forcing. The task owns both representations and the
``Batch`` that carries them as named model inputs, so the trainer and the search never look inside.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import Tensor

from nlgkit.core.errors import DataError
from nlgkit.core.registry import TASKS
from nlgkit.data.batching import Examples
from nlgkit.data.vocab import Vocabulary

D = TypeVar("D")

if TYPE_CHECKING:
    from nlgkit.core.config import RunConfig
    from nlgkit.data.batching import Batch
    from nlgkit.models.base import Inputs, ModelContext


@dataclass(frozen=True)
class TextInput:
    """Raw text → a task's sources: ``tokenize`` a line as ``prepare`` did, ``encode`` tokens as a source;
    ``attach_image`` (tasks that read images too) encodes tokens with the image file of their line."""

    tokenize: Callable[[str], list[str]]
    encode: Callable[[list[str]], Any]
    attach_image: Callable[[list[str], Path], Any] | None = None


@dataclass
class TaskData:
    """Everything training reads from a prepared data directory."""

    data_dir: Path
    manifest: dict[str, Any]
    vocabs: dict[str, Vocabulary]
    train: Examples
    valid: Examples  # teacher-forced validation loss
    valid_sources: Sequence[Any]  # one per validation item, for generation
    valid_refs: list[list[str]]  # the references of each validation item (one or more)


class Task:
    """Base of every task; subclasses register in ``TASKS`` with their config class."""

    #: name of the validation metric that selects checkpoints, drives the schedule and early stopping
    metric: str = ""
    #: what one source is, for figures and messages ("sentence", "image")
    item_name: str = "item"

    def __init__(self, config: RunConfig) -> None:
        self.run_config = config

    def data_section(self, section: type[D]) -> D:
        """The recipe's ``[data]`` as the task's own section class (which the config parser built it as)."""
        data = self.run_config.data
        if not isinstance(data, section):
            raise TypeError(f"[data] is a {type(data).__name__}, not the task's {section.__name__}")
        return data

    @classmethod
    def from_config(cls, task_config: Any, run_config: RunConfig) -> Task:
        return cls(run_config)

    # -- data ---------------------------------------------------------------------------------------------
    @property
    def languages(self) -> tuple[str, ...]:
        """Languages whose ``vocab.{lang}.txt`` the model needs (the target language last)."""
        raise NotImplementedError

    @property
    def target_lang(self) -> str:
        return self.languages[-1]

    def prepare(self, data_dir: Path, log: Callable[[str], None]) -> None:
        """Create ``data_dir`` from the recipe's ``[data.prepare]``."""
        raise NotImplementedError

    def load_vocabularies(self, directory: Path) -> dict[str, Vocabulary]:
        return {lang: Vocabulary.load(Path(directory) / f"vocab.{lang}.txt") for lang in self.languages}

    def load_data(self, data_dir: Path, vocabs: dict[str, Vocabulary], device: torch.device) -> TaskData:
        raise NotImplementedError

    def model_context(self, vocabs: dict[str, Vocabulary]) -> ModelContext:
        raise NotImplementedError

    # -- batches ------------------------------------------------------------------------------------------
    def collate(self, examples: Examples, indices: list[int], vocab: Vocabulary) -> Batch:
        raise NotImplementedError

    def source_length(self, source: Any) -> int:
        """Length used to sort sources for generation and to bound output length (a·length + b)."""
        raise NotImplementedError

    def source_inputs(self, sources: Sequence[Any], vocab: Vocabulary) -> tuple[Inputs, Tensor]:
        """A batch of sources → the inputs of ``model.encode`` and each source's length (B,)."""
        raise NotImplementedError

    # -- splits for generation and evaluation -----------------------------------------------------------------
    def split_sources(self, data_dir: Path, split: str, vocabs: dict[str, Vocabulary],
                      device: torch.device | str = "cpu") -> list[Any]:
        """Every item of a prepared split (``test``…) as a source of ``generate``, in the split's order."""
        raise NotImplementedError

    def reference_files(self, data_dir: Path, split: str) -> list[Path]:
        """The files :meth:`split_references` reads (a run record keeps copies of them)."""
        raise NotImplementedError

    def split_references(self, data_dir: Path, split: str) -> list[list[str]]:
        """The references of each item of a split (one or more), as outputs are scored against them."""
        raise NotImplementedError

    def split_target_tokens(self, data_dir: Path, split: str) -> list[list[list[str]]]:
        """The target tokens of each item's references (one or more) as training reads them, for scoring them
        by forced decoding (``evaluate confidence``)."""
        raise DataError(f"the {self.run_config.task.type!r} task keeps no target tokens of its splits")

    def outputs_name(self, split: str, beam: int | None = None) -> str:
        """The file a run keeps its outputs of ``split`` in, one line per item (``beam``: a search other than
        the recipe's)."""
        return f"{split}{f'.beam{beam}' if beam is not None else ''}.hyp.{self.target_lang}"

    def text_input(self, assets_dir: Path, vocabs: dict[str, Vocabulary]) -> TextInput:
        """How raw text lines become sources (``nlgkit translate``); tasks that do not read text say so."""
        raise DataError(f"the {self.run_config.task.type!r} task does not read text input")

    def target_tokenizer(self, assets_dir: Path) -> Callable[[str], list[str]]:
        """Raw target text → target tokens as ``prepare`` made them (scoring given references)."""
        raise DataError(f"the {self.run_config.task.type!r} task does not read target text")

    def source_vocabulary(self, vocabs: dict[str, Vocabulary]) -> Vocabulary | None:
        """The vocabulary of the source tokens a model embeds (None: the task has no source text)."""
        return None

    def report_keys(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """What a paper row may be matched on besides model and head: the dataset, language pair and subword
        scheme, read from the recipe and the prepared data's manifest."""
        data = self.run_config.data
        prepare = data.prepare
        return {"dataset": manifest.get("corpus") or (prepare.corpus if prepare.corpus != "none"
                                                       else Path(data.dir).name),
                "tgt": data.tgt_lang}

    # -- text and scores ----------------------------------------------------------------------------------
    def detokenizer(self, assets_dir: Path) -> Callable[[list[str]], str]:
        """Target tokens → text in the form of the training references."""
        raise NotImplementedError

    def score(self, texts: list[str], refs: list[list[str]]) -> dict[str, float]:
        """Validation scores; ``scores[self.metric]`` is the one that selects checkpoints."""
        raise NotImplementedError


def build_task(config: RunConfig) -> Task:
    """The task selected by ``config.task.type`` for the whole resolved recipe ``config``."""
    task: Task = TASKS.build(config.task, run_config=config)
    return task

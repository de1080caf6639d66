"""What every task whose sources are token sentences shares: batches of padded source ids with their lengths.

Translation is one such task; any other that reads text (a test's toy task, multimodal translation's text
side) extends :class:`TokenSourceTask` and inherits the batching the text models expect (``src``,
``src_lengths``), so models built for translation serve it unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor

from nlgkit.data.batching import Batch, ParallelData, collate, pad_sources
from nlgkit.data.vocab import Vocabulary
from nlgkit.models.base import Inputs
from nlgkit.tasks.base import Task


class TokenSourceTask(Task):
    """A task whose examples are :class:`ParallelData` (source ids, target ids) and whose sources are id lists."""

    def collate(self, examples: Any, indices: list[int], vocab: Vocabulary) -> Batch:
        if not isinstance(examples, ParallelData):
            raise TypeError(f"{type(self).__name__} batches ParallelData, not {type(examples).__name__}")
        return collate(examples, indices, vocab)

    def source_length(self, source: list[int]) -> int:
        return len(source)

    def source_inputs(self, sources: Sequence[list[int]], vocab: Vocabulary) -> tuple[Inputs, Tensor]:
        src, lengths = pad_sources(list(sources), vocab.pad_index, vocab.eos_index)  # (B, S), (B,)
        return {"src": src, "src_lengths": lengths}, lengths

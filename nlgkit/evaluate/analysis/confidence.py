"""Reference-token log-probability by training frequency: how sure an output layer is of the words it should write.

Each reference of a split is scored by forced decoding (``translate --score-reference --token-scores``: the
search's own steps), and its tokens' log-probabilities are pooled by each token's count in the training targets
(the run's target vocabulary), in the bins of word F1 by frequency (compare-mt's). A reference token outside the
vocabulary is scored as ``<unk>`` and pooled apart, and so is the end of sentence: neither says anything about the
word itself. Per bin: the tokens, their mean log-probability and its perplexity. A fixed output layer's vectors
carry no frequency (Shalev et al.'s Fig. 2): where it pays, if anywhere, is in these bins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nlgkit.core.errors import DataError
from nlgkit.metrics.vocabulary import bin_labels, frequency_bin

if TYPE_CHECKING:
    from matplotlib.figure import Figure

UNKNOWN_BIN = "<unk>"  # reference words outside the vocabulary, all scored as <unk>
END_BIN = "</s>"  # the end of each sentence


@dataclass(frozen=True)
class ConfidenceBin:
    """The reference tokens of one training-frequency bin: how many, and their mean log-probability."""

    label: str
    tokens: int
    mean_log_prob: float | None  # None for an empty bin

    @property
    def perplexity(self) -> float | None:
        return None if self.mean_log_prob is None else math.exp(-self.mean_log_prob)

    def summary(self) -> dict[str, object]:
        return {"bin": self.label, "tokens": self.tokens, "mean_log_prob": self.mean_log_prob,
                "perplexity": self.perplexity}


def confidence_by_frequency(references: Sequence[Sequence[str]], token_scores: Sequence[Sequence[float]],
                            counts: Mapping[str, int], edges: Sequence[int]) -> list[ConfidenceBin]:
    """Per bin of ``edges`` (then ``<unk>`` and ``</s>``): the tokens of ``references`` (each sentence's target
    tokens) and the mean of their log-scores ``token_scores`` (one per token, then the EOS's, as forced decoding
    gives them); a token is binned by its training count in ``counts``, absent: outside the vocabulary."""
    labels = [*bin_labels(edges), UNKNOWN_BIN, END_BIN]
    sums = [0.0] * len(labels)
    sizes = [0] * len(labels)
    for number, (tokens, scores) in enumerate(zip(references, token_scores, strict=True), start=1):
        if len(scores) != len(tokens) + 1:
            raise DataError(f"reference {number}: {len(scores)} token scores for {len(tokens)} tokens and its EOS")
        for token, score in zip(tokens, scores, strict=False):
            count = counts.get(token)
            index = len(labels) - 2 if count is None else frequency_bin(count, edges)
            sums[index] += score
            sizes[index] += 1
        sums[-1] += scores[-1]
        sizes[-1] += 1
    return [ConfidenceBin(label, size, total / size if size else None)
            for label, total, size in zip(labels, sums, sizes, strict=True)]


def confidence_figure(results: Mapping[str, Sequence[ConfidenceBin]]) -> Figure:
    """Mean reference-token log-probability against training-frequency bin, one line per run (empty bins left
    out; ``<unk>`` and ``</s>`` as separate points at the right)."""
    from matplotlib.figure import Figure  # imported here: only plots need matplotlib

    figure = Figure(figsize=(7, 4))
    axes = figure.add_subplot(1, 1, 1)
    labels = [entry.label for entry in next(iter(results.values()))]
    apart = len(labels) - 2  # <unk> and </s>: markers, not joined to the frequency bins' line
    for name, bins in results.items():
        points = [(k, entry.mean_log_prob) for k, entry in enumerate(bins) if entry.mean_log_prob is not None]
        line = [(k, value) for k, value in points if k < apart]
        drawn = axes.plot([k for k, _ in line], [value for _, value in line], marker="o", label=name)
        alone = [(k, value) for k, value in points if k >= apart]
        axes.scatter([k for k, _ in alone], [value for _, value in alone], color=drawn[0].get_color(), zorder=3)
    axes.set_xticks(range(len(labels)), labels, rotation=30, fontsize="small")
    axes.set_xlabel("training frequency of the reference token")
    axes.set_ylabel("mean log-probability")
    axes.legend(fontsize="small")
    figure.tight_layout()
    return figure

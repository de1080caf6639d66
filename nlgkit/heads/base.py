"""The output-head protocol: the one place where decoder features meet the target vocabulary.

Every model ends at features f (…, d) and owns exactly one head; training asks the head for a loss
against gold targets and search asks it for log-scores over the vocabulary. Nothing else touches the
classification layer, so a new head (joint input–output, sampled softmax, continuous cosine) is one
new file here and never a change to a model or to the search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS, PluginConfig
from nlgkit.heads.sampling import sampled_loss


@dataclass
class HeadContext:
    """What a builder knows when it creates a head.

    ``target_embedding`` is the decoder's input embedding, passed in so that tied and joint heads share it
    at construction time instead of being patched afterwards. ``seed`` makes fixed random matrices
    reproducible; ``token_counts`` are training frequencies by vocabulary index (heads may ignore them).
    """

    feature_dim: int
    vocab_size: int
    pad_index: int
    target_embedding: nn.Embedding
    seed: int = 1
    token_counts: tuple[int, ...] | None = None
    vocab_tokens: tuple[str, ...] | None = None  # the words by index (a head reading a table checks them)
    vocab_source: str = ""  # where they come from, for error messages


@dataclass(frozen=True)
class SamplingConfig:
    share: float = 1.0  # |V′| / |V| in training; 1 = the full softmax (no sampling)

    def validate(self, source: str) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ConfigError(f"{source}: head.sampling.share = {self.share}: expected a share in (0, 1]")


@dataclass(frozen=True)
class HeadConfig(PluginConfig):
    """What every head's config has: ``[head.sampling]`` (subclasses that validate more call ``super``)."""

    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    training_only: ClassVar[tuple[str, ...]] = ("sampling",)  # sampled softmax: how the head trains, not what it is

    def validate(self, source: str, run_config: Any) -> None:
        self.sampling.validate(source)

    def target_embeddings(self) -> str:
        """The target vectors a report names this head by (Tokarchuk & Niculae's vocabulary): "none" for
        heads without fixed target embeddings."""
        return "none"


class OutputHead(nn.Module):
    """Base class of all heads: softmax over ``logits`` unless a subclass overrides ``loss``/``log_probs``.

    ``normalized`` says what ``log_probs`` are: normalised log-probabilities (softmax heads), or scores that
    search may add up but that do not sum to one over the vocabulary (the continuous head).
    """

    normalized: bool = True

    def __init__(self, context: HeadContext) -> None:
        super().__init__()
        self.feature_dim = context.feature_dim
        self.vocab_size = context.vocab_size
        self.pad_index = context.pad_index
        self.sampling_share = 1.0  # < 1: sampled softmax in training (set by build_head from [head.sampling])
        self.sampling_overflows = 0  # batches whose targets alone exceeded the sampling budget

    def logits(self, features: Tensor) -> Tensor:
        """Unnormalised scores (…, V) for features (…, d)."""
        raise NotImplementedError

    def log_probs(self, features: Tensor) -> Tensor:
        """Log-scores (…, V) for search; normalised (logsumexp = 0) for every softmax head."""
        return F.log_softmax(self.logits(features).float(), dim=-1)

    def search_scores(self, features: Tensor) -> tuple[Tensor, Tensor]:
        """``log_probs`` in two parts, scores (B, V) and a per-row offset (B,): log_probs = scores − offset.

        Beam search ranks a row's words by the scores alone and subtracts the offset from the few candidates
        it keeps, instead of writing a normalised (B, V) matrix at every step. For the softmax the scores are
        the logits and the offset their logsumexp; a head with its own ``log_probs`` gives them with offset 0.
        The scores are a new tensor that the caller may change in place (the search masks words in it).
        """
        if type(self).log_probs is not OutputHead.log_probs:
            scores = self.log_probs(features)
            # a float32 log_probs may hand back a tensor it keeps: the caller gets a copy of its own
            scores = scores.float() if scores.dtype != torch.float32 else scores.clone()
            return scores, scores.new_zeros(scores.shape[:-1])
        logits = self.logits(features).float()
        return logits, torch.logsumexp(logits, dim=-1)

    def loss(self, features: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> Tensor:
        """Summed training loss over the non-padding targets.

        features: (…, d); targets: (…) token indices, ``pad_index`` where there is no target.
        Padding positions are dropped before the vocabulary projection, so they cost nothing.
        """
        mask = targets.ne(self.pad_index)
        selected = features[mask]  # (n, d)
        gold = targets[mask]  # (n,)
        if self.training and self.sampling_share < 1.0:
            loss, overflow = sampled_loss(self.candidate_logits, self.vocab_size, selected, gold,
                                          self.sampling_share, label_smoothing)
            self.sampling_overflows += int(overflow)
            return loss
        logits = self.logits(selected).float()
        return F.cross_entropy(logits, gold, reduction="sum", label_smoothing=label_smoothing)

    def train_stats(self) -> dict[str, int]:
        """Counters the trainer logs with each ``train`` event (sampled softmax: batches over budget)."""
        return {"sampling_overflows": self.sampling_overflows} if self.sampling_share < 1.0 else {}

    def candidate_logits(self, features: Tensor, rows: Tensor) -> Tensor:
        """Logits (n, |rows|) of the classes ``rows`` only (sampled softmax); heads with a table override
        this to score just those rows."""
        return self.logits(features).index_select(-1, rows)

    def target_vectors(self) -> Tensor | None:
        """The (V, d') matrix of target vectors when the head has one (for analyses); else None."""
        return None


class LinearHead(OutputHead):
    """A head whose logits are ``F.linear(features, self.weight, self.bias)`` with a (V, d) table of its own,
    learned or fixed: subclasses only say where ``weight`` and ``bias`` come from."""

    weight: Tensor
    bias: Tensor | None

    def logits(self, features: Tensor) -> Tensor:
        return F.linear(features, self.weight, self.bias)  # (…, d) → (…, V)

    def candidate_logits(self, features: Tensor, rows: Tensor) -> Tensor:
        return linear_rows(features, self.weight, self.bias, rows)

    def target_vectors(self) -> Tensor:
        return self.weight


class SharesTargetEmbedding(nn.Module):
    """For heads that hold the decoder's input embedding as ``self.weight`` (the same Parameter, no copy).

    The weight is registered in the head too (``Module.parameters()`` of the whole model yields it once) but
    left out of the head's ``state_dict``: the embedding saves it, and safetensors refuses two names for one
    storage. A state dict that does hold ``weight`` still loads.
    """

    weight: nn.Parameter

    def _save_to_state_dict(self, destination: dict[str, Any], prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination.pop(prefix + "weight", None)  # saved (and loaded) by the embedding that owns it

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, local_metadata: dict[str, Any],
                              strict: bool, missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        if prefix + "weight" in missing_keys:
            missing_keys.remove(prefix + "weight")


def linear_rows(features: Tensor, table: Tensor, bias: Tensor | None, rows: Tensor) -> Tensor:
    """``F.linear(features, table, bias)`` restricted to the classes ``rows``: (n, |rows|)."""
    return F.linear(features, table.index_select(0, rows), None if bias is None else bias.index_select(0, rows))


def build_head(config: PluginConfig, context: HeadContext) -> OutputHead:
    """Create the head selected by ``config.type`` (with its ``[head.sampling]`` share for training)."""
    if not isinstance(config, HeadConfig):
        raise TypeError(f"head {config.type!r}: its config class must derive from HeadConfig")
    head: OutputHead = HEADS.build(config, context=context)
    head.sampling_share = config.sampling.share
    return head

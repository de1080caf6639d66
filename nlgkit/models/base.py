"""The generator-model protocol shared by translation and captioning models.

Search knows nothing about architectures: it calls ``encode`` once, then ``step`` and ``reorder``, and
turns features into scores with ``model.head.search_scores``. Training calls ``forward`` (teacher forcing),
which also returns the model's auxiliary losses, and ``model.head.loss``. State is a dict of tensors whose
first dimension is the batch (or beam) index. Models stop at features: the builder creates the one head
from the model's ``feature_dim`` and ``target_embedding`` and attaches it, so no model builds its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch import Tensor, nn

from nlgkit.core.errors import ConfigError

if TYPE_CHECKING:
    from nlgkit.data.batching import Batch
    from nlgkit.heads.base import OutputHead

State = dict[str, Tensor]
Inputs = Mapping[str, Tensor]


@dataclass(frozen=True)
class ModelContext:
    """What the task tells a model builder about its inputs and outputs.

    ``inputs`` names the sizes of what the task's batches carry (``src_vocab_size`` for source tokens;
    ``image_channels``, ``image_regions``, ``image_pooled_dim`` for image features; a new task may add its
    own names). A model asks for the ones it needs with :meth:`require`, which says clearly when the task
    does not provide one, so no field here is task-specific.
    """

    task: str
    tgt_vocab_size: int
    pad_index: int
    inputs: Mapping[str, int] = field(default_factory=dict)
    # the task's last word on a built model (captioning wraps it to fine-tune the encoder's top block)
    finish: Callable[[Generator], Generator] | None = None

    def require(self, name: str, model: str) -> int:
        if name not in self.inputs:
            raise ConfigError(f"model.type = {model!r} needs {name.replace('_', ' ')}, which the "
                              f"{self.task!r} task does not provide; choose a model made for this task")
        return int(self.inputs[name])


def source_embedding(shared: bool, target: nn.Embedding, src_vocab_size: int,
                     build: Callable[[], nn.Embedding]) -> nn.Embedding:
    """The target embedding itself when ``model.share_embeddings`` (one joint vocabulary, else a ConfigError naming
    both sizes), otherwise a new one from ``build``."""
    if not shared:
        return build()
    if src_vocab_size != target.num_embeddings:
        raise ConfigError(f"model.share_embeddings: the source vocabulary has {src_vocab_size} entries, "
                          f"the target {target.num_embeddings} (share needs one joint vocabulary)")
    return target


def check_model_options(config: Any, source: str, positive: tuple[str, ...]) -> None:
    """What every model config checks: its sizes are positive and its dropout lies in [0, 1)."""
    for key in positive:
        if getattr(config, key) <= 0:
            raise ConfigError(f"{source}: model.{key} = {getattr(config, key)}: must be positive")
    if not 0.0 <= config.dropout < 1.0:
        raise ConfigError(f"{source}: model.dropout = {config.dropout}: must be in [0, 1)")


class Generator(nn.Module):
    """An encoder–decoder that stops at features; its single ``head`` maps them to the vocabulary."""

    head: OutputHead
    feature_dim: int
    # State entries that ``encode`` computes and ``step`` passes on unchanged (encoder outputs, attention
    # keys, padding masks): every beam of a sentence holds the same rows of them, so beam search does not
    # reorder them while hypotheses only move among the beams of the same sentences.
    static_state: frozenset[str] = frozenset()

    @classmethod
    def from_config(cls, config: Any, context: ModelContext) -> Generator:
        return cls(config, context)

    def target_embedding(self) -> nn.Embedding:
        """The decoder's target input embedding (tied and joint heads share it)."""
        return self.tgt_embed  # type: ignore[return-value]

    def source_embedding(self) -> nn.Embedding | None:
        """The encoder's token embedding, which pretrained tables may initialise (None: no source tokens)."""
        embedding = getattr(self, "src_embed", None)
        return embedding if isinstance(embedding, nn.Embedding) else None

    def attach_head(self, head: OutputHead) -> None:
        self.head = head

    def encode(self, inputs: Inputs) -> State:
        """Encode a batch of named inputs (source tokens and lengths, or image features) into a start state."""
        raise NotImplementedError

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        """One decoding step: prev_tokens (B,) → features (B, d) and the next state."""
        raise NotImplementedError

    def reorder(self, state: State, index: Tensor) -> State:
        """Select/duplicate batch rows of the state (beam search): every tensor is indexed on dim 0."""
        return {key: value.index_select(0, index) for key, value in state.items()}

    def step_modules(self) -> tuple[nn.Module, ...] | None:
        """The modules that ``forward`` calls once per target step in a Python loop (recurrent decoders), or
        None (the default) when ``forward`` has no such loop.

        ``train.compile`` compiles these one by one and leaves the loop to Python; without a loop it compiles
        the whole training step. Dynamo unrolls a loop over steps once for every target length it meets: the
        whole step of a tiny RNN had not compiled its first epoch after 10 minutes of CPU, and Table 2's RNN
        not within 75 s on an H100.
        """
        return None

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        """Teacher forcing: features (B, T, d) for ``batch.prev_tokens`` and the auxiliary losses.

        Auxiliary losses (e.g. Show-Attend-Tell's attention regulariser) are scalars already weighted by
        the model's own configuration; the trainer adds them to the head's per-token loss and logs them.
        """
        raise NotImplementedError

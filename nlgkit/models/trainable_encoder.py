"""A captioner whose image encoder's last block trains with it (``[task.encoder] fine_tune_top = true``).

The wrapper turns the cached map below the block into the features any captioner reads (``image_spatial``,
``image_pooled``) and hands everything else to the wrapped model, so every captioning model and every head
fine-tune without a change to them, to the search or to the trainer. The block's weights are saved with
the model's in the run's checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from torch import Tensor, nn

from nlgkit.models.base import Generator, Inputs, State

if TYPE_CHECKING:
    from nlgkit.data.batching import Batch
    from nlgkit.heads.base import OutputHead
    from nlgkit.vision.encoders import TrainableTop


class WithTrainableEncoderTop(Generator):
    def __init__(self, inner: Generator, top: TrainableTop) -> None:
        super().__init__()
        self.inner = inner
        self.encoder_top = top
        self.feature_dim = inner.feature_dim

    def _features(self, inputs: Inputs) -> dict[str, Tensor]:
        spatial, pooled = self.encoder_top(inputs["image_spatial"])  # the map below the block → features
        return {**inputs, "image_spatial": spatial, "image_pooled": pooled}

    @property
    def head(self) -> OutputHead:  # type: ignore[override]
        return self.inner.head

    def target_embedding(self) -> nn.Embedding:
        return self.inner.target_embedding()

    def attach_head(self, head: OutputHead) -> None:
        self.inner.attach_head(head)

    def encode(self, inputs: Inputs) -> State:
        return self.inner.encode(self._features(inputs))

    def step(self, prev_tokens: Tensor, state: State) -> tuple[Tensor, State]:
        return self.inner.step(prev_tokens, state)

    def reorder(self, state: State, index: Tensor) -> State:
        return self.inner.reorder(state, index)

    @property
    def static_state(self) -> frozenset[str]:  # type: ignore[override]
        return self.inner.static_state

    def step_modules(self) -> tuple[nn.Module, ...] | None:
        return self.inner.step_modules()

    def forward(self, batch: Batch) -> tuple[Tensor, dict[str, Tensor]]:
        return self.inner(replace(batch, inputs=self._features(batch.inputs)))

    @property
    def attention(self) -> Callable[[Batch], Any]:
        """The wrapped model's attention (``caption --attention``), when it has one."""
        inner_attention = cast(Any, self.inner).attention  # AttributeError: no attention to draw
        return lambda batch: inner_attention(replace(batch, inputs=self._features(batch.inputs)))

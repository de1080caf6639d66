"""The training objective as one module: the model's features and the head's loss in a single forward.

Heads turn features into the loss; keeping that inside one ``forward`` means every trainable parameter
(model and head) is used where ``DistributedDataParallel`` looks for it, and ``torch.compile`` sees the
whole step (of a model without a Python loop over target steps: :mod:`nlgkit.train.compilation`).
"""

from __future__ import annotations

from torch import Tensor, nn

from nlgkit.data.batching import Batch
from nlgkit.models.base import Generator


class TrainingObjective(nn.Module):
    def __init__(self, model: Generator, label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.model = model
        self.label_smoothing = label_smoothing

    def forward(self, batch: Batch, loss_tokens: float,
                aux_weight: float = 1.0) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """(loss to minimise, the head's summed loss, each auxiliary loss).

        The head's loss is summed over the batch's target tokens and divided by ``loss_tokens``: the batch's
        own count in one process; the global batch's count over the number of ranks under data parallelism,
        so that averaging the ranks' gradients gives the gradient of the whole batch (with gradients accumulated
        over several batches, the count of all of them). The auxiliary losses, means over the batch's examples, are
        taken in float32 and weighted by ``aux_weight``: 1 for a batch alone, its share of the examples when it is
        one of several.
        """
        features, aux_losses = self.model(batch)
        loss_sum = self.model.head.loss(features, batch.targets, label_smoothing=self.label_smoothing)
        loss = loss_sum / loss_tokens
        # float32: under autocast a model's own losses can come out in bf16, too coarse to add up over updates
        aux_losses = {name: value.float() for name, value in aux_losses.items()}
        for value in aux_losses.values():
            loss = loss + aux_weight * value
        return loss, loss_sum.detach(), {name: value.detach() for name, value in aux_losses.items()}

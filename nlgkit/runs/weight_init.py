"""Initial weights of a freshly built model by a named scheme (``[train] weight_init``), before any table is read.

``default`` keeps what each layer draws itself (PyTorch's: embeddings N(0, 1), rows of norm √dim ≈ 17 at 300).
``kaiming_normal`` is nmtpytorch's ``reset_parameters``, the toolkit of Hirasawa & Komachi (2019) and of
Elliott & Kádár's IMAGINATION: every trainable matrix N(0, 2 / fan_in), embeddings included (rows of norm ≈ √2),
then the padding rows zero. It matters when word-vector tables start some rows: with the default the random
rows are an order of magnitude longer than a table's, with nmtpytorch's the two are of one scale.
Image CNN layers (2-D convolutions, batch norm) are never touched: their weights are pretrained.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

# Layers whose matrices the schemes draw: the text side of every model and head here.
_TEXT_LAYERS = (nn.Embedding, nn.Linear, nn.Conv1d, nn.RNNBase, nn.RNNCellBase, nn.MultiheadAttention)
# Scheme → how it draws one matrix in place (None: keep each layer's own draw).
SCHEMES: dict[str, Callable[[Tensor], Tensor] | None] = {"default": None, "kaiming_normal": nn.init.kaiming_normal_}


def initialise_weights(model: nn.Module, scheme: str) -> int:
    """Redraw ``model``'s trainable text-layer matrices by ``scheme``; return how many tensors were redrawn.

    Frozen weights (fixed heads' buffers, parameters without gradient) keep their values."""
    draw = SCHEMES[scheme]
    if draw is None:
        return 0
    seen: set[int] = set()  # a tied matrix is drawn once
    with torch.no_grad():
        for module in model.modules():
            if not isinstance(module, _TEXT_LAYERS):
                continue
            for parameter in module.parameters(recurse=False):
                if parameter.requires_grad and parameter.dim() > 1 and id(parameter) not in seen:
                    seen.add(id(parameter))
                    draw(parameter)
            if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()
    return len(seen)

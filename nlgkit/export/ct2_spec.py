"""An nlgkit Transformer as a CTranslate2 ``TransformerSpec``: every weight copied into CTranslate2's model-spec API.

The mapping, sub-layer by sub-layer (``nlgkit.models.transformer`` → ``ctranslate2.specs``):

- token embeddings (×√d, CTranslate2's ``scale_embeddings``) plus the position table, passed as the spec's
  ``position_encodings`` whether sinusoidal or learned, so CTranslate2 adds exactly nlgkit's rows (nlgkit
  interleaves sin/cos, CTranslate2's built-in table does not);
- self-attention: query, key and value fused into one (3d, d) projection, then the output projection;
  cross-attention: the query, then key and value fused (2d, d), then the output; every projection with its bias;
- each residual block's LayerNorm becomes the norm of its sub-layer (pre- or post-norm alike), the final norms of
  a pre-norm encoder and decoder the spec's ``layer_norm``; the FFN is Linear → ReLU → Linear;
- the model's ``output_dim`` Linear, applied after the decoder's last norm, is the decoder's ``project_out``
  (CTranslate2 applies it at the same place; the spec's ``project_in`` is left out, which CTranslate2 allows);
- the head is one matrix and one bias at inference and becomes the spec's ``projection``: its own (V, d) table and
  bias (learned, tied or fixed; the Hadamard head's rows, materialised: nlgkit applies them by a fast transform,
  CTranslate2 as the matrix they are), composed with the tied head's linear projection when it has one (product
  taken in float64). A head with a nonlinearity there cannot be folded and is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from nlgkit.core.errors import ConfigError
from nlgkit.data.vocab import BOS, EOS, UNK
from nlgkit.heads.base import LinearHead
from nlgkit.heads.hadamard import HadamardHead
from nlgkit.heads.tied import TiedHead
from nlgkit.models.transformer import Attention, DecoderLayer, EncoderLayer, FeedForward, TransformerModel

Affine = tuple[Tensor, Tensor | None]  # (out, in) weight and (out,) bias of a map applied to features


def head_projection(model: TransformerModel) -> Affine:
    """The (V, f) matrix and (V,) bias that turn the model's features into logits.

    Without a tied projection these are the head's own tensors, unchanged; with one, the two affine maps are
    composed: logits = W (P f + p) + b = (W P) f + (W p + b).
    """
    head = model.head
    chain: list[Affine] = []
    if isinstance(head, TiedHead):
        if head.projection is not None:
            if head.activation != "none":
                raise ConfigError(f"head.projection_activation = {head.activation!r}: the tied head's projection "
                                  "is not linear, so its output layer is not one matrix (CTranslate2 cannot "
                                  "express it)")
            chain.append((head.projection.weight, head.projection.bias))
        chain.append((head.weight, head.bias))
    elif isinstance(head, LinearHead):
        chain.append((head.weight, head.bias))
    elif isinstance(head, HadamardHead):  # a fixed linear map that nlgkit applies by a transform: its (V, f) rows
        chain.append((head.target_vectors(), head.bias))
    else:
        raise ConfigError(f"head {type(head).__name__}: not a matrix + bias at inference (CTranslate2 cannot "
                          "express it)")
    if len(chain) == 1:
        return chain[0]
    weight = chain[0][0].detach().double()
    bias = _bias64(chain[0])
    for next_weight, next_bias in chain[1:]:
        w = next_weight.detach().double()
        weight = w @ weight
        bias = w @ bias + _bias64((next_weight, next_bias))
    has_bias = any(b is not None for _, b in chain)
    return weight.float(), bias.float() if has_bias else None


def _bias64(affine: Affine) -> Tensor:
    weight, bias = affine
    return bias.detach().double() if bias is not None else torch.zeros(weight.size(0), dtype=torch.float64)


def position_table(model: TransformerModel) -> Tensor:
    """The (max_positions, d) rows nlgkit adds to the scaled embeddings: learned, or its sinusoid buffer."""
    return model.positions.weight if model.positions is not None else model.sinusoids


def layer_norm_epsilon(model: TransformerModel) -> float:
    """The one epsilon every LayerNorm of the model uses (CTranslate2 has one setting for all)."""
    values = {m.eps for m in model.modules() if isinstance(m, nn.LayerNorm)}
    if len(values) != 1:
        raise ConfigError(f"the model's LayerNorms use several epsilons {sorted(values)}: CTranslate2 takes one")
    return values.pop()


def transformer_spec(specs: Any, model: TransformerModel, src_tokens: list[str], tgt_tokens: list[str]) -> Any:
    """A filled ``specs.TransformerSpec`` (``specs``: the ``ctranslate2.specs`` module) for ``model``, with the
    source and target vocabularies registered; ``validate``/``optimize``/``save`` are left to the caller."""
    config = model.config
    pre_norm = config.norm == "pre"
    project_out = isinstance(model.output, nn.Linear)  # output_dim: a Linear after the decoder's last norm
    # alignments (translate --replace-unk / --report-align) from the last layer's cross-attention averaged over
    # all its heads, as nlgkit's Transformer reports them (CTranslate2's default: the first head alone)
    decoder_spec = specs.TransformerDecoderSpec(config.size("decoder_layers"), config.size("heads"),
                                                pre_norm=pre_norm, activation=specs.Activation.RELU,
                                                project_in_out=project_out, alignment_layer=-1,
                                                alignment_heads=config.size("heads"))
    if project_out:
        del decoder_spec.project_in  # nlgkit has nothing between the embeddings and the positions
    spec = specs.TransformerSpec(specs.TransformerEncoderSpec(config.size("encoder_layers"), config.size("heads"),
                                                              pre_norm=pre_norm, activation=specs.Activation.RELU),
                                 decoder_spec)
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = UNK, BOS, EOS
    spec.config.decoder_start_token = BOS
    spec.config.add_source_eos = True  # nlgkit's sources end with </s> (pad_sources)
    spec.config.layer_norm_epsilon = layer_norm_epsilon(model)
    positions = position_table(model)

    encoder = spec.encoder
    encoder.embeddings[0].weight = _array(model.src_embed.weight)
    encoder.position_encodings.encodings = _array(positions)
    for layer_spec, layer in zip(encoder.layer, model.encoder, strict=True):
        assert isinstance(layer, EncoderLayer)
        _self_attention(layer_spec.self_attention, layer.attention, _block_norm(layer, 0))
        _feed_forward(layer_spec.ffn, layer.ffn, _block_norm(layer, 1))
    if pre_norm:
        _norm(encoder.layer_norm, model.encoder_norm)

    decoder = spec.decoder
    decoder.embeddings.weight = _array(model.tgt_embed.weight)
    decoder.position_encodings.encodings = _array(positions)
    for layer_spec, layer in zip(decoder.layer, model.decoder, strict=True):
        assert isinstance(layer, DecoderLayer)
        _self_attention(layer_spec.self_attention, layer.self_attention,
                        _block_norm(layer, 0))
        _cross_attention(layer_spec.attention, layer.cross_attention,
                         _block_norm(layer, 1))
        _feed_forward(layer_spec.ffn, layer.ffn, _block_norm(layer, 2))
    if pre_norm:
        _norm(decoder.layer_norm, model.decoder_norm)
    if project_out:
        _linear(decoder.project_out, model.output)
    weight, bias = head_projection(model)
    decoder.projection.weight = _array(weight)
    if bias is not None:
        decoder.projection.bias = _array(bias)

    spec.register_source_vocabulary(list(src_tokens))
    spec.register_target_vocabulary(list(tgt_tokens))
    return spec


def _array(tensor: Tensor) -> np.ndarray:
    return tensor.detach().to("cpu", torch.float32).contiguous().numpy()


def _set_linear(spec: Any, weights: list[Tensor], biases: list[Tensor]) -> None:
    """One CTranslate2 linear from one or more nlgkit projections stacked along their outputs (fused)."""
    spec.weight = _array(torch.cat(weights))
    spec.bias = _array(torch.cat(biases))


def _linear(spec: Any, layer: nn.Module) -> None:
    assert isinstance(layer, nn.Linear) and layer.bias is not None
    _set_linear(spec, [layer.weight], [layer.bias])


def _block_norm(layer: EncoderLayer | DecoderLayer, index: int) -> nn.LayerNorm:
    """The LayerNorm of the layer's ``index``-th residual block (its sub-layer's norm in CTranslate2)."""
    norm = layer.blocks[index].norm
    assert isinstance(norm, nn.LayerNorm)
    return norm


def _norm(spec: Any, norm: nn.Module) -> None:
    assert isinstance(norm, nn.LayerNorm)
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _self_attention(spec: Any, attention: Attention, norm: nn.LayerNorm) -> None:
    parts = (attention.query, attention.key, attention.value)
    _set_linear(spec.linear[0], [p.weight for p in parts], [p.bias for p in parts])
    _linear(spec.linear[1], attention.out)
    _norm(spec.layer_norm, norm)


def _cross_attention(spec: Any, attention: Attention, norm: nn.LayerNorm) -> None:
    _linear(spec.linear[0], attention.query)
    parts = (attention.key, attention.value)
    _set_linear(spec.linear[1], [p.weight for p in parts], [p.bias for p in parts])
    _linear(spec.linear[2], attention.out)
    _norm(spec.layer_norm, norm)


def _feed_forward(spec: Any, ffn: FeedForward, norm: nn.LayerNorm) -> None:
    _linear(spec.linear_0, ffn[0])
    _linear(spec.linear_1, ffn[3])
    _norm(spec.layer_norm, norm)

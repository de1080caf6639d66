"""The Transformer: incremental decoding equals full recomputation, presets and options, every head, one search."""

from __future__ import annotations

import pytest
import torch
from helpers import check_alignment, check_one_search, with_head

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS
from nlgkit.data.batching import Batch
from nlgkit.models import MODELS
from nlgkit.models.base import ModelContext
from nlgkit.models.transformer import TransformerConfig

SRC_V, TGT_V, PAD = 30, 25, 1
TINY = {"encoder_layers": 2, "decoder_layers": 2, "dim": 16, "ffn_dim": 24, "heads": 4, "dropout": 0.1}


def transformer(head: str = "learned", src_vocab: int = SRC_V, **options: object):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    config = TransformerConfig(**{**TINY, **options})  # type: ignore[arg-type]
    context = ModelContext(task="translation", tgt_vocab_size=TGT_V, pad_index=PAD, inputs={"src_vocab_size": src_vocab})
    return with_head(MODELS.build(config, context=context), head, TGT_V)


def inputs() -> dict[str, torch.Tensor]:
    return {"src": torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 1, 1]]), "src_lengths": torch.tensor([5, 3])}


PREV = torch.tensor([[2, 11, 12, 13, 14], [2, 14, 15, 16, 1]])
GOLD = torch.tensor([[11, 12, 13, 14, 3], [14, 15, 16, 3, 1]])


@pytest.mark.parametrize("options", [{}, {"norm": "post"}, {"positions": "learned"}, {"output_dim": 8},
                                     {"share_embeddings": True}, {"cache": False}])
def test_incremental_decoding_equals_full_recomputation(options: dict) -> None:
    src_vocab = TGT_V if options.get("share_embeddings") else SRC_V
    model = transformer(src_vocab=src_vocab, **options).eval()
    with torch.no_grad():
        forced, aux = model(Batch(inputs(), PREV, GOLD, [0, 1], 9))
        assert aux == {} and forced.shape == (2, 5, options.get("output_dim", 16))
        state = model.encode(inputs())
        for t in range(PREV.size(1)):
            step, state = model.step(PREV[:, t], state)
            torch.testing.assert_close(step, forced[:, t], atol=1e-5, rtol=1e-4)
        if options.get("cache", True):
            assert state["self_k0"].shape == (2, 4, 5, 4)  # one cached key per decoded position, per head
        else:
            assert state["self_k0"].shape == (2, 4, 0, 4) and state["prefix"].shape == (2, 5)
    if options.get("share_embeddings"):
        assert model.src_embed is model.tgt_embed


def test_the_cache_follows_the_beams_and_padding_is_not_attended() -> None:
    model = transformer().eval()
    with torch.no_grad():
        state = model.encode(inputs())
        _, state = model.step(PREV[:, 0], state)
        moved = model.reorder(state, torch.tensor([1, 1, 0]))
        assert moved["self_k1"].shape[0] == 3 and torch.equal(moved["self_k1"][2], state["self_k1"][0])
        changed = inputs()
        changed["src"] = changed["src"].clone()
        changed["src"][1, 3:] = torch.tensor([20, 21])
        a = model(Batch(inputs(), PREV, GOLD, [0, 1], 9))[0]
        b = model(Batch(changed, PREV, GOLD, [0, 1], 9))[0]
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("head", HEADS.names())
def test_every_head_learns_a_batch(head: str) -> None:
    model = transformer(head).train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.01)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = model.head.loss(model(Batch(inputs(), PREV, GOLD, [0, 1], 9))[0], GOLD)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses[::6]


@pytest.mark.parametrize("head", ["learned", "continuous"])
def test_decodes_through_the_one_search(head: str) -> None:
    check_one_search(transformer(head, output_dim=8 if head == "continuous" else 0).eval(), inputs(), batch_size=2)
    for cache in (True, False):  # the last layer's cross-attention, with and without the decoding cache
        check_alignment(transformer(head, output_dim=8 if head == "continuous" else 0, cache=cache).eval(), inputs(),
                        batch_size=2)


def test_presets_and_their_parameter_counts() -> None:
    d, f = 512, 2048
    attention, ffn, norm = 4 * (d * d + d), d * f + f + f * d + d, 2 * d
    layers = 6 * (attention + ffn + 2 * norm) + 6 * (2 * attention + ffn + 3 * norm) + 2 * norm  # + final norms
    config = TransformerConfig(preset="base")
    context = ModelContext(task="translation", tgt_vocab_size=100, pad_index=PAD, inputs={"src_vocab_size": 120})
    model = MODELS.build(config, context=context)
    assert sum(p.numel() for p in model.parameters()) == layers + (100 + 120) * d
    small = TransformerConfig(preset="small")
    assert [small.size(k) for k in ("encoder_layers", "dim", "ffn_dim", "heads")] == [3, 256, 1024, 4]
    assert TransformerConfig(preset="small", dim=128).size("dim") == 128  # explicit values win


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="model.dim = 100 is not divisible by model.heads = 8"):
        TransformerConfig(dim=100).validate("r.toml", None)
    with pytest.raises(ConfigError, match="share needs one joint vocabulary"):
        transformer(share_embeddings=True)

"""The stacked LSTM with Luong attention: every attention kind, input feeding, every head, the one search."""

from __future__ import annotations

import pytest
import torch
from helpers import check_alignment, check_one_search, with_head

from nlgkit.core.errors import ConfigError
from nlgkit.core.registry import HEADS
from nlgkit.data.batching import Batch
from nlgkit.models import MODELS
from nlgkit.models.base import ModelContext
from nlgkit.models.lstm_luong import LuongConfig

SRC_V, TGT_V, PAD = 30, 25, 1


def luong(attention: str = "general", layers: int = 2, head: str = "learned", feeding: bool = True):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    config = LuongConfig(embedding_dim=8, hidden_dim=12, layers=layers, attention=attention,
                         input_feeding=feeding, dropout=0.1)
    context = ModelContext(task="translation", tgt_vocab_size=TGT_V, pad_index=PAD, inputs={"src_vocab_size": SRC_V})
    return with_head(MODELS.build(config, context=context), head, TGT_V)


def inputs() -> dict[str, torch.Tensor]:
    return {"src": torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 1, 1]]), "src_lengths": torch.tensor([5, 3])}


PREV = torch.tensor([[2, 11, 12, 13], [2, 14, 15, 1]])
GOLD = torch.tensor([[11, 12, 13, 3], [14, 15, 3, 1]])


@pytest.mark.parametrize("attention", ["dot", "general", "concat"])
@pytest.mark.parametrize("layers,feeding", [(1, True), (3, True), (2, False)])
def test_step_by_step_equals_teacher_forcing(attention: str, layers: int, feeding: bool) -> None:
    model = luong(attention, layers, feeding=feeding).eval()
    with torch.no_grad():
        forced, aux = model(Batch(inputs(), PREV, GOLD, [0, 1], 7))
        assert aux == {} and forced.shape == (2, 4, 12)
        state = model.encode(inputs())
        for t in range(PREV.size(1)):
            step, state = model.step(PREV[:, t], state)
            torch.testing.assert_close(step, forced[:, t])


def test_attention_kinds_and_input_feeding_change_the_function() -> None:
    outputs = []
    for attention, feeding in (("dot", True), ("general", True), ("concat", True), ("general", False)):
        with torch.no_grad():
            outputs.append(luong(attention, feeding=feeding).eval()(Batch(inputs(), PREV, GOLD, [0, 1], 7))[0])
    for i in range(len(outputs)):
        for j in range(i + 1, len(outputs)):
            assert not torch.allclose(outputs[i], outputs[j])


def test_padding_in_the_source_is_not_attended() -> None:
    model = luong().eval()
    changed = inputs()
    changed["src"] = changed["src"].clone()
    changed["src"][1, 3:] = torch.tensor([20, 21])
    with torch.no_grad():
        a = model(Batch(inputs(), PREV, GOLD, [0, 1], 7))[0]
        b = model(Batch(changed, PREV, GOLD, [0, 1], 7))[0]
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("head", HEADS.names())
def test_every_head_learns_a_batch(head: str) -> None:
    model = luong(head=head).train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.01)
    losses = []
    for _ in range(50):
        optimizer.zero_grad()
        features, _ = model(Batch(inputs(), PREV, GOLD, [0, 1], 7))
        loss = model.head.loss(features, GOLD)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses[::6]


@pytest.mark.parametrize("head", ["learned", "joint", "continuous"])
def test_decodes_through_the_one_search(head: str) -> None:
    check_one_search(luong(head=head).eval(), inputs(), batch_size=2)
    check_alignment(luong(head=head).eval(), inputs(), batch_size=2)


def test_parameter_count_is_the_architectures() -> None:
    e, h, layers = 8, 12, 2
    model = luong(layers=layers)
    lstm = lambda i: 4 * h * (i + h) + 8 * h  # weights and both biases of one layer
    expected = (SRC_V * e + TGT_V * e  # embeddings
                + lstm(e) + lstm(h)  # encoder
                + lstm(e + h) + lstm(h)  # decoder with input feeding
                + h * h  # general attention W_a
                + 2 * h * h  # W_c
                + h * TGT_V + TGT_V)  # learned head
    assert sum(p.numel() for p in model.parameters()) == expected


def test_config_limits() -> None:
    with pytest.raises(ConfigError, match="model.layers = 9: 1 to 8 layers"):
        LuongConfig(layers=9).validate("r.toml", None)

"""The RNN model: step-by-step decoding equals teacher forcing, the attention split is exact."""

from __future__ import annotations

import pytest
import torch
from helpers import check_alignment, check_one_search, rnn

from nlgkit.core.registry import HEADS
from nlgkit.data.batching import Batch
from nlgkit.models.rnn import RNNConfig, RNNModel


def tiny_model(cell: str = "gru", layers: int = 1, head: str = "learned") -> RNNModel:
    torch.manual_seed(0)
    config = RNNConfig(cell=cell, embedding_dim=8, encoder_dim=10, decoder_dim=12, attention_dim=7,
                       pre_output_dim=9, decoder_layers=layers, encoder_layers=layers)
    return rnn(config, 30, 25, head).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 1, 1]])
    lengths = torch.tensor([5, 3])
    prev = torch.tensor([[2, 11, 12, 13], [2, 14, 15, 1]])
    return src, lengths, prev


def features(model: RNNModel, src: torch.Tensor, lengths: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """Teacher-forced features through ``forward``, which must return no auxiliary loss for this model."""
    forced, aux = model(Batch({"src": src, "src_lengths": lengths}, prev, prev, [0, 1], 0))
    assert aux == {}
    return forced


@pytest.mark.parametrize("cell,layers", [("gru", 1), ("gru", 2), ("lstm", 1), ("lstm", 2)])
def test_step_by_step_equals_teacher_forcing(cell: str, layers: int) -> None:
    model = tiny_model(cell, layers)
    src, lengths, prev = batch()
    with torch.no_grad():
        forced = features(model, src, lengths, prev)  # (B, T, d)
        state = model.encode({"src": src, "src_lengths": lengths})
        for t in range(prev.size(1)):
            step_features, state = model.step(prev[:, t], state)
            torch.testing.assert_close(step_features, forced[:, t], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell,layers,activation", [("gru", 1, "none"), ("gru", 2, "tanh"), ("lstm", 2, "none")])
def test_search_steps_use_tables_and_compute_the_same_function(cell: str, layers: int, activation: str) -> None:
    torch.manual_seed(0)
    config = RNNConfig(cell=cell, embedding_dim=8, encoder_dim=10, decoder_dim=12, attention_dim=7, pre_output_dim=9,
                       decoder_layers=layers, pre_output_activation=activation)  # type: ignore[arg-type]
    model = rnn(config, 30, 25).eval()
    src, lengths, prev = batch()
    state = model.encode({"src": src, "src_lengths": lengths})
    plain, plain_state = model.step(prev[:, 1], state)  # gradients enabled: the plain path
    with torch.no_grad():
        looked_up, search_state = model.step(prev[:, 1], state)  # a search step: tables
        torch.testing.assert_close(looked_up, plain.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(search_state["hidden"], plain_state["hidden"].detach(), rtol=1e-5, atol=1e-6)
        tables = model._tables()
        assert model._tables() is tables  # computed once for unchanged weights
        model.tgt_embed.weight.add_(1.0)
        assert model._tables() is not tables  # and again after an update


def test_search_tables_follow_a_fused_adam_step_which_bumps_no_version_counter() -> None:
    """The trainer's fused Adam updates weights without bumping their versions: entering training mode
    drops the tables, so validation after an epoch never decodes with the previous epoch's weights."""
    model = tiny_model()
    src, lengths, prev = batch()
    with torch.no_grad():
        stale = model._tables()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
    versions = [p._version for p in model.parameters()]
    model.head.loss(features(model, src, lengths, prev), prev).backward()
    optimizer.step()
    assert [p._version for p in model.parameters()] == versions  # why a version key alone is not enough
    model.eval()
    state = model.encode({"src": src, "src_lengths": lengths})
    plain, _ = model.step(prev[:, 1], state)  # gradients enabled: the plain path, current weights
    with torch.no_grad():
        assert model._tables() is not stale
        torch.testing.assert_close(model.step(prev[:, 1], state)[0], plain.detach(), rtol=1e-5, atol=1e-6)


def test_split_attention_equals_one_linear_over_the_concatenation() -> None:
    model = tiny_model()
    attention = model.attention
    state, keys_in = torch.randn(3, 12), torch.randn(3, 4, 20)
    split = attention.project_keys(keys_in) + attention.project_query(state).unsqueeze(1)
    full = attention.energy(torch.cat([state.unsqueeze(1).expand(-1, 4, -1), keys_in], dim=-1))
    torch.testing.assert_close(split, full)


def test_padding_in_the_source_is_not_attended() -> None:
    model = tiny_model()
    src, lengths, prev = batch()
    changed = src.clone()
    changed[1, 3:] = torch.tensor([20, 21])  # real tokens beyond sentence 1's length
    with torch.no_grad():
        a = features(model, src, lengths, prev)
        b = features(model, changed, lengths, prev)
        c = features(model, changed, torch.tensor([5, 5]), prev)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a[1], c[1])  # the same tokens inside the length do matter


def test_reorder_duplicates_state_rows() -> None:
    model = tiny_model()
    src, lengths, _ = batch()
    state = model.encode({"src": src, "src_lengths": lengths})
    reordered = model.reorder(state, torch.tensor([1, 1, 0]))
    for key, value in reordered.items():
        assert value.size(0) == 3
        torch.testing.assert_close(value[0], state[key][1])
        torch.testing.assert_close(value[2], state[key][0])


@pytest.mark.parametrize("cell,layers", [("gru", 1), ("lstm", 2)])
def test_decodes_through_the_one_search(cell: str, layers: int) -> None:
    src, lengths, _ = batch()
    check_one_search(tiny_model(cell, layers), {"src": src, "src_lengths": lengths}, batch_size=2)
    check_alignment(tiny_model(cell, layers), {"src": src, "src_lengths": lengths}, batch_size=2)


@pytest.mark.parametrize("head", HEADS.names())
def test_every_head_trains_under_bf16_autocast(head: str) -> None:
    """CUDA training runs under bf16 autocast; CPU autocast exercises the same dtype paths without a GPU."""
    model = tiny_model(head=head).train()
    src, lengths, prev = batch()
    targets = torch.tensor([[11, 12, 13, 3], [14, 15, 3, 1]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        forced = features(model, src, lengths, prev)
        loss = model.head.loss(forced, targets)
        log_probs = model.head.log_probs(forced[:, 0])
    assert forced.dtype == torch.bfloat16
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert log_probs.dtype == torch.float32 and torch.isfinite(log_probs).all()
    if model.head.normalized:  # probability heads (score heads give unnormalised scores by contract)
        torch.testing.assert_close(log_probs.logsumexp(-1), torch.zeros(2), atol=1e-5, rtol=0)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)

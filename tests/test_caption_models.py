"""Captioners on small random image features: every model × head trains, decodes through the one search."""

from __future__ import annotations

import pytest
import torch
from helpers import check_one_search, check_steps_match_teacher_forcing, with_head

from nlgkit.core.registry import HEADS
from nlgkit.data.batching import Batch
from nlgkit.models import MODELS
from nlgkit.models.base import Generator, ModelContext
from nlgkit.search import Rules, beam_search, greedy_search, search

V, L, C, P = 23, 6, 10, 12  # vocabulary, regions, channels, pooled size
BOS, EOS, PAD = 2, 3, 1
CAPTIONERS = ["show_tell", "show_attend_tell"]
SMALL = {"show_tell": {"embedding_dim": 8, "hidden_dim": 9, "dropout": 0.1},
         "show_attend_tell": {"embedding_dim": 8, "hidden_dim": 9, "attention_dim": 7, "dropout": 0.1}}


# The paper's captioning setting for fixed heads: cells U[-10, 10] (unit-norm rows cap the logits at |f|).
HEAD_OPTIONS = {"fixed": {"init": "uniform"}}


def captioner(name: str, head: str = "learned", seed: int = 0) -> Generator:
    torch.manual_seed(seed)
    context = ModelContext(task="captioning", tgt_vocab_size=V, pad_index=PAD,
                           inputs={"image_channels": C, "image_regions": L, "image_pooled_dim": P})
    config = MODELS.config_class(name)(type=name, **SMALL[name])
    return with_head(MODELS.build(config, context=context), head, V, **HEAD_OPTIONS.get(head, {}))


def images(b: int = 3, seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    spatial = torch.rand(b, L, C, generator=g)  # (B, L, C): non-negative, as after a ReLU
    return {"image_spatial": spatial, "image_pooled": spatial.mean(1).repeat(1, 2)[:, :P]}


def caption_batch(b: int = 3) -> Batch:
    prev = torch.tensor([[BOS, 5, 6, 7, 8], [BOS, 9, 10, PAD, PAD], [BOS, 11, 12, 13, PAD]])[:b]
    gold = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD], [11, 12, 13, EOS, PAD]])[:b]
    return Batch(images(b), prev, gold, list(range(b)), int(gold.ne(PAD).sum()))


@pytest.mark.parametrize("head", HEADS.names())
@pytest.mark.parametrize("name", CAPTIONERS)
def test_every_captioner_with_every_head_learns_a_batch(name: str, head: str) -> None:
    model = captioner(name, head).train()
    batch = caption_batch()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.02)
    losses = []
    for _ in range(40):
        features, aux = model(batch)
        assert features.shape == (3, 5, model.feature_dim)
        loss = model.head.loss(features, batch.targets) / batch.num_target_tokens + sum(aux.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.7 * losses[0], losses
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", CAPTIONERS)
def test_step_by_step_equals_teacher_forcing(name: str) -> None:
    check_steps_match_teacher_forcing(captioner(name).eval(), caption_batch())


def test_attention_regulariser_is_the_auxiliary_loss() -> None:
    model = captioner("show_attend_tell").eval()
    batch = caption_batch()
    with torch.no_grad():
        _, alphas = model.attention(batch)  # (B, T, L)
        _, aux = model(batch)
    torch.testing.assert_close(alphas.sum(-1), torch.ones(3, 5))
    mask = batch.prev_tokens.ne(PAD).unsqueeze(-1).float()
    by_hand = ((1 - (alphas * mask).sum(1)) ** 2).mean()
    torch.testing.assert_close(aux["attention"], by_hand)
    assert captioner("show_tell")(batch)[1] == {}


@pytest.mark.parametrize("head", ["learned", "fixed", "hadamard", "continuous"])
@pytest.mark.parametrize("name", CAPTIONERS)
def test_captioners_decode_through_the_one_search(name: str, head: str) -> None:
    model = captioner(name, head).eval()
    inputs = images(4)
    max_lens = torch.full((4,), 7)
    rules = Rules(batch_size=4, bos=BOS, eos=EOS, max_lens=max_lens)
    greedy = greedy_search(model, model.encode(inputs), rules)
    beam1 = search(model, model.encode(inputs), batch_size=4, bos=BOS, eos=EOS, beam_size=1, max_lens=max_lens)
    beam4 = beam_search(model, model.encode(inputs), rules, beam_size=4, nbest=4)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in beam1]
    for hyps in beam4:
        assert len(hyps) == 4 and all(len(h.tokens) <= 7 for h in hyps)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    # batched equals one at a time
    for i in range(4):
        one = {k: v[i : i + 1] for k, v in inputs.items()}
        alone = beam_search(model, model.encode(one), Rules(batch_size=1, bos=BOS, eos=EOS, max_lens=max_lens[:1]),
                            beam_size=4, nbest=4)
        assert [h.tokens for h in alone[0]] == [h.tokens for h in beam4[i]]
    check_one_search(model, inputs, batch_size=4, bos=BOS, eos=EOS, max_len=7)


def test_a_translation_model_refuses_a_captioning_context() -> None:
    from nlgkit.core.errors import ConfigError

    context = ModelContext(task="captioning", tgt_vocab_size=V, pad_index=PAD,
                           inputs={"image_channels": C, "image_regions": L, "image_pooled_dim": P})
    with pytest.raises(ConfigError, match="src vocab size"):
        MODELS.build(MODELS.config_class("rnn")(type="rnn"), context=context)


def test_dry_run_counts_the_papers_coco_models() -> None:
    """Show-Attend-Tell at the paper's sizes is, to the parameter, the widely used PyTorch decoder (its learned
    output layer included); a fixed head removes exactly the 512 × 9,490 matrix (the bias still trains)."""
    from pathlib import Path

    from typer.testing import CliRunner

    from nlgkit.cli.main import app

    recipes = Path(__file__).resolve().parents[1] / "recipes"
    counts = {}
    for model in ("tell", "attend"):
        for head in ("learned", "fixed"):
            result = CliRunner().invoke(app, ["train", str(recipes / f"coco_{model}_{head}.toml"), "--dry-run",
                                              "--vocab-size", "9490"])
            assert result.exit_code == 0, result.output
            counts[model, head] = int(result.stdout.strip().splitlines()[-1].split()[-1])
    # by hand: attention 2048·512+512 + 512·512+512 + 512+1; embedding 9490·512; LSTMCell 4·512·(2560+512) + 8·512;
    # init_h, init_c 2·(2048·512+512); f_beta 512·2048+2048; output layer 512·9490+9490
    assert counts["attend", "learned"] == 20_483_859
    # image projection 2048·512+512; embedding 9490·512; LSTM 4·512·(512+512) + 8·512; output layer as above
    assert counts["tell", "learned"] == 12_877_586
    for model in ("tell", "attend"):
        assert counts[model, "learned"] - counts[model, "fixed"] == 512 * 9490


@pytest.mark.parametrize("name", CAPTIONERS)
def test_a_search_for_source_alignments_names_a_model_without_source_words(name: str) -> None:
    """A captioner attends to image regions, not source words: asked for alignments (--replace-unk), the
    search says which model cannot give them instead of failing on a missing entry."""
    from nlgkit.core.errors import ConfigError

    model = captioner(name).eval()
    with pytest.raises(ConfigError, match="reports no attention over source positions"):
        beam_search(model, model.encode(images()),
                    Rules(batch_size=3, bos=BOS, eos=EOS, max_lens=torch.full((3,), 4), alignment=True), beam_size=2)

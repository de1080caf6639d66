"""The multimodal translation models (doubly-attentive NMT, IMAGINATION, VAG-NMT) on small synthetic batches:
every model × head trains and decodes through the one search; what each does with the image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import check_alignment, check_one_search, check_steps_match_teacher_forcing

from nlgkit.core.config import config_from_dict
from nlgkit.core.errors import ConfigError
from nlgkit.data.batching import Batch
from nlgkit.models.base import Generator, ModelContext
from nlgkit.models.grounding import cosine_matrix, ranking_loss
from nlgkit.runs.build import build_model, count_parameters, placeholder_vocabulary
from nlgkit.search import Rules, beam_search, greedy_search, search

V_SRC, V, L, C, P = 30, 25, 5, 6, 12  # source and target vocabularies, image regions, channels, pooled size
PAD, BOS, EOS = 1, 2, 3
MULTIMODAL = ["doubly_attentive", "imagination", "vag_nmt"]
HEAD_NAMES = ["learned", "tied", "fixed", "joint", "continuous"]
SIZES = {"embedding_dim": 8, "encoder_dim": 6, "decoder_dim": 10, "attention_dim": 7, "pre_output_dim": 9}
SMALL: dict[str, dict[str, Any]] = {
    "doubly_attentive": SIZES,
    "imagination": {**SIZES, "latent_dim": 16},  # ≠ P: the readout layer is there too
    "vag_nmt": {**SIZES, "visual_attention_dim": 5, "shared_dim": 8},
    "rnn": {**SIZES, "pre_output_activation": "tanh"},  # the text-only model IMAGINATION extends
}
HEAD_OPTIONS: dict[str, dict[str, Any]] = {"joint": {"joint_dim": 6}, "continuous": {"dim": 16}}


def context(complete: int = 1, channels: int = C, regions: int = L, pooled: int = P,
            src_vocab: int = V_SRC, tgt_vocab: int = V) -> ModelContext:
    """What the multimodal translation task tells a model builder (``complete``: every pair has its image)."""
    return ModelContext(task="multimodal_translation", tgt_vocab_size=tgt_vocab, pad_index=PAD,
                        inputs={"src_vocab_size": src_vocab, "image_channels": channels, "image_regions": regions,
                                "image_pooled_dim": pooled, "image_complete": complete})


def build(name: str, head: str = "learned", complete: int = 1, seed: int = 0, **options: Any) -> Generator:
    """The model and head through the production config parser and builder."""
    torch.manual_seed(seed)
    config = config_from_dict({"model": {"type": name, **SMALL[name], "dropout": 0.1, **options},
                               "head": {"type": head, **HEAD_OPTIONS.get(head, {})}, "train": {"seed": seed}})
    return build_model(config, context(complete), placeholder_vocabulary(V))


def inputs(b: int = 3, seed: int = 1, mask: list[float] | None = None) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([6, 3, 5, 4, 2][:b])
    src = torch.randint(4, V_SRC, (b, 6), generator=g)
    src[torch.arange(6)[None, :] >= lengths[:, None]] = PAD
    return {"src": src, "src_lengths": lengths,
            "image_spatial": torch.rand(b, L, C, generator=g),  # (B, L, C): non-negative, as after a ReLU
            "image_pooled": torch.rand(b, P, generator=g) ** 3,  # (B, P)
            "image_mask": torch.tensor(mask if mask is not None else [1.0] * b)}


def batch(b: int = 3, **options: Any) -> Batch:
    prev = torch.tensor([[BOS, 5, 6, 7, 8], [BOS, 9, 10, PAD, PAD], [BOS, 11, 12, 13, PAD], [BOS, 14, 15, 16, 17]])
    gold = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD], [11, 12, 13, EOS, PAD], [14, 15, 16, 17, EOS]])
    return Batch(inputs(b, **options), prev[:b], gold[:b], list(range(b)), int(gold[:b].ne(PAD).sum()))


def train(model: Generator, data: Batch, steps: int = 40, lr: float = 0.02) -> list[dict[str, float]]:
    """Adam steps on one batch: per step the total loss and each auxiliary loss."""
    model.train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    history = []
    for _ in range(steps):
        features, aux = model(data)
        assert features.shape == (*data.prev_tokens.shape, model.feature_dim)
        loss = model.head.loss(features, data.targets) / data.num_target_tokens + sum(aux.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append({"loss": float(loss.detach()), **{k: float(v.detach()) for k, v in aux.items()}})
    return history


# -- every model × head ------------------------------------------------------------------------------------


@pytest.mark.parametrize("head", HEAD_NAMES)
@pytest.mark.parametrize("name", MULTIMODAL)
def test_every_model_with_every_head_learns_a_batch(name: str, head: str) -> None:
    model = build(name, head)
    history = train(model, batch())
    assert history[-1]["loss"] < 0.7 * history[0]["loss"], history
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("head", HEAD_NAMES)
@pytest.mark.parametrize("name", MULTIMODAL)
def test_every_model_with_every_head_decodes_through_the_one_search(name: str, head: str) -> None:
    model = build(name, head).eval()
    source = inputs(4)
    max_lens = torch.full((4,), 7)
    rules = Rules(batch_size=4, bos=BOS, eos=EOS, max_lens=max_lens)
    greedy = greedy_search(model, model.encode(source), rules)
    beam1 = search(model, model.encode(source), batch_size=4, bos=BOS, eos=EOS, beam_size=1, max_lens=max_lens)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in beam1]
    beam5 = beam_search(model, model.encode(source), rules, beam_size=5, nbest=5)
    for hyps in beam5:
        assert len(hyps) == 5 and [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert all(len(h.tokens) <= 7 and all(0 <= t < V for t in h.tokens) for h in hyps)
    check_one_search(model, source, batch_size=4, bos=BOS, eos=EOS, max_len=6)  # static state kept in place
    check_alignment(model, source, batch_size=4, bos=BOS, eos=EOS, max_len=6)


@pytest.mark.parametrize("name", MULTIMODAL)
def test_step_by_step_equals_teacher_forcing(name: str) -> None:
    check_steps_match_teacher_forcing(build(name).eval(), batch())


@pytest.mark.parametrize("name", MULTIMODAL)
def test_reorder_keeps_shapes_and_moves_rows(name: str) -> None:
    model = build(name).eval()
    state = model.encode(inputs(3))
    index = torch.tensor([2, 0, 0, 1])
    reordered = model.reorder(state, index)
    assert reordered.keys() == state.keys()
    for key, value in reordered.items():
        assert value.shape == (4, *state[key].shape[1:]), key
        torch.testing.assert_close(value, state[key][index])
    with torch.no_grad():
        features, after = model.step(torch.tensor([BOS] * 4), reordered)
    assert features.shape == (4, model.feature_dim) and all(v.size(0) == 4 for v in after.values())


@pytest.mark.parametrize("name", ["doubly_attentive", "vag_nmt"])
def test_models_that_translate_with_the_image_refuse_data_without_every_image(name: str) -> None:
    with pytest.raises(ConfigError, match=f"model.type = '{name}'.*--covered-only"):
        build(name, complete=0)


# -- the max-margin loss -----------------------------------------------------------------------------------


def test_ranking_loss_by_hand() -> None:
    similarity = torch.tensor([[0.9, 0.95, 0.85], [0.2, 0.6, 0.65], [0.1, 0.4, 0.7]])  # positives on the diagonal
    # margin 0.1: row 0 costs (0.1 − 0.9 + 0.95) + (0.1 − 0.9 + 0.85) = 0.2, row 1: 0.1 − 0.6 + 0.65 = 0.15, row 2: 0
    torch.testing.assert_close(ranking_loss(similarity, torch.ones(3), 0.1), torch.tensor(0.35 / 3))
    # without example 2: row 0 keeps 0.15, row 1 nothing; two anchors
    torch.testing.assert_close(ranking_loss(similarity, torch.tensor([1.0, 1.0, 0.0]), 0.1), torch.tensor(0.075))
    loner = similarity.clone().requires_grad_(True)
    loss = ranking_loss(loner, torch.tensor([0.0, 1.0, 0.0]), 0.1)  # one example with an image: no pair
    loss.backward()
    assert float(loss.detach()) == 0.0 and loner.grad is not None


# -- IMAGINATION ---------------------------------------------------------------------------------------------


def test_imagination_image_loss_falls_and_reads_only_the_images_that_are_there() -> None:
    model = build("imagination", dropout=0.0).eval()
    data = batch(4, mask=[1.0, 1.0, 0.0, 1.0])
    with torch.no_grad():
        before = model(data)[1]["image"]
        assert float(before) > 0
        changed = batch(4, mask=[1.0, 1.0, 0.0, 1.0])
        changed.inputs["image_pooled"][2] = torch.rand(P)  # the example without an image: its row is not read
        assert torch.equal(model(changed)[1]["image"], before)
        changed.inputs["image_pooled"][0] = torch.rand(P)
        assert not torch.equal(model(changed)[1]["image"], before)

    history = train(model, data, steps=30)
    assert history[-1]["image"] < 0.5 * history[0]["image"], [h["image"] for h in history]

    alone = batch(4, mask=[0.0, 0.0, 1.0, 0.0])  # one image: no contrastive pair, a zero that still backpropagates
    loss = model(alone)[1]["image"]
    assert float(loss.detach()) == 0.0 and loss.requires_grad
    loss.backward()


def test_imagination_latent_space_is_the_image_space_when_sizes_agree() -> None:
    """latent_dim = P: v̂ = tanh(W_v · mean h) (Eq. 25), no readout layer; weight 0: no auxiliary loss."""
    model = build("imagination", latent_dim=P)
    assert [type(m).__name__ for m in model.imagine] == ["Linear", "Tanh"]
    assert build("imagination", image_loss_weight=0.0)(batch())[1] == {}


@pytest.mark.parametrize("head", ["learned", "joint", "continuous"])
def test_imagination_translates_as_the_rnn_model_with_its_weights_and_without_images(head: str) -> None:
    imagination = build("imagination", head, complete=0, seed=0).eval()  # images only for training
    rnn = build("rnn", head, seed=5).eval()
    missing, unexpected = rnn.load_state_dict(imagination.state_dict(), strict=False)
    assert missing == [] and unexpected and all(key.startswith("imagine.") for key in unexpected)
    data = batch(4)
    text = {key: data.inputs[key] for key in ("src", "src_lengths")}  # decoding reads no image
    with torch.no_grad():
        torch.testing.assert_close(imagination(data)[0], rnn(data)[0])
    max_lens = torch.full((4,), 7)
    for beam in (1, 5):
        got = search(imagination, imagination.encode(text), batch_size=4, bos=BOS, eos=EOS, beam_size=beam,
                     max_lens=max_lens, nbest=beam)
        expected = search(rnn, rnn.encode(text), batch_size=4, bos=BOS, eos=EOS, beam_size=beam,
                          max_lens=max_lens, nbest=beam)
        assert [[h.tokens for h in hyps] for hyps in got] == [[h.tokens for h in hyps] for hyps in expected]
        assert [[h.score for h in hyps] for hyps in got] == [[h.score for h in hyps] for hyps in expected]


# -- doubly-attentive NMT ----------------------------------------------------------------------------------


def test_doubly_attentive_reads_the_image_through_its_gate() -> None:
    model = build("doubly_attentive").eval()
    data = batch()
    other = batch()
    other.inputs["image_spatial"] = torch.rand(3, L, C)
    with torch.no_grad():
        assert not torch.allclose(model(data)[0], model(other)[0])  # another image, another translation
        text, image, _ = model.contexts(model.encode(data.inputs))
        assert text.shape == (3, 2 * SIZES["encoder_dim"]) and image.shape == (3, C)
        regions = data.inputs["image_spatial"]  # the visual context is a β-scaled mix of the regions
        assert bool((image <= regions.max(1).values + 1e-6).all() and (image >= 0).all())
        model.gate.weight.zero_()  # β_t = σ(−10⁴) = 0: the image is shut out
        model.gate.bias.fill_(-1e4)
        assert torch.equal(model(data)[0], model(other)[0])
    ungated = build("doubly_attentive", gate=False)
    assert ungated.gate is None and "gate" not in dict(ungated.named_children())


# -- VAG-NMT ---------------------------------------------------------------------------------------------------


def test_vag_nmt_weighs_the_source_words_by_the_image_and_grounds_both_ways() -> None:
    model = build("vag_nmt").eval()
    data = batch()
    with torch.no_grad():
        state = model.encode(data.inputs)
        encoder_out, pad_mask = state["encoder_out"], state["pad_mask"]
        text, weights = model.visual_attention(encoder_out, pad_mask, data.inputs["image_pooled"])
        torch.testing.assert_close(weights.sum(-1), torch.ones(3))
        assert bool((weights[pad_mask] == 0).all())  # no weight on padding
        torch.testing.assert_close(text, torch.einsum("bs,bsc->bc", weights, encoder_out))
        other, _ = model.visual_attention(encoder_out, pad_mask, torch.rand(3, P))
        assert not torch.allclose(text, other)  # another image, another sentence representation …
        moved = model.encode({**data.inputs, "image_pooled": torch.rand(3, P)})
        assert not torch.allclose(moved["hidden"], state["hidden"])  # … and another decoder start (Eq. 32)

        grounding = model(data)[1]["grounding"]
        images = torch.tanh(model.image_space(data.inputs["image_pooled"]))
        sentences = torch.tanh(model.text_space(text))
        similarity = cosine_matrix(images, sentences)  # image p (rows) against sentence k (columns)
        both = ranking_loss(similarity, torch.ones(3), 0.1) + ranking_loss(similarity.T, torch.ones(3), 0.1)
        torch.testing.assert_close(grounding, both)
    history = train(build("vag_nmt", dropout=0.0), batch(4), steps=30)
    assert history[-1]["grounding"] < 0.5 * history[0]["grounding"], [h["grounding"] for h in history]


# -- parameter counts --------------------------------------------------------------------------------------


def by_hand(name: str, vocab: int, channels: int, pooled: int) -> dict[str, int]:
    """Trainable parameters per component at the paper's sizes (E = d = 300, encoder 2 × 256, decoder 256,
    attention 512) with a learned head."""
    gru = 2 * (3 * 256 * (300 + 256) + 2 * 3 * 256)  # bidirectional encoder
    counts = {"src_embed": vocab * 300, "tgt_embed": vocab * 300, "encoder": gru, "bridge": 512 * 256 + 256,
              "attention": (256 + 512) * 512 + 512 + 512, "head": 300 * vocab + vocab}
    context_dim = 512 + (channels if name == "doubly_attentive" else 0)
    counts["decoder"] = 3 * 256 * (300 + context_dim) + 3 * 256 * 256 + 2 * 3 * 256
    counts["pre_output"] = (256 + context_dim + 300) * 300 + 300
    if name == "doubly_attentive":
        counts.update(image_attention=(256 + channels) * 512 + 512 + 512, gate=256 + 1)
    elif name == "imagination":
        counts["imagine"] = 512 * 2048 + 2048 + (2048 * pooled + pooled if pooled != 2048 else 0)
    else:
        counts.update(image_query=pooled * 512, annotation_key=512 * 512, text_space=512 * 512 + 512,
                      image_space=pooled * 512 + 512)
    return counts


@pytest.mark.parametrize("name", MULTIMODAL)
def test_parameter_counts_at_the_papers_sizes(name: str) -> None:
    """ResNet-50's res4f (1024 channels, 14 × 14) for doubly-attentive, pool5 (2048) for the others (§5.2)."""
    channels, regions, pooled = (1024, 196, 1024) if name == "doubly_attentive" else (2048, 49, 2048)
    counts = {}
    for head in ("learned", "fixed"):
        config = config_from_dict({"model": {"type": name}, "head": {"type": head}})
        model = build_model(config, context(1, channels, regions, pooled, 1000, 1000),
                            placeholder_vocabulary(1000))
        counts[head] = count_parameters(model)
    expected = by_hand(name, 1000, channels, pooled)
    assert {key: part["trainable"] for key, part in counts["learned"]["components"].items()} == expected
    assert counts["learned"]["trainable"] == sum(expected.values())
    assert counts["learned"]["trainable"] - counts["fixed"]["trainable"] == 301 * 1000  # W and b fixed
    assert counts["fixed"]["buffers"] == 301 * 1000


def test_dry_run_prints_the_multimodal_models(tmp_path: Path) -> None:
    """`nlgkit train --dry-run` through the multimodal task (ResNet-50's pooled map: 2048 channels, 7 × 7)."""
    from typer.testing import CliRunner

    from nlgkit.cli.main import app

    def dry_run(name: str, covered_only: bool) -> Any:
        recipe = tmp_path / f"{name}.toml"
        recipe.write_text(f"""
[run]
dir = "{tmp_path / name}"
[task]
type = "multimodal_translation"
[task.encoder]
name = "resnet50"
[data]
dir = "{tmp_path / 'not_prepared'}"
[data.prepare]
corpus = "multi30k"
covered_only = {str(covered_only).lower()}
[model]
type = "{name}"
[head]
type = "learned"
""")
        return CliRunner().invoke(app, ["train", str(recipe), "--dry-run", "--vocab-size", "1000"])

    for name in MULTIMODAL:
        result = dry_run(name, covered_only=True)
        assert result.exit_code == 0, result.output
        assert result.stdout.strip().splitlines()[-1] == \
            f"trainable parameters: {sum(by_hand(name, 1000, 2048, 2048).values())}"
        for component in by_hand(name, 1000, 2048, 2048):
            assert f"│ {component} " in result.stdout
    assert dry_run("imagination", covered_only=False).exit_code == 0  # images for training only
    refused = dry_run("vag_nmt", covered_only=False)
    assert refused.exit_code != 0 and "--covered-only" in refused.output

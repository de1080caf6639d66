"""ConvS2S: incremental decoding equals teacher forcing, every head trains and decodes through the one search,
the WMT-14 recipes' parameter counts against Shalev et al.'s Table 3, and a tiny run that learns Multi30K."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from helpers import (
    check_alignment,
    check_one_search,
    nlgkit_command,
    tiny_recipe,
    trained_and_untrained_bleu,
    with_head,
)

from nlgkit.core.errors import ConfigError
from nlgkit.core.recipes import load_recipe
from nlgkit.core.registry import HEADS
from nlgkit.data.batching import Batch
from nlgkit.experiments.papers import load_table
from nlgkit.models import MODELS
from nlgkit.models.base import ModelContext
from nlgkit.models.convs2s import ConvS2SConfig, ConvS2SModel
from nlgkit.models.convs2s_layers import scale_gradient
from nlgkit.runs.build import build_untrained, count_parameters
from nlgkit.runs.loading import load_trained

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
SRC_V, TGT_V, PAD = 30, 25, 1
# widths change (projected residuals), odd, even and 1-wide kernels, more decoder than encoder layers
TINY = {"embedding_dim": 16, "encoder_layers": ((16, 3, 2), (24, 5, 1)),
        "decoder_layers": ((16, 3, 1), (24, 4, 2), (32, 1, 1)), "output_dim": 16, "max_positions": 12,
        "dropout": 0.1}


@pytest.fixture(autouse=True, scope="module")
def one_thread():  # type: ignore[no-untyped-def]
    """Tiny models gain nothing from threads, and on a shared machine two spinning threads can be 100× slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def convs2s(head: str = "learned", src_vocab: int = SRC_V, **options: object) -> ConvS2SModel:
    torch.manual_seed(0)
    config = ConvS2SConfig(**{**TINY, **options})  # type: ignore[arg-type]
    context = ModelContext(task="translation", tgt_vocab_size=TGT_V, pad_index=PAD,
                           inputs={"src_vocab_size": src_vocab})
    return with_head(MODELS.build(config, context=context), head, TGT_V)  # type: ignore[return-value]


def inputs() -> dict[str, torch.Tensor]:
    return {"src": torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 1, 1]]), "src_lengths": torch.tensor([5, 3])}


PREV = torch.tensor([[2, 11, 12, 13, 14, 15], [2, 14, 15, 16, 1, 1]])
GOLD = torch.tensor([[11, 12, 13, 14, 15, 3], [14, 15, 16, 3, 1, 1]])


def batch(source: dict[str, torch.Tensor] | None = None) -> Batch:
    return Batch(source or inputs(), PREV, GOLD, [0, 1], 10)


@pytest.mark.parametrize("options", [{}, {"weight_norm": False}, {"share_embeddings": True},
                                     {"decoder_layers": ((16, 2, 3),), "output_dim": 8}])
def test_incremental_decoding_equals_teacher_forcing(options: dict) -> None:
    src_vocab = TGT_V if options.get("share_embeddings") else SRC_V
    model = convs2s(src_vocab=src_vocab, **options).eval()
    with torch.no_grad():
        forced, aux = model(batch())
        assert aux == {} and forced.shape == (2, 6, options.get("output_dim", 16))
        state = model.encode(inputs())
        for t in range(PREV.size(1)):
            features, state = model.step(PREV[:, t], state)
            torch.testing.assert_close(features, forced[:, t], atol=1e-5, rtol=1e-4)
    # the state holds only the last kernel − 1 inputs of each layer, whatever the prefix's length
    kernels = [kernel for kernel in (layer.kernel for layer in model.decoder.blocks())]
    assert [state[f"window{i}"].size(1) for i in range(len(kernels))] == [k - 1 for k in kernels]
    assert int(state["step"][0]) == PREV.size(1)
    if options.get("share_embeddings"):
        assert model.src_embed is model.tgt_embed


def test_windows_follow_the_beams_and_padding_changes_nothing() -> None:
    model = convs2s().eval()
    with torch.no_grad():
        state = model.encode(inputs())
        for t in range(3):
            _, state = model.step(PREV[:, t], state)
        moved = model.reorder(state, torch.tensor([1, 1, 0]))
        assert moved["window1"].shape[0] == 3 and torch.equal(moved["window1"][2], state["window1"][0])
        # other tokens in the padding, or no padding at all: the same features for the sentence
        changed = inputs()
        changed["src"] = changed["src"].clone()
        changed["src"][1, 3:] = torch.tensor([20, 21])
        a = model(batch())[0]
        b = model(batch(changed))[0]
        alone = model(Batch({"src": inputs()["src"][1:, :3], "src_lengths": torch.tensor([3])}, PREV[1:, :4],
                            GOLD[1:, :4], [0], 4))[0]
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(alone[0], a[1, :4], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("head", HEADS.names())
def test_every_head_learns_a_batch(head: str) -> None:
    model = convs2s(head).train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.01)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = model.head.loss(model(batch())[0], GOLD)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses[::6]


@pytest.mark.parametrize("head", HEADS.names())
def test_every_head_decodes_through_the_one_search(head: str) -> None:
    """Beam 1 equals greedy, beam 4 ranks 4 hypotheses, with or without copying the static state; the
    linearized convolutions cached for search follow an optimiser step."""
    model = convs2s(head).eval()
    check_one_search(model, inputs(), batch_size=2, max_len=8)
    check_alignment(model, inputs(), batch_size=2, max_len=8)
    model.train()
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    model.head.loss(model(batch())[0], GOLD).backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        forced = model(batch())[0]
        state = model.encode(inputs())
        features, _ = model.step(PREV[:, 0], state)
    torch.testing.assert_close(features, forced[:, 0], atol=1e-5, rtol=1e-4)


def test_initialisation_and_weight_normalisation() -> None:
    """Gehring et al.'s initialisation: embeddings N(0, 0.1), a GLU's convolution N(0, √(4(1−p)/(k·n))),
    other layers N(0, √(1/n)); weight norm starts at g = ‖v‖, so the weight is what was drawn."""
    config = ConvS2SConfig(embedding_dim=256, encoder_layers=((384, 3, 1),), decoder_layers=((384, 3, 1),),
                           dropout=0.2)
    context = ModelContext(task="translation", tgt_vocab_size=2000, pad_index=PAD, inputs={"src_vocab_size": 2000})
    torch.manual_seed(0)
    model = MODELS.build(config, context=context)
    layer = model.decoder.blocks()[0]
    with torch.no_grad():
        assert abs(model.tgt_embed.weight.std().item() - 0.1) < 0.002
        assert model.tgt_embed.weight[PAD].abs().sum() == 0
        assert abs(layer.conv.weight.std().item() / math.sqrt(4 * 0.8 / (3 * 384)) - 1) < 0.01
        assert abs(layer.attention_in.weight.std().item() / math.sqrt(1 / 384) - 1) < 0.02
        assert abs(model.decoder.fc1.weight.std().item() / math.sqrt(0.8 / 256) - 1) < 0.02
        gain, direction = layer.conv.parametrizations.weight.original0, layer.conv.parametrizations.weight.original1
        torch.testing.assert_close(gain.flatten(), direction.flatten(1).norm(dim=1))


def test_encoder_gradient_is_scaled_by_the_number_of_attention_layers() -> None:
    x = torch.ones(3, requires_grad=True)
    y = scale_gradient(x, 0.125)
    torch.testing.assert_close(y, x.detach())
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 0.125))
    assert convs2s().encoder.gradient_scale == 1 / (2 * 4)  # four decoder layers attend


def weight_normed(inputs: int, outputs: int, kernel: int = 1) -> int:
    """Parameters of a weight-normalised linear or convolution layer: v, one gain per output, bias."""
    return kernel * inputs * outputs + 2 * outputs


def test_wmt14_recipes_against_shalev_table3() -> None:
    """The recipes count what the arithmetic of fairseq's fconv gives for their sizes (embeddings E = 256,
    384 channels, 6 + 5 layers of width 3, output 256, 1,026 position rows, |V| = 32,000 on each side); the
    learned and fixed rows differ by exactly the paper's (256 + 1)·32,000, and each lies 312 below the paper's:
    no model whose tensors are all multiples of 16 reaches 28,043,832 ≡ 8 (mod 16)."""
    v, e, c, p = 32_000, 256, 384, 1026
    encoder = p * e + weight_normed(e, c) + 6 * weight_normed(c, 2 * c, 3) + weight_normed(c, e)
    attention = weight_normed(c, e) + weight_normed(e, c)
    decoder = p * e + weight_normed(e, c) + 5 * (weight_normed(c, 2 * c, 3) + attention) + weight_normed(c, 256)
    body = 2 * v * e + encoder + decoder
    counts = {}
    for head in ("learned", "tied", "fixed"):
        model = build_untrained(load_recipe(RECIPES / f"wmt14_en_de_{head}.toml"), vocab_size=v)[2]
        counts[head] = count_parameters(model)
        assert counts[head]["components"]["encoder"]["trainable"] == encoder
        assert counts[head]["components"]["decoder"]["trainable"] == decoder
    assert counts["fixed"]["trainable"] == body == 28_043_520
    assert counts["learned"]["trainable"] == body + (256 + 1) * v == 36_267_520
    assert counts["tied"]["trainable"] == body + v  # the embedding is the target table; its bias trains
    assert counts["fixed"]["buffers"] == (256 + 1) * v  # L2-normalised rows and the fixed bias
    paper = load_table("shalev2020_table3")
    published = {head: paper.find(dataset="wmt14", pair="en-de", model="convs2s", head=head).values["params"]
                 for head in ("learned", "fixed")}
    assert published["learned"] - published["fixed"] == counts["learned"]["trainable"] - counts["fixed"]["trainable"]
    assert {published[h] - counts[h]["trainable"] for h in published} == {312}
    assert published["fixed"] % 16 == 8 and all(count["trainable"] % 16 == 0 for count in counts.values())


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"model.decoder_layers\[1\] = \[256, 0, 2\]"):
        ConvS2SConfig(decoder_layers=((256, 3, 1), (256, 0, 2))).validate("r.toml", None)
    with pytest.raises(ConfigError, match="model.encoder_layers is empty"):
        ConvS2SConfig(encoder_layers=()).validate("r.toml", None)
    with pytest.raises(ConfigError, match="r.toml: model.dropout = 1.0"):
        ConvS2SConfig(dropout=1.0).validate("r.toml", None)
    with pytest.raises(ConfigError, match="share needs one joint vocabulary"):
        convs2s(share_embeddings=True)
    with pytest.raises(ConfigError, match="model.max_positions = 12: a source sequence of 13 tokens"):
        convs2s().encode({"src": torch.full((1, 13), 5), "src_lengths": torch.tensor([13])})


CONVS2S_SECTION = """type = "convs2s"
embedding_dim = 64
encoder_layers = [[96, 3, 2]]
decoder_layers = [[96, 3, 2]]
output_dim = 64"""


def test_a_tiny_convs2s_learns_multi30k_through_the_trainer(paper, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """300 Multi30K sentences through the production trainer, search and CLI: the trained model translates
    memorised training sentences clearly better than the same model untrained (beam 3)."""
    data_dir = paper[0]
    recipe = tiny_recipe(tmp_path, data_dir, tmp_path / "run", max_epochs=12, lr=0.005, num_threads=1)
    text = recipe.read_text()
    start, end = text.index("[model]\n") + len("[model]\n"), text.index("dropout =")
    recipe.write_text(text[:start] + CONVS2S_SECTION + "\n" + text[end:])
    nlgkit_command(["train", str(recipe)])
    events = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "end"
    assert isinstance(load_trained(tmp_path / "run", "last", "cpu").model, ConvS2SModel)
    trained_bleu, untrained_bleu = trained_and_untrained_bleu(recipe, tmp_path / "run", data_dir)
    assert trained_bleu > untrained_bleu + 10, (trained_bleu, untrained_bleu)

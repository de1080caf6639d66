"""Continuous output (Tokarchuk & Niculae): cosine and other losses, vMF scores, target tables, `nlgkit embed`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import ConfigError
from nlgkit.heads import HEADS, HeadContext, build_head
from nlgkit.heads.vmf import log_bessel_iv, log_vmf_normaliser
from nlgkit.search import Rules, beam_search, greedy_search

PAD, V = 1, 20
WORDS = tuple(f"w{i}" for i in range(V))


def head(d: int = 8, **options: object):  # type: ignore[no-untyped-def]
    config = HEADS.config_class("continuous")(type="continuous", **{"dim": d, **options})
    context = HeadContext(feature_dim=d, vocab_size=V, pad_index=PAD, target_embedding=nn.Embedding(V, 4),
                          seed=3, vocab_tokens=WORDS, vocab_source="data/vocab.en.txt")
    return build_head(config, context)


def test_cosine_loss_ignores_the_feature_norm_and_is_zero_on_the_gold_vector() -> None:
    h = head()
    features, targets = torch.randn(2, 5, 8), torch.randint(2, V, (2, 5))
    targets[1, -1] = PAD
    loss = h.loss(features, targets)
    torch.testing.assert_close(h.loss(features * 7.5, targets), loss)  # cos does not see ‖ĥ‖
    with torch.no_grad():
        h.projection.weight.copy_(torch.eye(8))
    exact = h.table[targets.clamp(min=2)] * 3.0  # ĥ = 3·E[t]
    assert h.loss(exact, targets).item() == pytest.approx(0.0, abs=1e-5)
    assert torch.equal(h.table.norm(dim=1).round(decimals=5), torch.ones(V))


def test_nearest_neighbour_returns_t_when_the_prediction_is_its_vector() -> None:
    h = head()
    with torch.no_grad():
        h.projection.weight.copy_(torch.eye(8))
    scores = h.log_probs(h.table)  # (V, V): the prediction of every word's own vector
    assert torch.equal(scores.argmax(-1), torch.arange(V))
    # the vMF score is κ·cos + log C_e(κ): a constant shift of the cosine, higher is better
    torch.testing.assert_close(scores, h.logits(h.table) + float(log_vmf_normaliser(8, torch.tensor([1.0]))))
    assert not h.normalized


class Echo(nn.Module):
    """A decoder that predicts a fixed vector sequence: step i's features are the i-th given vector."""

    def __init__(self, h: nn.Module, rows: torch.Tensor) -> None:
        super().__init__()
        self.head, self.rows, self.feature_dim = h, rows, 8

    def encode(self, inputs: dict) -> dict:
        return {"t": torch.zeros(inputs["x"].size(0), 1)}

    def step(self, prev: torch.Tensor, state: dict) -> tuple[torch.Tensor, dict]:
        i = int(state["t"][0, 0])
        return self.rows[min(i, len(self.rows) - 1)].expand(prev.size(0), -1), {"t": state["t"] + 1}

    def reorder(self, state: dict, index: torch.Tensor) -> dict:
        return {k: v.index_select(0, index) for k, v in state.items()}


def test_vmf_beam_of_one_is_greedy_nearest_neighbour() -> None:
    h = head()
    with torch.no_grad():
        h.projection.weight.copy_(torch.eye(8))
    wanted = [5, 9, 13, 3]  # 3 = eos
    rows = h.table[wanted] + 0.05 * torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    model = Echo(h, rows)
    state = model.encode({"x": torch.zeros(1)})
    greedy = greedy_search(model, state, Rules(batch_size=1, bos=2, eos=3, max_lens=torch.tensor([6])))
    beam = beam_search(model, model.encode({"x": torch.zeros(1)}),
                       Rules(batch_size=1, bos=2, eos=3, max_lens=torch.tensor([6])), beam_size=1)
    assert greedy[0][0].tokens == beam[0][0].tokens == [5, 9, 13]


@pytest.mark.parametrize("loss", ["cosine", "smp", "smd", "nllvmf"])
def test_every_continuous_loss_trains(loss: str) -> None:
    torch.manual_seed(0)
    h = head(loss=loss)
    features = nn.Parameter(torch.randn(4, 6, 8))
    targets = torch.randint(2, V, (4, 6))
    optimizer = torch.optim.Adam([features, *h.parameters()], lr=0.05)

    def gold_cosine() -> float:  # how close the predictions are to the gold vectors
        with torch.no_grad():
            return F.cosine_similarity(h.predict(features), h.table[targets], dim=-1).mean().item()

    first, start = h.loss(features, targets).item(), gold_cosine()
    for _ in range(60):
        optimizer.zero_grad()
        value = h.loss(features, targets)
        assert torch.isfinite(value)
        value.backward()
        optimizer.step()
    assert value.item() < first, (first, value.item())
    assert start < 0.3 and gold_cosine() > 0.6, (start, gold_cosine())
    assert not h.table.requires_grad  # the targets stay fixed


def test_bessel_terms_stay_finite_for_large_dimensions_and_small_kappa() -> None:
    kappa = torch.tensor([1e-8, 1e-3, 1.0, 50.0, 1e5], dtype=torch.float64, requires_grad=True)
    for dim in (2, 128, 1024, 4096):
        value = log_vmf_normaliser(dim, kappa)
        value.sum().backward()
        assert torch.isfinite(value).all() and torch.isfinite(kappa.grad).all()
        kappa.grad = None
    from scipy.special import iv

    moderate = torch.tensor([0.5, 3.0, 40.0], dtype=torch.float64)
    torch.testing.assert_close(log_bessel_iv(63.0, moderate), torch.log(torch.from_numpy(iv(63, moderate.numpy()))))
    assert torch.autograd.gradcheck(lambda k: log_bessel_iv(63.0, k), (moderate.clone().requires_grad_(True),))


def test_continuous_config_refuses_sampling_and_missing_tables() -> None:
    from nlgkit.heads.base import SamplingConfig

    config = HEADS.config_class("continuous")
    with pytest.raises(ConfigError, match="no softmax to sample"):
        config(type="continuous", sampling=SamplingConfig(share=0.5)).validate("r.toml", None)
    with pytest.raises(ConfigError, match="head.table = 'nope.safetensors': file not found"):
        config(type="continuous", table="nope.safetensors").validate("r.toml", None)


# -- tables and `nlgkit embed` --------------------------------------------------------------------------------


def cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


@pytest.fixture()
def vocab(tmp_path: Path) -> Path:
    path = tmp_path / "vocab.en.txt"
    from nlgkit.data.vocab import Vocabulary

    Vocabulary.build({word: 10 for word in ("dog", "cat", "runs", "blue")}).save(path)
    return path


def test_embed_random_combine_load_round_trip(tmp_path: Path, vocab: Path) -> None:
    from nlgkit.data.vocab import Vocabulary
    from nlgkit.wordvectors.tables import load_table

    words = Vocabulary.load(vocab).tokens
    sphere, cube = tmp_path / "sphere.safetensors", tmp_path / "cube.safetensors"
    assert cli("embed", "random", "--vocab", str(vocab), "-o", str(sphere), "--dim", "16").exit_code == 0
    assert cli("embed", "random", "--vocab", str(vocab), "-o", str(cube), "--dim", "16", "--dist", "cube",
               "--seed", "2").exit_code == 0
    a, a_words = load_table(sphere)
    b, _ = load_table(cube)
    assert a_words == words and a.shape == (len(words), 16)
    torch.testing.assert_close(a.norm(dim=1), torch.ones(len(words)))
    assert set(b.abs().flatten().tolist()) == {0.25}  # corners ±1/√16
    again = tmp_path / "again.safetensors"
    cli("embed", "random", "--vocab", str(vocab), "-o", str(again), "--dim", "16")
    assert torch.equal(load_table(again)[0], a)  # same seed, same table

    mixed = tmp_path / "mixed.safetensors"
    result = cli("embed", "combine", str(sphere), str(cube), "-o", str(mixed), "--alpha", "0.9")
    assert result.exit_code == 0, result.output
    c, _ = load_table(mixed)
    torch.testing.assert_close(c, F.normalize(0.9 * a + 0.1 * F.normalize(b, dim=1), dim=1))

    text = tmp_path / "vectors.vec"  # word2vec text (fastText .vec): header, then word and values
    text.write_text("2 3\ndog 1 0 0\nblue 0 2 0\n")
    glove = tmp_path / "glove.txt"
    glove.write_text("dog 1 0 0\nblue 0 2 0\n")
    for path, fmt in ((text, "word2vec"), (glove, "glove"), (text, "auto"), (glove, "auto")):
        out = tmp_path / f"{fmt}.safetensors"
        result = cli("embed", "load", str(path), "--vocab", str(vocab), "-o", str(out), "--format", fmt)
        assert result.exit_code == 0, result.output
        assert f"{len(words) - 2:,} words not in" in result.stdout
        table, _ = load_table(out)
        assert table[words.index("dog")].tolist() == [1.0, 0.0, 0.0]
        assert table[words.index("blue")].tolist() == [0.0, 2.0, 0.0]
    first = tmp_path / "first.safetensors"  # --limit 1: the file's first vector only (dog), blue gets a random row
    result = cli("embed", "load", str(text), "--vocab", str(vocab), "-o", str(first), "--limit", "1")
    assert result.exit_code == 0 and f"{len(words) - 1:,} words not in" in result.stdout, result.output
    table, _ = load_table(first)
    assert table[words.index("dog")].tolist() == [1.0, 0.0, 0.0]
    assert table[words.index("blue")].tolist() != [0.0, 2.0, 0.0]
    binary = tmp_path / "vectors.bin"
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(["cat"], [[0.0, 0.0, 5.0]])
    kv.save_word2vec_format(str(binary), binary=True)
    out = tmp_path / "binary.safetensors"
    for fmt in ("word2vec-binary", "auto"):
        assert cli("embed", "load", str(binary), "--vocab", str(vocab), "-o", str(out), "--format", fmt).exit_code == 0
        assert load_table(out)[0][words.index("cat")].tolist() == [0.0, 0.0, 5.0]


def test_a_table_that_does_not_match_the_vocabulary_names_both_files(tmp_path: Path, vocab: Path) -> None:
    from nlgkit.wordvectors.tables import load_table_for, save_table

    table = tmp_path / "t.safetensors"
    save_table(table, torch.randn(3, 4), ["a", "b", "c"])
    with pytest.raises(ConfigError, match=r"t\.vocab\.txt does not match data/vocab\.en\.txt: 3 words, the vocab"):
        load_table_for(table, ["a", "b", "c", "d"], "data/vocab.en.txt")
    with pytest.raises(ConfigError, match="row 1 is 'b', the vocabulary's 'x'"):
        load_table_for(table, ["a", "x", "c"], "data/vocab.en.txt")
    (tmp_path / "bad.safetensors").write_bytes(b"not a table")
    (tmp_path / "bad.vocab.txt").write_text("a\n")
    result = cli("embed", "combine", str(table), str(tmp_path / "bad.safetensors"), "-o", str(tmp_path / "o.safetensors"))
    assert result.exit_code != 0 and "bad.safetensors: not an nlgkit table" in result.stderr
    assert "\n" not in result.stderr.strip() and not (tmp_path / "o.safetensors").exists()
    missing = cli("embed", "load", str(tmp_path / "none.vec"), "--vocab", str(vocab), "-o", str(tmp_path / "x.st"))
    assert missing.exit_code != 0 and "none.vec: file not found" in missing.stderr

    narrow = tmp_path / "narrow.safetensors"
    save_table(narrow, torch.randn(3, 2), ["a", "b", "c"])
    result = cli("embed", "combine", str(table), str(narrow), "-o", str(tmp_path / "o.safetensors"))
    assert result.exit_code != 0 and "t.safetensors (3 × 4) and " in result.stderr
    assert "narrow.safetensors (3 × 2): tables of different shapes" in result.stderr

    broken = {"ragged.vec": ("2 3\ndog 1 0 0\nblue 0 2\n", "line 3: expected a word and 3 values, got 2 values"),
              "word.txt": ("dog 1 0 0\nblue 0 x 0\n", "line 2: 'x' is not a number"),
              "glove_as_w2v.txt": ("dog 1 0 0\n", "line 1: expected the header 'COUNT DIM'")}
    for name, (text, message) in broken.items():
        path = tmp_path / name
        path.write_text(text)
        fmt = "word2vec" if name == "glove_as_w2v.txt" else "auto"
        result = cli("embed", "load", str(path), "--vocab", str(vocab), "-o", str(tmp_path / "x.st"), "--format", fmt)
        assert result.exit_code != 0 and f"{name}: {message}" in result.stderr, result.stderr
        assert "\n" not in result.stderr.strip() and not (tmp_path / "x.st").exists()
    (tmp_path / "t.vocab.txt").write_bytes(b"a\nb\n\xffc\n")  # the table's word list damaged
    damaged = cli("embed", "report", str(table))
    assert damaged.exit_code != 0 and damaged.stderr.strip().endswith("t.vocab.txt: line 3: not valid UTF-8 (byte 0)")
    assert "\n" not in damaged.stderr.strip()


def test_a_continuous_head_reads_its_table_and_a_trained_run_gives_one(tmp_path: Path) -> None:
    from nlgkit.wordvectors.tables import save_table

    vectors = torch.randn(V, 6)
    table = tmp_path / "targets.safetensors"
    save_table(table, vectors, WORDS)
    h = head(table=str(table))
    torch.testing.assert_close(h.table, F.normalize(vectors, dim=1))
    assert h.projection.weight.shape == (6, 8)  # e comes from the table
    save_table(table, vectors, WORDS[::-1])
    with pytest.raises(ConfigError, match="targets.vocab.txt does not match data/vocab.en.txt: row 0"):
        head(table=str(table))

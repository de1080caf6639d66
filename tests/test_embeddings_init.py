"""``[embeddings]``: a run's input embeddings start from word-vector tables (Hirasawa & Komachi's policy).

A small real DE-EN model: the table's words get the table's rows, the others the mean of the table's
out-of-vocabulary vectors; with ``trainable = false`` the table's rows survive training while the others learn;
a trained run translates without the tables; a table of the wrong size is a one-line error naming both sizes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from helpers import nlgkit_command, tiny_recipe

from nlgkit.core.recipes import load_recipe
from nlgkit.data.vocab import PAD, SPECIALS, Vocabulary
from nlgkit.experiments.hirasawa_runs import Row, TableUse, placement, table_uses
from nlgkit.runs.build import build_model
from nlgkit.runs.embeddings import initialise_embeddings, mean_row_length
from nlgkit.runs.loading import load_trained
from nlgkit.runs.weight_init import initialise_weights
from nlgkit.tasks import build_task
from nlgkit.wordvectors.tables import save_table

DIM = 48  # the tiny recipe's embedding size


def table_for(path: Path, vocab_file: Path, words: int, dim: int = DIM) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """A table with the first ``words`` ordinary words of a vocabulary and three words outside it; returns the
    vocabulary words' rows and the mean of the outside words' rows."""
    tokens = [line.split("\t")[0] for line in vocab_file.read_text(encoding="utf-8").splitlines()]
    known = [t for t in tokens if t not in SPECIALS][:words]
    outside = ["zzqx1", "zzqx2", "zzqx3"]
    vectors = torch.randn(len(known) + len(outside), dim, generator=torch.Generator().manual_seed(5))
    save_table(path, vectors, known + outside, kind="trained")
    return dict(zip(known, vectors)), vectors[len(known):].mean(0)


def with_embeddings(recipe: Path, lines: str) -> Path:
    recipe.write_text(recipe.read_text() + f"\n[embeddings]\n{lines}\n")
    return recipe


@pytest.fixture()
def setup(tmp_path: Path, paper: tuple[Path, dict]) -> tuple[Path, Path, dict, torch.Tensor]:
    data_dir, _ = paper
    rows, oov_mean = table_for(tmp_path / "de.safetensors", data_dir / "vocab.de.txt", 300)
    recipe = tiny_recipe(tmp_path, data_dir, tmp_path / "run", max_updates=4, lr=0.01)
    return recipe, data_dir, rows, oov_mean


def test_rows_follow_the_table_and_the_rest_start_from_its_oov_mean(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    recipe, data_dir, rows, oov_mean = setup
    config = load_recipe(with_embeddings(recipe, f'source = "{tmp_path / "de.safetensors"}"'))
    task = build_task(config)
    vocabs = task.load_vocabularies(data_dir)
    model = build_model(config, task.model_context(vocabs), vocabs["en"])
    before_target = model.target_embedding().weight.detach().clone()
    done = initialise_embeddings(model, config, task, vocabs)
    assert done["source"]["found"] == 300 and done["source"]["rows"] == len(vocabs["de"])
    weight = model.source_embedding().weight.detach()  # type: ignore[union-attr]
    vocab = vocabs["de"]
    for word, row in list(rows.items())[:50]:
        assert torch.equal(weight[vocab.index(word)], row)
    missing = [i for i, token in enumerate(vocab.tokens) if token not in rows and token != PAD]
    assert len(missing) > 1000 and all(torch.allclose(weight[i], oov_mean) for i in missing[:200])
    assert float(weight[vocab.pad_index].abs().sum()) == 0.0
    assert torch.equal(model.target_embedding().weight, before_target)  # no target table: untouched


def test_fixed_rows_stay_while_the_missing_words_learn(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    recipe, data_dir, rows, oov_mean = setup
    nlgkit_command(["train", str(with_embeddings(recipe, f'source = "{tmp_path / "de.safetensors"}"\n'
                                                          'trainable = false\nlabel = "test-table"'))])
    recorded = json.loads((tmp_path / "run" / "provenance.json").read_text())["embeddings"]  # which vectors, exactly
    assert recorded == {"source": {"table": str(tmp_path / "de.safetensors"), "found": 300,
                                   "rows": len(Vocabulary.load(data_dir / "vocab.de.txt")),
                                   "sha256": hashlib.sha256((tmp_path / "de.safetensors").read_bytes()).hexdigest(),
                                   "content_sha256": recorded["source"]["sha256"]}}  # saved by nlgkit: canonical
    assert table_uses(tmp_path / "run") == {"source": TableUse(recorded["source"]["sha256"], 300,
                                                               recorded["source"]["rows"],
                                                               recorded["source"]["sha256"])}  # as reports read it
    (tmp_path / "de.safetensors").unlink()  # a trained run needs its tables no more
    run = load_trained(tmp_path / "run", "last", device="cpu")
    weight = run.model.source_embedding().weight.detach()  # type: ignore[union-attr]
    vocab = run.vocabs["de"]
    assert all(torch.equal(weight[vocab.index(word)], row) for word, row in rows.items())
    moved = sum(not torch.allclose(weight[i], oov_mean) for i, token in enumerate(vocab.tokens)
                if token not in rows and token not in SPECIALS)
    assert moved > 50  # the words the table lacks were trained individually
    assert run.config.embeddings.name == "test-table"
    out = tmp_path / "out.en"
    nlgkit_command(["translate", "--model", str(tmp_path / "run"), "--checkpoint", "last", "--input",
                    str(data_dir / "test.ref.de"), "--output", str(out), "--device", "cpu", "--beam", "1"])
    assert len(out.read_text(encoding="utf-8").splitlines()) == len((data_dir / "test.ref.de").read_text().splitlines())


def test_a_table_of_another_size_is_a_one_line_error_unless_projected(
        setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    recipe, data_dir, _, _ = setup
    table_for(tmp_path / "wide.safetensors", data_dir / "vocab.en.txt", 100, dim=20)
    bad = with_embeddings(recipe, f'target = "{tmp_path / "wide.safetensors"}"')
    with pytest.raises(SystemExit) as exit_info:
        nlgkit_command(["train", str(bad)])
    assert exit_info.value.code != 0
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "20" in error and str(DIM) in error and "wide.safetensors" in error
    assert not (tmp_path / "run" / "checkpoints").exists()
    config = load_recipe(bad, ["embeddings.project=true"])
    task = build_task(config)
    vocabs = task.load_vocabularies(data_dir)
    model = build_model(config, task.model_context(vocabs), vocabs["en"])
    assert initialise_embeddings(model, config, task, vocabs)["target"]["found"] == 100


def test_nmtpytorch_scales_kaiming_weights_and_unit_table_rows(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``train.weight_init = "kaiming_normal"`` draws every trainable text matrix N(0, 2/fan_in), embeddings
    included, and leaves the fixed head alone; ``embeddings.normalize`` gives the table's rows unit length."""
    recipe, data_dir, rows, oov_mean = setup
    config = load_recipe(recipe)
    task = build_task(config)
    vocabs = task.load_vocabularies(data_dir)
    model = build_model(config, task.model_context(vocabs), vocabs["en"])
    before = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    assert initialise_weights(model, "default") == 0
    assert all(torch.equal(before[name], tensor) for name, tensor in model.state_dict().items())
    assert float(model.source_embedding().weight.detach().std()) > 0.9  # type: ignore[union-attr]  # N(0, 1)
    redrawn = initialise_weights(model, "kaiming_normal")
    assert redrawn >= 8  # two embeddings, encoder and decoder gates, attention, bridge, pre-output
    source = model.source_embedding().weight.detach()  # type: ignore[union-attr]
    assert float(source.std()) == pytest.approx((2 / DIM) ** 0.5, rel=0.05)
    assert float(source[vocabs["de"].pad_index].abs().sum()) == 0.0
    gates = model.encoder.weight_ih_l0.detach()  # type: ignore[union-attr]
    assert float(gates.std()) == pytest.approx((2 / gates.size(1)) ** 0.5, rel=0.05)
    fixed = {name for name, _ in model.named_buffers()}
    assert fixed and all(torch.equal(before[name], model.state_dict()[name]) for name in fixed)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.Flatten(), torch.nn.Linear(8, 4))
    conv = cnn[0].weight.detach().clone()
    assert initialise_weights(cnn, "kaiming_normal") == 1 and torch.equal(cnn[0].weight, conv)  # pretrained CNNs stay

    config = load_recipe(with_embeddings(recipe, f'source = "{tmp_path / "de.safetensors"}"\nnormalize = true'))
    initialise_embeddings(model, config, task, vocabs)
    weight = model.source_embedding().weight.detach()  # type: ignore[union-attr]
    vocab = vocabs["de"]
    for word, row in list(rows.items())[:50]:
        assert torch.allclose(weight[vocab.index(word)], row / row.norm(), atol=1e-6)
    missing = next(i for i, token in enumerate(vocab.tokens) if token not in rows and token != PAD)
    assert torch.allclose(weight[missing], oov_mean / oov_mean.norm(), atol=1e-6)
    assert float(weight[vocab.pad_index].abs().sum()) == 0.0


def test_a_run_with_nmtpytorch_scales_trains_them_and_reports_a_row_of_its_own(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    recipe, *_ = setup
    recipe = with_embeddings(recipe, f'source = "{tmp_path / "de.safetensors"}"\nnormalize = true\nlabel = "glove"')
    nlgkit_command(["train", str(recipe), "--set", "train.weight_init='kaiming_normal'", "--set", "train.lr=1e-7"])
    run = load_trained(tmp_path / "run", "last", device="cpu")
    target = run.model.target_embedding().weight.detach()  # no table: drawn at nmtpytorch's scale, barely trained
    assert float(target.std()) == pytest.approx((2 / DIM) ** 0.5, rel=0.05)
    source = run.model.source_embedding().weight.detach()  # type: ignore[union-attr]
    assert torch.allclose(source[len(SPECIALS):].norm(dim=1), torch.ones(len(source) - len(SPECIALS)), atol=1e-3)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert placement(saved, {}).row == Row("all", "rnn", "glove", "none", "none", "kaiming_normal", "unit table rows")


def test_match_scale_gives_a_short_table_the_length_of_the_models_own_rows(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Real tables' rows are 7–10 times shorter than N(0, 1) rows; ``embeddings.match_scale`` scales the table by one
    factor to the mean length of the rows the model drew (its ``weight_init``): lengths match, directions and the
    rows' length ratios stay, padding stays zero, and provenance records the factor."""
    recipe, data_dir, rows, _ = setup
    words = list(rows) + ["zzqx1"]
    short = torch.stack([*rows.values(), torch.ones(DIM)]) * 0.1
    save_table(tmp_path / "short.safetensors", short, words, kind="trained")
    config = load_recipe(with_embeddings(recipe, f'source = "{tmp_path / "short.safetensors"}"\nmatch_scale = true'))
    task = build_task(config)
    vocabs = task.load_vocabularies(data_dir)
    vocab = vocabs["de"]
    for weights, length in (("default", DIM ** 0.5), ("kaiming_normal", 2 ** 0.5)):  # N(0, 1) / N(0, 2/fan_in) rows
        model = build_model(config, task.model_context(vocabs), vocabs["en"])
        initialise_weights(model, weights)
        drawn = mean_row_length(model.source_embedding().weight.detach(), vocab.pad_index)  # type: ignore[union-attr]
        assert drawn == pytest.approx(length, rel=0.1)
        done = initialise_embeddings(model, config, task, vocabs)
        weight = model.source_embedding().weight.detach()  # type: ignore[union-attr]
        assert mean_row_length(weight, vocab.pad_index) == pytest.approx(drawn, rel=1e-5)
        factor = done["source"]["scale"]
        assert factor > 1.0  # the table's rows were the shorter
        for word, row in list(rows.items())[:50]:
            assert torch.allclose(weight[vocab.index(word)], 0.1 * factor * row, atol=1e-5)
        assert float(weight[vocab.pad_index].abs().sum()) == 0.0

"""Ensembles: several models searched as one Generator through the unchanged beam search.

An ensemble of one model is that model (same hypotheses, scores equal to rounding); two copies of one model are that model;
the combined log-probabilities are the members' mean (log_linear) or the log of their mean probability (linear),
worked out here from the members; a score head is refused; and ``translate``/``caption`` take several --model.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from helpers import check_alignment, check_one_search, rnn, tiny_recipe, with_head
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import CheckpointError, ConfigError
from nlgkit.generation.ensemble import Ensemble, check_compatible, load_ensemble
from nlgkit.models import MODELS
from nlgkit.models.base import Generator, ModelContext
from nlgkit.models.rnn import RNNConfig
from nlgkit.models.transformer import TransformerConfig
from nlgkit.runs.loading import load_trained
from nlgkit.search import Rules, beam_search, greedy_search

SRC_V, TGT_V = 30, 25


def tiny_rnn(seed: int, head: str = "learned") -> Generator:
    torch.manual_seed(seed)
    config = RNNConfig(embedding_dim=8, encoder_dim=10, decoder_dim=12, attention_dim=7, pre_output_dim=9)
    return rnn(config, SRC_V, TGT_V, head).eval()


def tiny_transformer(seed: int) -> Generator:
    torch.manual_seed(seed)
    config = TransformerConfig(encoder_layers=1, decoder_layers=1, dim=16, ffn_dim=24, heads=4, dropout=0.0)
    context = ModelContext(task="translation", tgt_vocab_size=TGT_V, pad_index=1, inputs={"src_vocab_size": SRC_V})
    return with_head(MODELS.build(config, context=context), "learned", TGT_V).eval()


def inputs() -> dict[str, torch.Tensor]:
    return {"src": torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 1, 1], [11, 3, 1, 1, 1]]),
            "src_lengths": torch.tensor([5, 3, 2])}


def hypotheses(model: Generator, beam: int) -> list[list[tuple[list[int], float]]]:
    """Every sentence's n-best (tokens, score) with beam ``beam`` (greedy for 1)."""
    rules = Rules(batch_size=3, bos=2, eos=3, max_lens=torch.tensor([7, 5, 6]))
    if beam == 1:
        found = greedy_search(model, model.encode(inputs()), rules)
    else:
        found = beam_search(model, model.encode(inputs()), rules, beam_size=beam, nbest=beam)
    return [[(h.tokens, h.score) for h in hyps] for hyps in found]


@pytest.mark.parametrize("mode", ["log_linear", "linear"])
@pytest.mark.parametrize("beam", [1, 4])
def test_an_ensemble_of_one_model_is_that_model(mode: str, beam: int) -> None:
    """Same hypotheses in the same order, same scores to float32 rounding: the model's softmax head hands the beam
    logits and their logsumexp, the ensemble's head normalised log-probabilities, two orders of the same sums whose
    last bits differ on some CPUs (seen on an AMD EPYC: 2e-7 apart)."""
    model = tiny_rnn(1)
    alone, ensemble = hypotheses(model, beam), hypotheses(Ensemble([model], mode), beam)
    assert [[tokens for tokens, _ in hyps] for hyps in ensemble] == [[tokens for tokens, _ in hyps] for hyps in alone]
    for hyps_ensemble, hyps_alone in zip(ensemble, alone):
        assert [score for _, score in hyps_ensemble] == pytest.approx([score for _, score in hyps_alone], rel=1e-6)


@pytest.mark.parametrize("mode", ["log_linear", "linear"])
def test_two_copies_of_one_model_are_that_model(mode: str) -> None:
    model = tiny_rnn(1)
    alone, pair = hypotheses(model, 4), hypotheses(Ensemble([model, model], mode), 4)
    assert [[tokens for tokens, _ in hyps] for hyps in pair] == [[tokens for tokens, _ in hyps] for hyps in alone]
    for hyps_pair, hyps_alone in zip(pair, alone):
        assert [score for _, score in hyps_pair] == pytest.approx([score for _, score in hyps_alone], abs=1e-5)


def test_the_combined_scores_are_the_members_mean_log_probability_or_mean_probability() -> None:
    a, b = tiny_rnn(1), tiny_transformer(2)  # different architectures, one target vocabulary
    prev = torch.tensor([2, 2, 2])
    with torch.no_grad():
        fa, _ = a.step(prev, a.encode(inputs()))
        fb, _ = b.step(prev, b.encode(inputs()))
        pa, pb = a.head.log_probs(fa), b.head.log_probs(fb)  # (3, V) each
        for mode, expected in [("log_linear", (pa + pb) / 2), ("linear", ((pa.exp() + pb.exp()) / 2).log())]:
            ensemble = Ensemble([a, b], mode)
            features, _ = ensemble.step(prev, ensemble.encode(inputs()))  # (3, d_a + d_b)
            assert features.shape == (3, a.feature_dim + b.feature_dim)
            word_scores, offset = ensemble.head.search_scores(features)
            torch.testing.assert_close(word_scores - offset.unsqueeze(1), expected)
            assert ensemble.head.normalized == (mode == "linear")  # (a perplexity is printed of probabilities only)
        # linear is a distribution; log_linear's mean of log-probabilities is not renormalised (Jensen: below it)
        assert torch.allclose(torch.logsumexp(((pa.exp() + pb.exp()) / 2).log(), 1), torch.zeros(3), atol=1e-5)
        assert bool((torch.logsumexp((pa + pb) / 2, 1) < 0).all())


def test_an_ensemble_decodes_through_the_one_search_with_its_members_static_state() -> None:
    """Beam 1 equals greedy, and keeping the members' static entries in place equals copying them."""
    ensemble = Ensemble([tiny_rnn(1), tiny_transformer(2), tiny_rnn(3, head="fixed")])
    assert ensemble.static_state and all(key.split(".", 1)[0] in "012" for key in ensemble.static_state)
    check_one_search(ensemble, inputs(), batch_size=3)
    check_alignment(ensemble, inputs(), batch_size=3)


def test_a_score_head_or_another_vocabulary_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="gives scores, not probabilities") as info:
        Ensemble([tiny_rnn(1), tiny_rnn(2, head="continuous")], names=["runs/a", "runs/b"])
    assert "runs/b" in str(info.value) and "\n" not in str(info.value)
    other = rnn(RNNConfig(embedding_dim=8, encoder_dim=10, decoder_dim=12, attention_dim=7, pre_output_dim=9),
                SRC_V, TGT_V + 1)
    with pytest.raises(ConfigError, match="output vocabularies of different sizes"):
        Ensemble([tiny_rnn(1), other])
    with pytest.raises(ConfigError, match="--ensemble-mode 'mean'"):
        Ensemble([tiny_rnn(1)], "mean")


# -- real data, through the CLI -----------------------------------------------------------------------------

def cli(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args), input=input)


@pytest.fixture(scope="module")
def two_runs(paper: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny Multi30K DE-EN runs that differ only in their seed."""
    tmp = tmp_path_factory.mktemp("ensemble")
    runs = []
    for seed in (3, 4):
        run_dir = tmp / f"seed{seed}"
        recipe = tiny_recipe(tmp, paper[0], run_dir, seed=seed, max_epochs=3, keep_epochs=0, valid_limit=20)
        result = cli("train", str(recipe))
        assert result.exit_code == 0, result.output
        runs.append(run_dir)
    return runs[0], runs[1]


SOURCE = "ein mann fährt fahrrad .\n\nzwei hunde spielen im schnee .\neine frau mit einem roten hut .\n"


def test_translate_with_several_models(two_runs: tuple[Path, Path]) -> None:
    a, b = two_runs
    alone = cli("translate", "-m", str(a), "--beam", "3", "--nbest", "2", "--device", "cpu", input=SOURCE)
    assert alone.exit_code == 0, alone.output
    twice = cli("translate", "-m", str(a), "-m", str(a), "--beam", "3", "--nbest", "2", "--device", "cpu",
                input=SOURCE)
    assert twice.exit_code == 0, twice.output
    assert twice.stdout == alone.stdout  # two copies of a model: the same n-best lists and scores (4 decimals)
    for mode in ("log_linear", "linear"):
        both = cli("translate", "-m", str(a), "-m", str(b), "--ensemble-mode", mode, "--device", "cpu", input=SOURCE)
        assert both.exit_code == 0, both.output
        lines = both.stdout.split("\n")[:-1]
        assert len(lines) == 4 and lines[1] == "" and all(lines[i].strip() for i in (0, 2, 3))
    refused = cli("caption", "-m", str(a), "-m", str(b), "--device", "cpu", "picture.jpg")
    assert refused.exit_code != 0 and "`nlgkit caption` needs a model that reads images" in refused.stderr


def test_load_ensemble_checks_that_members_read_inputs_alike(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_runs
    run = load_ensemble([a, b], "best", "cpu")
    assert isinstance(run.model, Ensemble) and len(run.model.members) == 2 and not run.model.training
    assert load_ensemble([a], "best", "cpu").model.__class__.__name__ != "Ensemble"
    other = tmp_path / "other"
    shutil.copytree(b, other)
    (other / "data" / "codes.de").write_text("another subword model\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match="their data/codes.de differ"):
        load_ensemble([a, other], "best", "cpu")
    result = cli("translate", "-m", str(a), "-m", str(other), "--device", "cpu", input=SOURCE)
    assert result.exit_code != 0 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


def test_members_that_read_text_otherwise_or_translate_the_other_way_are_refused(two_runs: tuple[Path, Path],
                                                                                 tmp_path: Path) -> None:
    """Equal vocabularies and files are not enough: a run whose manifest names another tokenizer (the first run's
    would read its inputs), or an EN→DE run beside a DE→EN one prepared from the same data (same vocabularies
    per language, so the sizes match: they were combined word for word, translating nonsense), is refused."""
    a, b = two_runs
    other = tmp_path / "other"
    shutil.copytree(b, other)
    manifest = json.loads((other / "data" / "manifest.json").read_text(encoding="utf-8"))
    manifest["lowercase"] = not manifest["lowercase"]
    (other / "data" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(CheckpointError, match="their data/manifest.json differ in how text is read .lowercase "):
        load_ensemble([a, other], "best", "cpu")
    first, second = load_trained(a, "best", "cpu"), load_trained(b, "best", "cpu")
    check_compatible(first, second)
    data = second.config.data
    swapped = dataclasses.replace(second.config, data=dataclasses.replace(  # type: ignore[type-var]
        data, src_lang=data.tgt_lang, tgt_lang=data.src_lang))  # type: ignore[attr-defined]
    with pytest.raises(CheckpointError, match="other languages .data.src_lang = 'de' and 'en', data.tgt_lang"):
        check_compatible(first, dataclasses.replace(second, config=swapped))


def test_an_ensemble_search_scores_the_mean_of_the_members_sequence_log_probabilities(
        two_runs: tuple[Path, Path]) -> None:
    """log_linear: a hypothesis's log-probability is the mean of what each member gives that same output."""
    from nlgkit.generation.decode import generate

    a, b = two_runs
    run = load_ensemble([a, b], "best", "cpu")
    members = [load_ensemble([path], "best", "cpu").model for path in (a, b)]
    sources = [run.source_vocab.encode(["ein", "mann", "fährt", "fahrrad", "."])]  # type: ignore[union-attr]
    hyp = generate(run.model, run.task, sources, run.tgt_vocab, beam=3, length_penalty=0.0)[0][0]
    limit = int(run.task.source_length(sources[0]) * 1.5 + 10)  # generate's default max_len_a, max_len_b
    ended = [run.tgt_vocab.eos_index] if len(hyp.tokens) < limit else []  # the EOS step, when it ended with one
    tokens = torch.tensor([[run.tgt_vocab.bos_index, *hyp.tokens, *ended][:-1]])
    target = torch.tensor([[*hyp.tokens, *ended]])
    inputs, _ = run.task.source_inputs(sources, run.tgt_vocab)
    member_scores = []
    with torch.no_grad():
        for model in members:
            state = model.encode(inputs)
            total = 0.0
            for t in range(tokens.size(1)):
                features, state = model.step(tokens[:, t], state)
                total += float(model.head.log_probs(features)[0, target[0, t]])
            member_scores.append(total)
    assert hyp.log_prob == pytest.approx(sum(member_scores) / 2, abs=1e-4)
    assert math.isfinite(hyp.log_prob)

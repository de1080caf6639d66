"""Evaluation: our scores are sacrebleu's own, and every bad input is one line on stderr naming the file."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import sacrebleu
import typer
from typer.testing import CliRunner

from nlgkit.cli.evaluate import app, evaluate
from nlgkit.metrics.corpus import bleu, corpus_scores

VAL_EN = Path(__file__).resolve().parents[1].parent / "shared/data/multi30k/task1/tok/val.lc.norm.tok.en"
runner = CliRunner()


def perturb(line: str, seed: int) -> str:
    """A deterministic near-copy: drop one word, swap two others, change an article."""
    words = line.split()
    if len(words) > 3:
        del words[seed % len(words)]
        i = (seed * 7) % (len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join("the" if w == "a" and seed % 2 else w for w in words)


@pytest.fixture(scope="module")
def sample() -> tuple[list[str], list[str], list[str]]:
    """(hyps, ref, second ref): 60 real Multi30K validation sentences and perturbed copies."""
    if not VAL_EN.is_file():
        pytest.skip(f"{VAL_EN} not available")
    refs = VAL_EN.read_text(encoding="utf-8").splitlines()[:60]
    hyps = [perturb(line, i) for i, line in enumerate(refs)]
    second = [perturb(line, i + 3) for i, line in enumerate(refs)]
    return hyps, refs, second


@pytest.fixture()
def files(tmp_path: Path, sample: tuple[list[str], list[str], list[str]]) -> dict[str, Path]:
    paths = {}
    for name, lines in zip(("hyp", "ref", "ref2"), sample):
        paths[name] = tmp_path / f"{name}.txt"
        paths[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


def test_scores_equal_sacrebleu(sample: tuple[list[str], list[str], list[str]]) -> None:
    hyps, ref, _ = sample
    scores = corpus_scores(hyps, [ref])
    expected_bleu = sacrebleu.corpus_bleu(hyps, [ref])
    assert scores["bleu"]["score"] == pytest.approx(expected_bleu.score, abs=1e-9)
    assert scores["bleu"]["counts"] == expected_bleu.counts
    assert scores["bleu"]["precisions"] == pytest.approx(expected_bleu.precisions)
    assert scores["bleu"]["bp"] == pytest.approx(expected_bleu.bp)
    assert (scores["bleu"]["sys_len"], scores["bleu"]["ref_len"]) == (
        expected_bleu.sys_len,
        expected_bleu.ref_len,
    )
    assert scores["chrf"]["score"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [ref]).score, abs=1e-9)
    assert scores["ter"]["score"] == pytest.approx(sacrebleu.corpus_ter(hyps, [ref]).score, abs=1e-9)
    assert 20 < scores["bleu"]["score"] < 95  # a real, non-trivial score
    assert scores["bleu"]["signature"].startswith("nrefs:1|case:mixed|")
    assert bleu(hyps, ref) == pytest.approx(expected_bleu.score, abs=1e-9)


def test_multiple_references(sample: tuple[list[str], list[str], list[str]]) -> None:
    hyps, ref, second = sample
    scores = corpus_scores(hyps, [ref, second])
    assert scores["bleu"]["score"] == pytest.approx(
        sacrebleu.corpus_bleu(hyps, [ref, second]).score, abs=1e-9
    )
    assert scores["chrf"]["score"] == pytest.approx(
        sacrebleu.corpus_chrf(hyps, [ref, second]).score, abs=1e-9
    )
    assert scores["ter"]["score"] == pytest.approx(sacrebleu.corpus_ter(hyps, [ref, second]).score, abs=1e-9)
    assert all(entry["signature"].startswith("nrefs:2|") for entry in scores.values())
    assert scores["bleu"]["score"] != pytest.approx(corpus_scores(hyps, [ref])["bleu"]["score"])


def test_systems_scored_against_one_reference_set_each_get_their_own_score(
        sample: tuple[list[str], list[str], list[str]]) -> None:
    """corpus_scores keeps the references' n-grams for the next system: a system's score, signature and BLEU counts
    must still be the ones a fresh sacrebleu gives it, whatever was scored against those references before."""
    hyps, ref, second = sample
    systems = [hyps, list(reversed(hyps)), [line.upper() for line in hyps], hyps[:1] + ref[1:]]
    fresh = {"bleu": sacrebleu.corpus_bleu, "chrf": sacrebleu.corpus_chrf,
             "ter": functools.partial(sacrebleu.corpus_ter, case_sensitive=True)}  # nlgkit's case flag is one
    for system in [*systems, *reversed(systems)]:
        for refs in ([ref], [ref, second]):
            scores = corpus_scores(system, refs)
            for name, score in fresh.items():
                assert scores[name]["score"] == pytest.approx(score(system, refs).score, abs=1e-9), (name, refs)
            assert scores["bleu"]["counts"] == sacrebleu.corpus_bleu(system, refs).counts
            assert scores["bleu"]["signature"].startswith(f"nrefs:{len(refs)}|case:mixed|")
    assert len({corpus_scores(system, [ref])["bleu"]["score"] for system in systems}) == len(systems)


def test_lowercase_applies_to_every_metric() -> None:
    hyps, refs = ["The Cat sat on the mat .", "A DOG runs"], [["the cat sat on the mat .", "a dog runs"]]
    assert {name: entry["score"] for name, entry in corpus_scores(hyps, refs, lowercase=True).items()} == {
        "bleu": pytest.approx(100.0),
        "chrf": pytest.approx(100.0),
        "ter": pytest.approx(0.0),
    }
    cased = corpus_scores(hyps, refs)
    assert cased["bleu"]["score"] == pytest.approx(sacrebleu.corpus_bleu(hyps, refs).score)
    assert cased["ter"]["score"] == pytest.approx(sacrebleu.corpus_ter(hyps, refs, case_sensitive=True).score)
    assert cased["ter"]["score"] > 0 and "case:mixed" in cased["ter"]["signature"]


def test_a_blank_line_of_a_later_reference_stream_is_no_reference(
        sample: tuple[list[str], list[str], list[str]]) -> None:
    """An image with fewer captions leaves blank lines in the later streams (COCO has 5 to 7 a picture), which the
    caption metrics read as no reference: so do BLEU, chrF and TER (sacrebleu's ``None``), rather than as an empty
    reference whose length 0 is the closest to a short hypothesis (BLEU's brevity penalty) and lowers TER's
    average reference length."""
    hyps, ref, second = sample
    short = [" ".join(line.split()[:5]) for line in hyps]  # a short output, for which length 0 is the closest
    ragged = [line if i % 3 else "" for i, line in enumerate(second)]
    absent = [line if i % 3 else None for i, line in enumerate(second)]
    fresh = {"bleu": sacrebleu.corpus_bleu, "chrf": sacrebleu.corpus_chrf,
             "ter": functools.partial(sacrebleu.corpus_ter, case_sensitive=True)}
    scores = corpus_scores(short, [ref, ragged])
    for name, score in fresh.items():
        assert scores[name]["score"] == pytest.approx(score(short, [ref, absent]).score, abs=1e-9), name
    assert scores["bleu"]["score"] < sacrebleu.corpus_bleu(short, [ref, ragged]).score - 5  # what '' gave
    assert scores["bleu"]["signature"].startswith("nrefs:var|")
    # a blank line where no stream has a reference stays an empty reference (one stream: an empty segment)
    alone = corpus_scores(short, [[line if i % 3 else "" for i, line in enumerate(ref)]])
    assert alone["bleu"]["score"] == pytest.approx(
        sacrebleu.corpus_bleu(short, [[line if i % 3 else "" for i, line in enumerate(ref)]]).score, abs=1e-9)


def test_cli_json(files: dict[str, Path], sample: tuple[list[str], list[str], list[str]]) -> None:
    result = runner.invoke(
        app, ["--hyp", str(files["hyp"]), "--ref", str(files["ref"]), "--ref", str(files["ref2"]), "--json"]
    )
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    hyps, ref, second = sample
    assert scores == json.loads(json.dumps(corpus_scores(hyps, [ref, second])))
    result = runner.invoke(
        app, ["--hyp", str(files["hyp"]), "--ref", str(files["ref"]), "--metrics", "bleu", "--json"]
    )
    assert list(json.loads(result.stdout)) == ["bleu"]


def test_cli_table(files: dict[str, Path], sample: tuple[list[str], list[str], list[str]]) -> None:
    result = runner.invoke(app, ["--hyp", str(files["hyp"]), "--ref", str(files["ref"])])
    assert result.exit_code == 0, result.output
    hyps, ref, _ = sample
    assert f"{sacrebleu.corpus_bleu(hyps, [ref]).score:.2f}" in result.stdout
    assert all(name in result.stdout for name in ("bleu", "chrf", "ter", "nrefs:1"))


def test_subcommand_skips_scoring() -> None:
    """With a sub-command (as ``evaluate report`` will be), the callback must not ask for --hyp/--ref."""
    group = typer.Typer()
    group.callback(invoke_without_command=True)(evaluate)
    group.command()(lambda: typer.echo("report ran"))
    result = runner.invoke(group, ["<lambda>"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "report ran"


def bad_inputs(tmp_path: Path, files: dict[str, Path]) -> dict[str, tuple[list[str], str]]:
    """name → (arguments, the text the one-line error must contain)."""
    short, empty, latin1 = tmp_path / "short.txt", tmp_path / "empty.txt", tmp_path / "latin1.txt"
    short.write_text("a man .\n", encoding="utf-8")
    empty.write_bytes(b"")
    latin1.write_bytes(b"ok\ncaf\xe9\n")
    hyp, ref = str(files["hyp"]), str(files["ref"])
    return {
        "missing hyp": (["--hyp", str(tmp_path / "nope.txt"), "--ref", ref], str(tmp_path / "nope.txt")),
        "missing ref": (["--hyp", hyp, "--ref", str(tmp_path / "nope.txt")], str(tmp_path / "nope.txt")),
        "line counts differ": (["--hyp", hyp, "--ref", ref, "--ref", str(short)], str(short)),
        "empty hyp": (["--hyp", str(empty), "--ref", ref], str(empty)),
        "empty ref": (["--hyp", hyp, "--ref", str(empty)], str(empty)),
        "not utf-8": (["--hyp", str(latin1), "--ref", ref], f"{latin1}: line 2"),
        "no hyp": (["--ref", ref], "--hyp"),
        "no ref": (["--hyp", hyp], "--ref"),
        "unknown metric": (["--hyp", hyp, "--ref", ref, "--metrics", "bleu,rouge"], "rouge"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing hyp",
        "missing ref",
        "line counts differ",
        "empty hyp",
        "empty ref",
        "not utf-8",
        "no hyp",
        "no ref",
        "unknown metric",
    ],
)
def test_bad_input_is_one_line_naming_the_file(case: str, tmp_path: Path, files: dict[str, Path]) -> None:
    args, named = bad_inputs(tmp_path, files)[case]
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    assert result.stdout == ""
    message = result.stderr.strip()
    assert "\n" not in message and message.startswith("error: ") and named in message
    assert "Traceback" not in result.output

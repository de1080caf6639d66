"""Reports: paper tables as data, runs matched to their rows, seed statistics, rendering and the CLI.

Run directories here are fakes (config, checkpoint meta, hypotheses, references): hypotheses newer than the
checkpoint are reused, so no model is trained or loaded.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from nlgkit.cli.report import register
from nlgkit.core.errors import DataError
from nlgkit.core.recipes import load_recipe
from nlgkit.evaluate.collect import RunResult, collect_runs, group_key
from nlgkit.evaluate.render import render_html, render_markdown
from nlgkit.evaluate.report import (
    build_report,
    first_group_of_each_test_set,
    report_from_dict,
    report_to_dict,
)
from nlgkit.experiments.papers import available_tables, load_table
from nlgkit.experiments.shalev_claim import claim_section

REFS = [
    "a man is riding a red bike down the street .",
    "two dogs play in the snow .",
    "a woman reads a book on a bench .",
    "children are running on the beach .",
    "a cat sleeps on the warm window sill .",
    "three people are cooking in a small kitchen .",
]
WRONG = ["xx yy zz ww"] * len(REFS)  # shares no word with any reference: BLEU 0
HALF = REFS[:3] + WRONG[3:]
RECIPES = Path(__file__).resolve().parents[1] / "recipes"
runner = CliRunner()


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data" / "multi30k_de-en"
    data.mkdir(parents=True)
    (data / "test.ref.en").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    (data / "manifest.json").write_text(
        json.dumps({"corpus": "multi30k", "subword": "none"}), encoding="utf-8"
    )
    return data


def fake_run(
    root: Path,
    data: Path,
    name: str,
    head: str = "fixed",
    seed: int = 1,
    hyps: list[str] = REFS,
    finished: bool = True,
) -> Path:
    """A run directory as training leaves it, minus the weights, with test hypotheses newer than the checkpoint."""
    run = root / "runs" / name
    config = {
        "run": {"dir": str(run), "name": name},
        "data": {"dir": str(data), "src_lang": "de", "tgt_lang": "en", "prepare": {"corpus": "multi30k"}},
        "head": {"type": head},
        "train": {"seed": seed},
    }
    loop = {
        "epoch": 12,
        "best_epoch": 9,
        "finished": finished,
        "stop_reason": "" if finished else "max_minutes",
        "wall_seconds": 7200.0,
    }
    for which in ("best", "last"):
        (run / "checkpoints" / which).mkdir(parents=True)
        (run / "checkpoints" / which / "meta.json").write_text(json.dumps({"config": config, "loop": loop}))
    (run / "config.json").write_text(json.dumps(config))
    (run / "provenance.json").write_text(
        json.dumps({"env": {"gpu": "Test GPU"}, "parameters": {"trainable": 42}})
    )
    hyp = run / "test.hyp.en"
    hyp.write_text("\n".join(hyps) + "\n", encoding="utf-8")
    later = (run / "checkpoints" / "best" / "meta.json").stat().st_mtime + 10
    os.utime(hyp, (later, later))
    return run


def result(name: str, bleu: float, seed: int, group: str = "g", head: str = "fixed") -> RunResult:
    keys = {"dataset": "multi30k", "pair": "de-en", "head": head, "seed": seed, "model": "rnn"}
    return RunResult(
        name,
        Path("runs") / name,
        keys,
        group,
        REFS,
        REFS,
        Path("hyp"),
        True,
        values={"bleu": bleu},
        progress={"epoch": 3, "best_epoch": 2, "finished": True, "wall_seconds": 3600.0},
        hardware="CPU",
    )


@pytest.mark.parametrize("table_id", available_tables())
def test_paper_tables_parse_with_the_documented_schema(table_id: str) -> None:
    table = load_table(table_id)
    assert table.id == table_id and table.citation and table.caption and table.table.startswith("Table")
    assert table.keys and table.metrics and table.rows
    assert all(isinstance(m.higher_is_better, bool) and m.label for m in table.metrics.values())
    for row in table.rows:
        assert list(row.keys) == list(table.keys)
        assert set(row.values) <= set(table.metrics) and row.values
        assert all((value is None) == (name in row.unclear) for name, value in row.values.items())


def test_shipped_tables_and_their_numbers() -> None:
    assert {
        "shalev2020_table1",
        "shalev2020_table2",
        "shalev2020_table3",
        "shalev2020_table4",
        "pappas2018_table2",
        "pappas2018_table3",
        "pappas2018_table4",
        "tokarchuk2024_table1",
    } <= set(available_tables())
    table2 = load_table("shalev2020_table2")
    assert table2.find(dataset="multi30k", pair="en-de", head="fixed").values == {"bleu": 32.12}
    table3 = load_table("shalev2020_table3")
    learned = table3.find(dataset="multi30k", pair="de-en", model="rnn", head="learned").values["params"]
    fixed = table3.find(dataset="multi30k", pair="de-en", model="rnn", head="fixed").values["params"]
    assert learned - fixed == (512 + 1) * 5893  # the fixed head freezes W and b over the 5,893 English types
    unclear = load_table("pappas2018_table2").find(
        dataset="wmt17", pair="en-de", subword="bpe:128000", head="tied"
    )
    assert unclear.values["bleu"] is None and "bleu" in unclear.unclear
    ablations = load_table("pappas2018_table3")  # Eq. 15 at d_j 2048 (18.11) over d_j 512 (17.54)
    wide, narrow = (ablations.find(head="joint", structure="full", joint_dim=d).values["bleu"] for d in (2048, 512))
    assert round(wide - narrow, 2) == 0.57 and len(ablations.rows) == 7
    speed = load_table("pappas2018_table4")  # tokens/s: 15 cells, d_j 4096 at 5 % as 6.0K
    assert len(speed.rows) == 15 and speed.find(head="joint", joint_dim=4096, share=0.05).values["tokens_per_s"] == 6000


def test_collect_reuses_hypotheses_and_matches_paper_rows(tmp_path: Path, data_dir: Path) -> None:
    run = fake_run(tmp_path, data_dir, "fixed_s1", finished=False)
    (found,) = collect_runs([run], metrics=("bleu", "chrf"))
    assert found.reused and found.values["bleu"] == pytest.approx(100.0) and found.values["params"] == 42
    assert found.keys | {"dataset": "multi30k", "pair": "de-en", "head": "fixed", "seed": 1} == found.keys
    assert found.status == "not finished: max_minutes" and found.hardware == "Test GPU"
    row = load_table("shalev2020_table2").match(found.keys)
    assert row is not None and row.values["bleu"] == 33.17
    assert load_table("shalev2020_table2").match(found.keys | {"pair": "fr-en"}) is None


def test_seed_repetitions_share_a_group_key_and_other_settings_do_not() -> None:
    """Seed, threads and the wall-time cap say how a run was executed; the learning rate says what it trained."""
    def key(*overrides: str) -> str:
        return group_key(load_recipe(RECIPES / "pappas_multi30k.toml", list(overrides)))

    base = key("train.seed=1", "train.max_minutes=140")
    assert key("train.seed=2", "train.max_minutes=240", "train.num_threads=1") == base
    assert key("train.seed=1", "train.max_minutes=140", "train.lr=0.0005") != base
    assert key("train.seed=1", "train.max_minutes=140", "train.max_epochs=7") != base


def test_seed_groups_mean_and_sd() -> None:
    runs = [result("a", 30.0, 1), result("a", 34.0, 3), result("a", 32.0, 2), result("b", 20.0, 1, group="h")]
    report = build_report(runs, load_table("shalev2020_table2"))
    summaries = [row for row in report.rows if row.summary]
    assert len(summaries) == 1 and summaries[0].group_size == 3
    mean, sd = summaries[0].spread  # 30, 32, 34: mean 32, sample sd sqrt((4 + 0 + 4) / 2) = 2
    assert (mean, sd) == (pytest.approx(32.0), pytest.approx(2.0))
    assert [row.runs[0].keys["seed"] for row in report.rows[:3]] == [1, 2, 3]  # sorted by seed
    assert "n = 3: 32.00 ± 2.00" in render_markdown(report)


def test_a_group_with_finished_seeds_averages_those_alone() -> None:
    """A seed stopped by a limit beside seeds trained to the stopping rule is listed, not averaged in."""
    capped = result("a", 20.0, 3)
    capped.progress = {**capped.progress, "finished": False, "stop_reason": "train.max_minutes = 4.0 reached"}
    report = build_report([result("a", 30.0, 1), result("a", 34.0, 2), capped], load_table("shalev2020_table2"))
    summary = next(row for row in report.rows if row.summary)
    assert summary.label == "a: mean of the 2 finished seeds of 3" and summary.group_size == 2
    assert summary.spread == (pytest.approx(32.0), pytest.approx(2 ** 0.5 * 2))
    assert summary.values["bleu"] == pytest.approx(32.0) and summary.status == "2/3 finished"
    assert len([row for row in report.rows if not row.summary]) == 3  # every seed keeps its own row
    assert "n = 2: 32.00 ± 2.83" in render_markdown(report)
    all_capped = [capped, dataclasses.replace(capped, keys={**capped.keys, "seed": 4})]
    summary = next(row for row in build_report(all_capped).rows if row.summary)
    assert summary.label == "a: mean of 2 seeds" and summary.status == "0/2 finished"  # interim, and it says so


def test_markdown_and_html_show_paper_value_and_signed_delta() -> None:
    report = build_report(
        [result("up", 34.0, 1, "g1"), result("down", 31.5, 1, "g2", head="learned")], load_table("shalev2020_table2")
    )
    markdown, page = render_markdown(report), render_html(report)
    for text in (markdown, page):
        assert "33.17" in text and "+0.83" in text  # fixed: 34.00 − 33.17
        assert "33.02" in text and "-1.52" in text  # learned: 31.50 − 33.02
        assert "iwslt14" in text and "28.77" in text  # paper rows no run covers are listed
    assert "| up | 34.00 | 33.17 | +0.83 |" in markdown
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page


def test_html_escapes_text() -> None:
    page = render_html(build_report([result("<b>&", 30.0, 1)]))
    assert "&lt;b&gt;&amp;" in page and "<b>&" not in page


def test_significance_against_a_baseline(tmp_path: Path, data_dir: Path) -> None:
    good = fake_run(tmp_path, data_dir, "good", hyps=REFS)
    base = fake_run(tmp_path, data_dir, "base", hyps=HALF, head="learned")
    report = build_report(collect_runs([good, base]), load_table("shalev2020_table2"), baseline=base, samples=50)
    (row,) = [row for row in report.rows if row.runs[0].name == "good"]
    assert row.significance.delta > 0 and row.significance.samples == 50
    markdown = render_markdown(report)
    assert "vs baseline" in markdown and "| baseline |" in markdown and ", p " in markdown
    assert report_to_dict(report)["rows"][0]["significance"]["delta"] > 0


def test_each_run_is_compared_with_the_baseline_of_its_test_set(tmp_path: Path, data_dir: Path) -> None:
    """Table 2's DE-EN rows against DE-EN learned, its EN-DE rows against EN-DE learned: another test set's
    baseline cannot be paired with a run, so a report takes one baseline per test set."""
    other = tmp_path / "data" / "multi30k_other"
    shutil.copytree(data_dir, other)
    (other / "test.ref.en").write_text("\n".join(reversed(REFS)) + "\n", encoding="utf-8")
    base = fake_run(tmp_path, data_dir, "base", hyps=HALF, head="learned")
    good = fake_run(tmp_path, data_dir, "good", hyps=REFS)
    other_base = fake_run(tmp_path, other, "other_base", hyps=list(reversed(REFS)), head="learned")
    other_worse = fake_run(tmp_path, other, "other_worse", hyps=list(reversed(HALF)))
    results = collect_runs([base, good, other_base, other_worse])
    bases = first_group_of_each_test_set(results)
    assert [run.name for run in bases] == ["base", "other_base"]
    report = build_report(results, baseline=bases, samples=50)
    significance = {row.runs[0].name: row.significance for row in report.rows}
    assert significance["good"].delta > 0 and significance["other_worse"].delta < 0  # each against its own
    assert significance["base"] is None and significance["other_base"] is None
    assert [row.is_baseline for row in report.rows] == [True, False, True, False]
    markdown = render_markdown(report)
    assert "against the baseline of its test set (" in markdown and "n/a" not in markdown
    again = report_from_dict(report_to_dict(report))
    assert [run.run_dir for run in again.baselines] == [base, other_base]
    assert "against the baseline of its test set (" in render_markdown(again)
    with pytest.raises(DataError, match="a second baseline on the test set and seed of"):
        build_report(results, baseline=[base, good])
    kept = report_to_dict(report) | {"baseline": str(base)}  # figures kept before several baselines
    del kept["baselines"]
    assert [run.run_dir for run in report_from_dict(kept).baselines] == [base]


def test_each_seed_is_paired_with_the_baseline_of_its_seed_and_a_mean_row_compares_seed_means(
        tmp_path: Path, data_dir: Path) -> None:
    """The paper's claim (fixed ≈ learned) is about seed means: fixed seed 2 is paired with learned seed 2, a seed
    learned lacks with learned's first, and the fixed mean row gives its seeds' Δ as mean ± sd."""
    five = REFS[:5] + WRONG[5:]
    learned = fake_run(tmp_path, data_dir, "learned", head="learned", hyps=HALF)
    learned2 = fake_run(tmp_path, data_dir, "learned_seed2", head="learned", seed=2, hyps=five)
    fixed = [fake_run(tmp_path, data_dir, f"fixed_seed{seed}", seed=seed, hyps=REFS) for seed in (1, 2, 3)]
    results = collect_runs([learned, learned2, *fixed])
    bases = first_group_of_each_test_set(results)
    assert [run.run_dir for run in bases] == [learned, learned2]
    report = build_report(results, baseline=bases, samples=50)
    rows = {row.runs[0].name: row for row in report.rows if not row.summary}
    bleu = {name: row.values["bleu"] for name, row in rows.items()}
    assert bleu["learned"] < bleu["learned_seed2"] < bleu["fixed_seed1"]
    deltas = {name: rows[name].significance.delta for name in ("fixed_seed1", "fixed_seed2", "fixed_seed3")}
    assert deltas["fixed_seed1"] == pytest.approx(bleu["fixed_seed1"] - bleu["learned"])
    assert deltas["fixed_seed2"] == pytest.approx(bleu["fixed_seed2"] - bleu["learned_seed2"])  # its own seed's
    assert deltas["fixed_seed3"] == pytest.approx(bleu["fixed_seed3"] - bleu["learned"])  # learned has no seed 3
    learned_mean, fixed_mean = [row for row in report.rows if row.summary]
    assert learned_mean.is_baseline and learned_mean.seed_deltas is None
    mean, sd = fixed_mean.seed_deltas
    assert mean == pytest.approx(sum(deltas.values()) / 3) and sd > 0
    markdown = render_markdown(report)
    assert f"seeds' Δ {mean:+.2f} ± {sd:.2f}" in markdown
    assert "the baseline of its test set and seed" in markdown and "A mean row's seeds' Δ" in markdown
    assert render_markdown(report_from_dict(report_to_dict(report))) == markdown  # kept figures say the same
    with pytest.raises(DataError, match="a second baseline on the test set and seed of"):
        build_report(results, baseline=[learned, fixed[0]])


def test_the_claim_section_sets_each_head_against_learned_over_its_finished_seeds(
        tmp_path: Path, data_dir: Path) -> None:
    """Shalev et al.'s "fixed ≈ learned ≈ tied": per head other than learned, the seeds it averages (finished ones
    only), the learned seed each was paired with, Δ as mean ± sd of those pairs, the paper's own Δ, and how many
    seeds' 95 % intervals exclude 0."""
    learned = [fake_run(tmp_path, data_dir, f"learned_seed{seed}", head="learned", seed=seed, hyps=HALF)
               for seed in (1, 2)]
    fixed = [fake_run(tmp_path, data_dir, f"fixed_seed{seed}", seed=seed, hyps=REFS, finished=seed < 3)
             for seed in (1, 2, 3)]
    tied = fake_run(tmp_path, data_dir, "tied", head="tied", seed=3, hyps=HALF)
    results = collect_runs([*learned, *fixed, tied])
    report = build_report(results, load_table("shalev2020_table2"), baseline=first_group_of_each_test_set(results),
                          samples=50)
    lines = claim_section(report)
    assert lines[0] == "## The claim: fixed ≈ learned ≈ tied"
    cells = {row[1]: row for row in (line.strip("| ").split(" | ") for line in lines[lines.index("") + 1:]
                                     if line.startswith("| multi30k"))}
    assert set(cells) == {"fixed", "tied"}  # learned is what they are set against
    tests = {row.runs[0].name: row.significance for row in report.rows if not row.summary and row.significance}
    deltas = [tests[f"fixed_seed{seed}"].delta for seed in (1, 2)]  # seed 3 is not finished: not counted
    mean, sd = statistics.fmean(deltas), statistics.stdev(deltas)
    below = sum(tests[f"fixed_seed{seed}"].ci_high < 0 for seed in (1, 2))
    above = sum(tests[f"fixed_seed{seed}"].ci_low > 0 for seed in (1, 2))
    assert mean > 0 and cells["fixed"] == [
        "multi30k DE-EN", "fixed", "1, 2", "1, 2", f"{mean:+.2f} ± {sd:.2f}", "+0.15", str(below), str(above),
        "not told apart" if below == above == 0 else f"above on {above} of 2"]
    test = tests["tied"]  # seed 3, which learned lacks: paired with learned's first seed, and no different
    assert test.delta == 0 and cells["tied"] == [
        "multi30k DE-EN", "tied", "3", "1", f"+0.00 [{test.ci_low:+.2f}, {test.ci_high:+.2f}]", "+0.06", "0", "0",
        "not told apart"]
    assert claim_section(report_from_dict(report_to_dict(report))) == []  # kept figures have no heads to group


def test_stale_hypotheses_are_translated_again_and_written(tmp_path: Path, data_dir: Path) -> None:
    """A (tiny, untrained) real checkpoint newer than test.hyp.en translates test.de and replaces the file."""
    import torch
    from helpers import model_for

    from nlgkit.core.config import config_from_dict, to_dict
    from nlgkit.core.io import write_json
    from nlgkit.data.vocab import SPECIALS, Vocabulary
    from nlgkit.runs.checkpoint import save_checkpoint

    (data_dir / "test.de").write_text("ein mann\nzwei hunde\n" * 3, encoding="utf-8")
    run = tmp_path / "runs" / "tiny"
    hyp = run / "test.hyp.en"
    hyp.parent.mkdir(parents=True)
    hyp.write_text("stale\n", encoding="utf-8")  # written before the checkpoint: must not be reused
    config = config_from_dict(
        {
            "run": {"dir": str(run)},
            "data": {"dir": str(data_dir), "src_lang": "de", "tgt_lang": "en"},
            "model": {
                "type": "rnn",
                "embedding_dim": 8,
                "encoder_dim": 10,
                "decoder_dim": 12,
                "attention_dim": 7,
                "pre_output_dim": 9,
            },
            "head": {"type": "fixed"},
            "search": {"beam": 2, "max_len_a": 0.0, "max_len_b": 4},
        }
    )
    words = ["ein", "mann", "zwei", "hunde", "man", "dogs", "two", "a"]
    src = tgt = Vocabulary(list(SPECIALS) + words, [0] * len(SPECIALS) + [1] * len(words))
    for lang in ("de", "en"):
        src.save(run / "data" / f"vocab.{lang}.txt")
    write_json(
        run / "data" / "manifest.json",
        {"src_lang": "de", "tgt_lang": "en", "tokenizer": "none", "lowercase": True, "subword": "none"},
    )
    write_json(run / "config.json", to_dict(config))
    torch.manual_seed(0)
    meta = {"config": to_dict(config), "vocab_checksums": {"de": src.checksum(), "en": tgt.checksum()}}
    save_checkpoint(run / "checkpoints" / "best", model_for(config, src, tgt), meta)
    os.utime(hyp, (0, 0))
    (first,) = collect_runs([run], device="cpu")
    assert not first.reused and len(first.hyps) == len(REFS)
    assert hyp.read_text(encoding="utf-8").splitlines() == first.hyps
    (second,) = collect_runs([run], device="cpu")
    assert second.reused and second.hyps == first.hyps
    stamp = hyp.with_name(hyp.name + ".json")
    older = json.loads(stamp.read_text(encoding="utf-8"))
    for added in ("min_len", "no_repeat_ngram_size", "no_unk"):  # search settings nlgkit gained after such a stamp
        del older["search"][added]
    write_json(stamp, older)
    (third,) = collect_runs([run], device="cpu")
    assert third.reused  # what the stamp lacks counts at its default, which the run searches with
    write_json(stamp, {**older, "search": {**older["search"], "no_repeat_ngram_size": 2}})
    hyp.write_text("made with another search\n" * len(REFS), encoding="utf-8")
    (fourth,) = collect_runs([run], device="cpu")
    assert not fourth.reused and fourth.hyps == first.hyps


def cli_app() -> typer.Typer:
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    return app


def test_cli_writes_markdown_html_and_json(tmp_path: Path, data_dir: Path) -> None:
    good = fake_run(tmp_path, data_dir, "good", hyps=REFS)
    base = fake_run(tmp_path, data_dir, "base", hyps=HALF, head="learned")
    md, page = tmp_path / "out" / "t.md", tmp_path / "out" / "t.html"
    args = [
        "report",
        str(good),
        "--paper",
        "shalev2020_table2",
        "--baseline",
        str(base),
        "--samples",
        "20",
        "--metrics",
        "bleu,chrf",
        "--output",
        str(md),
        "--html",
        str(page),
        "--json",
    ]
    out = runner.invoke(cli_app(), args)
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["paper"]["id"] == "shalev2020_table2" and data["metrics"] == ["bleu", "chrf"]
    assert len(data["rows"]) == 2 and data["baselines"] == [str(base)]  # the baseline joins the report
    assert "33.17" in md.read_text(encoding="utf-8") and "</table>" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", ["unknown table", "missing run dir", "no checkpoint"])
def test_cli_bad_input_is_one_line(case: str, tmp_path: Path, data_dir: Path) -> None:
    good = fake_run(tmp_path, data_dir, "good")
    empty = tmp_path / "runs" / "untrained"
    empty.mkdir()
    args, named = {
        "unknown table": ([str(good), "--paper", "shalev2099"], "shalev2020_table2"),
        "missing run dir": ([str(tmp_path / "nope")], str(tmp_path / "nope")),
        "no checkpoint": ([str(good), str(empty)], str(empty)),
    }[case]
    out = runner.invoke(cli_app(), ["report", *args])
    assert out.exit_code == 2 and out.stdout == ""
    message = out.stderr.strip()
    assert "\n" not in message and message.startswith("error: ") and named in message


def test_reproduce_table2_uses_the_paper_file(tmp_path: Path, data_dir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from helpers import reproduce

    run, missing = fake_run(tmp_path, data_dir, "fixed"), tmp_path / "runs" / "not_trained"
    out = tmp_path / "results" / "table2.md"
    reproduce(["table2", str(run), str(missing), "--output", str(out)])
    text = out.read_text(encoding="utf-8")
    assert "| fixed | 100.00 | 33.17 | +66.83 |" in text and f"Not run yet: `{Path(missing).name}`" in text
    assert json.loads(out.with_suffix(".json").read_text())["rows"][0]["paper"] == {"bleu": 33.17}
    assert capsys.readouterr().out == text


def test_log_summary_drops_what_a_resume_rolled_back(tmp_path: Path) -> None:
    """A run killed after its last checkpoint logs updates twice; only the resumed copy is summarised."""
    from nlgkit.experiments.logs import log_summary

    def valid(epoch: int, update: int, bleu: float) -> dict[str, object]:
        return {"event": "valid", "epoch": epoch, "update": update, "loss": 2.0, "ppl": 7.4, "bleu": bleu,
                "best_bleu": bleu, "lr": 1e-3, "wall_s": 60.0 * epoch}

    events = [{"event": "start", "parameters": 10}, valid(1, 100, 20.0),
              {"event": "train", "update": 150, "tokens_per_s": 999.0},
              valid(2, 200, 99.0),  # logged after the last checkpoint, then lost to the kill
              {"event": "resume", "update": 100, "epoch": 2},
              {"event": "end", "reason": "stopped by a signal", "update": 120},
              {"event": "resume", "update": 120, "epoch": 2},
              {"event": "train", "update": 150, "tokens_per_s": 1.0}, valid(2, 200, 25.0),
              {"event": "end", "reason": "early stop", "update": 200}]
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    text = log_summary([str(run)], None)
    assert "99.00" not in text and "25.00" in text and "20.00" in text
    assert "resumed 2 time(s)" in text and "signal" not in text and "speed 1 target tokens/s over 1 logged windows" in text
    assert "ended: early stop." in text


def test_log_summary_states_raised_limits_and_the_settings_the_run_last_trained_with(tmp_path: Path) -> None:
    """A run extended after early stopping says so, and its training line shows the raised patience."""
    from nlgkit.experiments.logs import log_summary

    run = tmp_path / "run"
    (run / "checkpoints" / "last").mkdir(parents=True)
    events = [{"event": "start", "parameters": 10}, {"event": "resume", "update": 50, "epoch": 5},
              {"event": "extend", "epoch": 6, "update": 50, "previous_stop": "no bleu improvement for 4 epochs"},
              {"event": "end", "reason": "no bleu improvement for 10 epochs", "update": 90}]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    train = {"schedule": "plateau", "schedule_metric": "loss", "lr_decay": 0.5, "lr_patience": 1}
    (run / "config.json").write_text(json.dumps({"train": {**train, "early_stop_patience": 4}}), encoding="utf-8")
    meta = {"config": {"train": {**train, "early_stop_patience": 10}}}
    (run / "checkpoints" / "last" / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    text = " ".join(log_summary([str(run)], None).split())
    assert "went on from epoch 6 after 'no bleu improvement for 4 epochs'" in text
    assert "early stop after 10 epochs" in text and "without validation loss gain" in text


@pytest.mark.parametrize(("loop", "shown"), [
    ({"epoch": 15, "batch_in_epoch": 0, "best_epoch": 14, "finished": False}, "14 / 14"),  # stopped between epochs
    ({"epoch": 15, "batch_in_epoch": 40, "best_epoch": 14, "finished": False}, "14 / 14"),  # stopped inside one
    ({"epoch": 34, "batch_in_epoch": 227, "best_epoch": 14, "finished": True}, "14 / 34"),  # early stop
])
def test_epoch_column_counts_completed_epochs(loop: dict[str, object], shown: str) -> None:
    from nlgkit.evaluate.collect import RunResult
    from nlgkit.evaluate.render import _epochs
    from nlgkit.evaluate.report import ReportRow

    run = RunResult("r", Path("r"), {}, "g", [], [], Path("h"), False, progress=loop)
    assert _epochs(ReportRow("r", [run], False, {}, 1)) == shown


@pytest.mark.parametrize(("loop", "improving"), [
    ({"epoch": 7, "best_epoch": 7, "finished": True, "stop_reason": "train.max_epochs = 7 reached"}, True),
    ({"epoch": 8, "best_epoch": 7, "finished": False, "stop_reason": "train.max_minutes = 5 reached"}, True),
    ({"epoch": 7, "best_epoch": 5, "finished": True, "stop_reason": "train.max_epochs = 7 reached"}, False),
    ({"epoch": 9, "best_epoch": 9, "finished": True, "stop_reason": "no bleu improvement for 0 epochs"}, False),
    ({"epoch": 1, "best_epoch": 0, "finished": False, "stop_reason": "stopped by a signal"}, False),  # none done
    ({"epoch": 3, "best_epoch": 2, "finished": False}, True),  # still running, or killed: its best is its last
    ({"epoch": 3, "best_epoch": 1, "finished": False}, False),
])
def test_reports_flag_runs_stopped_while_still_improving(loop: dict[str, object], improving: bool) -> None:
    from nlgkit.evaluate.collect import RunResult
    from nlgkit.experiments.other_data import runs_table

    run = RunResult("r", Path("r"), {}, "g", [], [], Path("h"), False, progress=loop)
    assert run.still_improving is improving
    assert any("Still improving when last validated" in line for line in runs_table([run], str)) is improving


def test_hardware_label_counts_threads() -> None:
    from nlgkit.runs.provenance import hardware_label

    assert hardware_label({"threads": 1, "cpu": "EPYC"}) == "CPU (1 thread, EPYC)"
    assert hardware_label({"threads": 2, "cpu": "EPYC"}) == "CPU (2 threads, EPYC)"
    assert hardware_label({"threads": 2, "gpu": "NVIDIA H100"}) == "NVIDIA H100"


def test_collect_names_the_hardware_of_every_resumed_session(tmp_path: Path, data_dir: Path) -> None:
    run = fake_run(tmp_path, data_dir, "fixed_s1")
    events = [{"event": "start"}, {"event": "resume", "update": 5, "env": {"gpu": "Test GPU"}},
              {"event": "resume", "update": 9, "env": {"threads": 2, "cpu": "EPYC"}}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    (found,) = collect_runs([run], metrics=("bleu",))
    assert found.hardware == "Test GPU + CPU (2 threads, EPYC)"


def test_log_summary_names_the_revision_a_resume_went_on_with(tmp_path: Path) -> None:
    """A fix landing between two resumes shows in the log: the resume that switched code names its revision."""
    from nlgkit.experiments.logs import log_summary

    def git(commit: str) -> dict[str, object]:
        return {"commit": commit * 40, "dirty": False}

    run = tmp_path / "run"
    run.mkdir()
    (run / "provenance.json").write_text(json.dumps({"git": git("a"), "env": {}}), encoding="utf-8")
    events = [{"event": "start", "parameters": 10},
              {"event": "resume", "update": 10, "epoch": 1, "git": git("a")},
              {"event": "resume", "update": 20, "epoch": 2, "git": git("b")},
              {"event": "resume", "update": 30, "epoch": 3, "git": git("b")},
              {"event": "end", "reason": "early stop", "update": 40}]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    text = " ".join(log_summary([str(run)], None).split())
    assert "nlgkit aaaaaaa;" in text
    assert "resumed 3 time(s) from its last checkpoint (at updates 10, 20 with nlgkit bbbbbbb, 30);" in text


def test_markdown_table_escapes_cells_and_aligns_text_left():
    from nlgkit.evaluate.markdown import md_table

    lines = md_table(["head", "|V|", "status"], [["joint", "4,322", "finished:\nmax epochs | reached"]],
                     [False, True, False])
    assert lines[0] == "| head | \\|V\\| | status |"
    assert lines[1] == "|---|---:|---|"
    assert lines[2] == "| joint | 4,322 | finished: max epochs \\| reached |"
    assert md_table(["run", "BLEU"], [])[1] == "|---|---:|"  # by default a label, then numbers
    with pytest.raises(ValueError, match="2 headers but 1 alignments"):
        md_table(["run", "BLEU"], [], [False])


def test_groups_of_one_name_say_the_settings_that_keep_them_apart() -> None:
    """Two runs of one recipe, trained before and after a recipe setting changed, are not seeds of one cell:
    their rows name the setting, and each keeps its own row rather than a mean."""
    def key(*overrides: str) -> str:
        return group_key(load_recipe(RECIPES / "multi30k_learned.toml", list(overrides)))

    runs = [result("a", 34.0, 1, group=key("train.amp=false")), result("a", 35.0, 2, group=key("train.amp=true")),
            result("a", 33.0, 3, group=key("train.amp=true")), result("b", 30.0, 1, group=key("train.lr=0.01"))]
    labels = [row.label for row in build_report(runs).rows]
    assert labels == ["a (train.amp = false)", "a (seed 2; train.amp = true)", "a (seed 3; train.amp = true)",
                      "a (train.amp = true): mean of 2 seeds", "b"]

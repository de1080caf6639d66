"""The research papers' reports from trained runs: tiny Transformers on a slice of Multi30K (real data, real
training, real search); the tables, the claim test and the cached hypotheses are the production ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import reproduce, tiny_recipe
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.data.word_counts import read_word_counts, training_word_counts
from nlgkit.experiments.papers import load_table

TEST_LINES = 60


def cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


def small_data(paper_dir: Path, tmp: Path) -> Path:
    """The prepared paper data with a 60-sentence test split (reports translate it at several beams)."""
    out = tmp / "data"
    shutil.copytree(paper_dir, out)
    for path in out.glob("test*"):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:TEST_LINES]
        path.write_text("".join(lines), encoding="utf-8")
    return out


TRANSFORMER = """type = "transformer"
preset = "small"
dim = 32
ffn_dim = 64
heads = 2
encoder_layers = 1
decoder_layers = 1
output_dim = 16"""
LUONG = """type = "lstm_luong"
embedding_dim = 24
hidden_dim = 24
layers = 1"""


def recipe(tmp: Path, data_dir: Path, name: str, head: str, model: str = TRANSFORMER) -> Path:
    """A tiny model trained for 24 updates (no dropout, constant learning rate), searched with beam 5."""
    return tiny_recipe(tmp, data_dir, tmp / name, dropout=0.0, model=model, head=head, beam=5, valid_limit=30,
                       lr=0.003, batch_size=50, schedule="none", max_updates=24, log_every=6, seed=2)


@pytest.fixture(scope="module")
def tokarchuk_runs(paper, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("tokarchuk")
    data = small_data(paper[0], tmp)
    cli("train", str(recipe(tmp, data, "softmax", 'type = "learned"')))
    cli("embed", "extract", str(tmp / "softmax"), "-o", str(tmp / "pretrained.safetensors"))
    cli("train", str(recipe(tmp, data, "uniform", 'type = "continuous"\ndim = 16')))
    cli("train", str(recipe(tmp, data, "pretrained",
                                        f'type = "continuous"\ntable = "{tmp / "pretrained.safetensors"}"')))
    return [tmp / "softmax", tmp / "uniform", tmp / "pretrained"]


def section(text: str, title: str) -> list[str]:
    """The table rows under a ``## title`` heading."""
    part = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    return [line for line in part.splitlines() if line.startswith("| ") and "---" not in line]


def test_tokarchuk_report_from_trained_runs(tokarchuk_runs: list[Path], tmp_path: Path) -> None:
    output = tmp_path / "tokarchuk.md"
    reproduce(["tokarchuk", *map(str, tokarchuk_runs), str(tmp_path / "never_trained"), "--output", str(output),
               "--beams", "1,2"])
    text = output.read_text()
    assert "**Other data:**" in text and "\nNot run yet: `never_trained`.\n" in text

    table1 = section(text, "Table 1")
    header, rows = table1[0], table1[1:]
    assert "paper en-tr" in header and "paper ro-en" in header and "paper en-de" in header
    # each run at the recipe's beam and greedy, named by its head and its targets (read from the table file)
    names = ["softmax", "continuous, uniform targets", "continuous, pretrained targets"]
    for name in names:
        assert sorted(row.split(" | ")[3] for row in rows if row.startswith(f"| {name} (")) == ["1", "5"]
    uniform_5 = next(row for row in rows if row.startswith("| continuous, uniform") and row.split(" | ")[3] == "5")
    paper_cells = [r.values["bleu"] for r in load_table("tokarchuk2024_table1").rows
                   if r.keys["head"] == "continuous" and r.keys["target_embeddings"] == "uniform" and r.keys["beam"] == 5]
    assert uniform_5.rstrip(" |").split(" | ")[-3:] == [f"{v:.2f}" for v in paper_cells]
    assert "baseline" in next(row for row in rows if row.startswith("| softmax") and row.split(" | ")[3] == "5")

    assert "Random sphere targets − pre-trained targets (beam 5)" in section_text(text, "The claim")
    by_beam = section(text, "BLEU against beam size")
    assert by_beam[0].startswith("| run | beam 1 | beam 2 |") and len(by_beam) == 1 + len(tokarchuk_runs)
    # greedy BLEU in Table 1 is the beam-1 column of Fig. 1: both come from the same cached hypotheses
    greedy = {row.split(" (")[0][2:]: row.split(" | ")[4] for row in rows if row.split(" | ")[3] == "1"}
    assert {row.split(" (")[0][2:]: row.split(" | ")[1] for row in by_beam[1:]} == greedy
    f1 = section(text, "Word F1 by training frequency")
    assert "seen <1" in f1[0] and len(f1) == 1 + len(tokarchuk_runs)
    assert all(0.0 <= float(cell) <= 1.0 for row in f1[1:] for cell in row.rstrip(" |").split(" | ")[1:])
    for run in tokarchuk_runs:
        assert (run / "test.hyp.en").is_file() and (run / "test.beam2.hyp.en").is_file()
    runs = section(text, "Runs")
    assert runs[0].startswith("| run | best epoch / epochs | training wall time (h) | status |")
    assert len(runs) == 1 + len(tokarchuk_runs)
    for row, run in zip(runs[1:], tokarchuk_runs, strict=True):
        summary = json.loads((run / "summary.json").read_text())
        completed = summary["epoch"] if summary["finished"] else summary["epoch"] - 1  # else: the next epoch's number
        assert row.split(" | ")[1] == f"{summary['best_epoch']} / {completed}"


def test_log_summary_states_each_runs_training_settings(tokarchuk_runs: list[Path], tmp_path: Path) -> None:
    """The run logs behind a table say the schedule each run trained with, read from its resolved config."""
    output = tmp_path / "runs.md"
    reproduce(["log-summary", *map(str, tokarchuk_runs), "--output", str(output)])
    text = output.read_text()
    for run in tokarchuk_runs:
        train = json.loads((run / "config.json").read_text())["train"]
        part = text.split(f"## `{run.name}`", 1)[1].split("\n## ", 1)[0]
        assert f"Read from its run directory `{run}`." in part
        assert (f"Training: {train['optimizer']}, lr {train['lr']}, schedule {train['schedule']}" in part
                and f"batches of {train['batch_size']} {train['batch_unit']}, at most {train['max_epochs']} epochs"
                in part)


def section_text(text: str, title: str) -> str:
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def pappas_runs(paper, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("pappas")
    data = small_data(paper[0], tmp)
    heads = {"learned": 'type = "learned"', "tied": 'type = "tied"', "joint": 'type = "joint"\njoint_dim = 16',
             "joint_output": 'type = "joint"\njoint_dim = 16\nstructure = "output"',
             "joint_sampled": 'type = "joint"\njoint_dim = 16\n[head.sampling]\nshare = 0.5'}
    for name, head in heads.items():
        cli("train", str(recipe(tmp, data, name, head, LUONG)))
    return [tmp / name for name in heads]


def test_pappas_report_from_trained_runs(pappas_runs: list[Path], tmp_path: Path) -> None:
    output = tmp_path / "pappas.md"
    reproduce(["pappas", *map(str, pappas_runs), "--output", str(output)])
    text = output.read_text()
    assert "**Other data:**" in text
    table2 = section(text, "Table 2")
    labels = [row.split(" (`")[0][2:] for row in table2[1:]]
    assert labels == ["learned", "tied", "joint (d_j 16)"]  # the ablation and the sampled run have their own tables
    assert "baseline" in table2[1] and all(" p " in row or "p <" in row or "p =" in row for row in table2[2:])
    paper = section(text, "The paper's Table 2")
    assert paper[0].startswith("| head | en-fi bpe:32000") and len(paper) == 1 + 3  # learned, tied, joint
    assert "- none: joint − tied " in section_text(text, "The claim")
    ablation = section(text, "Their Table 3")  # their row order, each beside the paper's row of the same form
    assert [row.split(" (`")[0][2:] for row in ablation[1:]] == ["learned", "tied", "joint output-only",
                                                                 "joint (d_j 16)"]
    cells = [row.rstrip(" |").split(" | ") for row in ablation[1:]]
    assert [c[1] for c in cells] == ["W hₜ", "E hₜ", "σ(E W) hₜ (Eq. 7a)", "–"]  # no paper row at d_j 16
    assert [c[-1] for c in cells] == ["15.85", "16.51 (+0.66)", "16.01 (+0.16)", "–"]
    assert cells[0][-2] == "baseline" and cells[3][4] == table2[3].split(" | ")[4]  # the same run, the same BLEU
    sampling = section(text, "Sampled softmax")
    assert [row.split(" (`")[0][2:] for row in sampling[1:]] == ["joint (d_j 16)", "joint (d_j 16), sampled 50%"]
    full, sampled = (row.rstrip(" |").split(" | ") for row in sampling[1:])
    assert full[-2] == "1.00×" and float(sampled[-2].rstrip("×")) > 0  # speeds from each run's training log
    events = [json.loads(line) for line in (pappas_runs[-1] / "metrics.jsonl").read_text().splitlines()]
    last = [e for e in events if e["event"] == "train"][-1]  # one process: its counter covers every update
    assert full[-1] == "–" and sampled[-1] == f"{100 * last['sampling_overflows'] / last['update']:.1f} %"


def test_pappas_claim_tests_the_part_of_the_order_its_runs_present(pappas_runs: list[Path], tmp_path: Path) -> None:
    """Without a tied run, joint is still compared with learned, and the missing head is named."""
    learned, _, joint = pappas_runs[:3]
    output = tmp_path / "pappas.md"
    reproduce(["pappas", str(learned), str(joint), "--output", str(output)])
    claim = section_text(output.read_text(), "The claim")
    assert "- none: joint − learned " in claim and "(tied not run: the order is tested in part)" in claim
    assert "joint − tied" not in claim


def test_pappas_claim_and_ablation_table_with_a_second_joint_dimension(pappas_runs: list[Path],
                                                                       tmp_path: Path) -> None:
    """A wider joint run (their d_j 2048) is a row of Table 2 and of the ablation table, but the claim keeps
    comparing the joint head of the smallest d_j (their 512), wherever the wider run comes in the list."""
    learned, tied, joint = pappas_runs[:3]
    wide = tmp_path / "joint_wide"
    cli("train", str(recipe(tmp_path, learned.parent / "data", "joint_wide", 'type = "joint"\njoint_dim = 32',
                            LUONG)))
    reproduce(["pappas", str(learned), str(tied), str(joint), "--output", str(tmp_path / "narrow.md")])
    reproduce(["pappas", str(learned), str(tied), str(wide), str(joint), "--output", str(tmp_path / "both.md")])
    narrow, both = (tmp_path / "narrow.md").read_text(), (tmp_path / "both.md").read_text()
    assert section_text(both, "The claim") == section_text(narrow, "The claim")
    assert [row.split(" (`")[0][2:] for row in section(both, "Table 2")[1:]] == [
        "learned", "tied", "joint (d_j 32)", "joint (d_j 16)"]
    assert [row.split(" (`")[0][2:] for row in section(both, "Their Table 3")[1:]] == [
        "learned", "tied", "joint (d_j 16)", "joint (d_j 32)"]
    assert "Their Table 3" not in narrow  # one joint form: nothing to ablate


def test_pappas_report_summarises_seed_repetitions(pappas_runs: list[Path], tmp_path: Path) -> None:
    """A head trained with several seeds: one row per seed against the learned head's first seed, then their
    mean ± sd; the claim adds every head's seed mean."""
    data_dir = pappas_runs[0].parent / "data"
    cli("train", str(recipe(tmp_path, data_dir, "learned_seed3", 'type = "learned"', LUONG)), "--set", "train.seed=3")
    output = tmp_path / "pappas.md"
    reproduce(["pappas", *map(str, pappas_runs), str(tmp_path / "learned_seed3"), "--output", str(output)])
    text = output.read_text()
    table2 = section(text, "Table 2")
    labels = [row.split(" | ")[0][2:] for row in table2[1:]]
    assert labels == ["learned (`learned`, seed 2)", "learned (`learned_seed3`, seed 3)", "learned: mean of 2 seeds",
                      "tied (`tied`)", "joint (d_j 16) (`joint`)"]
    first, second, mean = (row.rstrip(" |").split(" | ") for row in table2[1:4])
    assert first[-1] == "baseline" and "p" in second[-1]  # the second seed is compared with the first
    scores = [float(first[4]), float(second[4])]  # shown to 2 decimals, so compare within that rounding
    shown_mean, shown_sd = (float(x) for x in mean[4].removesuffix(" (n = 2)").split(" ± "))
    assert mean[4].endswith(" (n = 2)") and shown_mean == pytest.approx(sum(scores) / 2, abs=0.011)
    assert shown_sd == pytest.approx(abs(scores[0] - scores[1]) / 2 ** 0.5, abs=0.011)  # sample sd of two
    claim = section_text(text, "The claim")
    tied_bleu = table2[4].split(" | ")[4]
    assert f"Over seeds: learned {mean[4]}; tied {tied_bleu} (n = 1); joint" in claim and "nan" not in claim


def test_a_record_keeps_a_copy_of_the_target_table_its_run_read(tokarchuk_runs: list[Path], tmp_path: Path) -> None:
    """A record never depends on a file outside it: the continuous run's target table (and its word list) is
    copied under inputs/ with its checksum, the record's config names the copy relative to the record, it keeps
    the training words' counts (Fig. 3), and the report read from the records equals the one read from the runs
    after the runs, the table and the prepared data are gone."""
    import hashlib

    from_runs, from_records = tmp_path / "from_runs.md", tmp_path / "from_records.md"
    reproduce(["tokarchuk", *map(str, tokarchuk_runs), "--output", str(from_runs), "--beams", "1"])
    records = tmp_path / "records"
    reproduce(["archive", *map(str, tokarchuk_runs), "--into", str(records)])
    table = tokarchuk_runs[2].parent / "pretrained.safetensors"
    words = table.with_suffix(".vocab.txt")
    record = records / tokarchuk_runs[2].name
    digest = hashlib.sha256(table.read_bytes()).hexdigest()
    assert json.loads((record / "config.json").read_text())["head"]["table"] == "inputs/pretrained.safetensors"
    listed = json.loads((record / "record.json").read_text())
    assert listed["inputs"] == {"head.table": {"archived_from": str(table.resolve()), "sha256": digest,
                                               "kept": "inputs/pretrained.safetensors"}}
    assert listed["files"]["inputs/pretrained.safetensors"] == digest
    assert (record / "inputs" / "pretrained.vocab.txt").read_bytes() == words.read_bytes()
    assert json.loads((records / tokarchuk_runs[1].name / "record.json").read_text())["inputs"] == {}  # no table

    data = Path(json.loads((record / "config.json").read_text())["data"]["dir"])
    kept_counts = record / "data" / "train.words.en"  # Fig. 3's bins, as the prepared data gives them
    assert read_word_counts(kept_counts) == training_word_counts(data, "en")
    assert listed["files"]["data/train.words.en"] == hashlib.sha256(kept_counts.read_bytes()).hexdigest()

    away = tmp_path / "away"
    away.mkdir()
    moved = [table, words, data]
    try:  # the table and the prepared data are gone with the machine that made them, and so are the run directories
        for path in moved:
            path.rename(away / path.name)
        gone = [str(tmp_path / "gone" / run.name) for run in tokarchuk_runs]
        reproduce(["tokarchuk", *gone, "--records", str(records), "--output", str(from_records), "--beams", "1"])
    finally:
        for path in moved:
            (away / path.name).rename(path)
    assert from_records.read_text() == from_runs.read_text()


def test_run_records_regenerate_the_report_after_the_run_directories_are_gone(pappas_runs: list[Path],
                                                                               tmp_path: Path) -> None:
    """A record keeps no weights, yet the table and the run logs read from records equal those read from the runs:
    committed records let a later session add rows to a table whose runs lived on another machine."""
    from_runs, logs_from_runs = tmp_path / "from_runs.md", tmp_path / "logs_from_runs.md"
    reproduce(["pappas", *map(str, pappas_runs), "--output", str(from_runs)])  # keeps each run's test hypotheses
    reproduce(["log-summary", *map(str, pappas_runs), "--output", str(logs_from_runs)])
    records = tmp_path / "records"
    reproduce(["archive", *map(str, pappas_runs), "--into", str(records)])
    assert sorted(path.name for path in records.iterdir()) == sorted(run.name for run in pappas_runs)
    assert not [path for path in records.rglob("*") if path.suffix in (".safetensors", ".pt")]

    gone = [str(tmp_path / "gone" / run.name) for run in pappas_runs]
    from_records, logs_from_records = tmp_path / "from_records.md", tmp_path / "logs_from_records.md"
    reproduce(["pappas", *gone, str(tmp_path / "gone" / "never_trained"), "--records", str(records),
               "--output", str(from_records)])
    assert from_records.read_text() == from_runs.read_text() + "\nNot run yet: `never_trained`.\n"
    reproduce(["log-summary", *gone, "--records", str(records), "--output", str(logs_from_records)])
    for run in pappas_runs:  # the same logs; only the source line differs, and names the run it was archived from
        assert logs_from_runs.read_text().count(f"Read from its run directory `{run}`.") == 1
        assert logs_from_records.read_text().count(
            f"Read from its record `{records / run.name}` (archived from `{run.resolve()}`).") == 1
    assert ([line for line in logs_from_records.read_text().splitlines() if not line.startswith("Read from")]
            == [line for line in logs_from_runs.read_text().splitlines() if not line.startswith("Read from")])


def test_a_run_record_needs_the_hypotheses_it_cannot_remake(pappas_runs: list[Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    untranslated = tmp_path / "untranslated"
    shutil.copytree(pappas_runs[0], untranslated, ignore=shutil.ignore_patterns("test*.hyp.*"))
    with pytest.raises(SystemExit) as exit_info:
        reproduce(["archive", str(untranslated), "--into", str(tmp_path / "records")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and str(untranslated) in err and "test.hyp.en" in err
    assert not (tmp_path / "records" / "untranslated").exists()

    reproduce(["pappas", str(pappas_runs[0]), "--output", str(tmp_path / "first.md")])  # its hypotheses, kept
    record = tmp_path / "records" / pappas_runs[0].name
    reproduce(["archive", str(pappas_runs[0]), "--into", str(tmp_path / "records")])
    hyps = (record / "test.hyp.en").read_text().splitlines(keepends=True)
    (record / "test.hyp.en").write_text("".join(["a better translation\n", *hyps[1:]]))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        reproduce(["pappas", str(record), "--output", str(tmp_path / "pappas.md")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "test.hyp.en: changed since the run was archived" in err

    (record / "test.hyp.en").unlink()
    json_path = record / "record.json"
    listed = json.loads(json_path.read_text())
    del listed["files"]["test.hyp.en"]  # as if archived without it: a record cannot translate
    json_path.write_text(json.dumps(listed))
    with pytest.raises(SystemExit) as exit_info:
        reproduce(["pappas", str(record), "--output", str(tmp_path / "pappas.md")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "no weights to generate with" in err
    assert not (tmp_path / "pappas.md").exists()


def test_a_run_stopped_early_does_not_replace_the_record_of_a_finished_one(pappas_runs: list[Path], tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The weights of a finished run are usually gone with its machine: archiving a capped run of the same name over
    its record would lose the run for good, so it takes --replace."""
    reproduce(["pappas", str(pappas_runs[0]), "--output", str(tmp_path / "pappas.md")])  # its hypotheses, kept
    finished, capped = (tmp_path / state / pappas_runs[0].name for state in ("finished", "capped"))
    for run, done, reason in ((finished, True, "no bleu improvement for 10 epochs"),
                              (capped, False, "train.max_minutes = 4.0 reached")):
        shutil.copytree(pappas_runs[0], run)
        summary = json.loads((run / "summary.json").read_text())
        summary.update(finished=done, stop_reason=reason)
        (run / "summary.json").write_text(json.dumps(summary))
    records = tmp_path / "records"
    reproduce(["archive", str(finished), "--into", str(records)])
    kept = {path: path.read_bytes() for path in (records / finished.name).rglob("*") if path.is_file()}

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        reproduce(["archive", str(capped), "--into", str(records)])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and str(records / finished.name) in err
    assert "train.max_minutes = 4.0 reached" in err and "--replace" in err
    assert {path: path.read_bytes() for path in (records / finished.name).rglob("*") if path.is_file()} == kept

    reproduce(["archive", str(finished), "--into", str(records)])  # a finished run replaces a finished record
    reproduce(["archive", str(capped), "--into", str(records), "--replace"])
    assert not json.loads((records / finished.name / "summary.json").read_text())["finished"]


def test_overflow_share_counts_each_training_process_once(tmp_path: Path) -> None:
    """The head's counter restarts with every process; updates logged after the checkpoint a run resumed
    from were trained again, so only the resumed process's count covers them."""
    from nlgkit.evaluate.collect import RunResult
    from nlgkit.experiments.pappas import overflow_share

    events = [{"event": "start"},
              {"event": "train", "update": 50, "sampling_overflows": 10},
              {"event": "train", "update": 100, "sampling_overflows": 20},
              {"event": "train", "update": 150, "sampling_overflows": 30},  # killed before its checkpoint
              {"event": "resume", "update": 100},
              {"event": "train", "update": 150, "sampling_overflows": 5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    run = RunResult("r", tmp_path, {}, "", [], [], tmp_path / "hyp", False)
    assert overflow_share(run) == (20 + 5) / (100 + 50)
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"event": "train", "update": 50}) + "\n")
    assert overflow_share(run) is None  # a full-softmax run logs no counter


def test_log_summary_of_a_run_not_trained_names_no_source(tmp_path: Path) -> None:
    """A run with neither a directory nor a record is listed as not run yet, without a path it was not read from."""
    output = tmp_path / "runs.md"
    reproduce(["log-summary", str(tmp_path / "pappas_bpe2000_tied"), "--output", str(output)])
    part = output.read_text().split("## `pappas_bpe2000_tied`", 1)[1]
    assert part.strip() == "Not run yet: no metrics.jsonl in its run directory or record."

"""``nlgkit reproduce status``: where runs stand against their stopping rule, worked out by hand from run directories
written as training writes them (last checkpoint's loop state and config, metrics log)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.experiments.logs import status
from nlgkit.runs.progress import read_progress
from nlgkit.runs.records import RECORD_FILE

NOW = 1_800_000_000.0


def fake_run(root: Path, name: str, loop: dict, epoch_seconds: list[float], patience: int = 20,
             max_epochs: int = 200) -> Path:
    """A run directory as training leaves it: ``epoch_seconds`` are its validated epochs' lengths."""
    run_dir = root / name
    (run_dir / "checkpoints" / "last").mkdir(parents=True)
    meta = {"config": {"train": {"early_stop_patience": patience, "max_epochs": max_epochs}},
            "loop": {"finished": False, "stop_reason": "", **loop}}
    (run_dir / "checkpoints" / "last" / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    events, wall = [{"event": "start", "time": NOW - 9000}], 0.0
    for epoch, seconds in enumerate(epoch_seconds, start=1):
        wall += seconds
        events.append({"event": "valid", "time": NOW - 9000 + wall, "epoch": epoch, "update": epoch * 10,
                       "metric": "bleu", "bleu": 20.0, "best": 20.0, "wall_s": wall})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return run_dir


def test_progress_counts_the_epochs_the_stopping_rule_still_allows(tmp_path: Path) -> None:
    # in epoch 12: 11 done, best at 8, 3 without a gain: 17 more at most; the last 3 epochs took 9, 10, 11 minutes
    running = fake_run(tmp_path, "running", {"epoch": 12, "best_epoch": 8, "best_score": 30.5, "bad_epochs": 3,
                                             "wall_seconds": 7200.0}, [300.0] * 8 + [540.0, 600.0, 660.0])
    progress = read_progress(running)
    assert (progress.started, progress.finished, progress.epochs_done) == (True, False, 11)
    assert (progress.best_epoch, progress.best_score, progress.epochs_without_gain) == (8, 30.5, 3)
    assert progress.epochs_left == 17 and progress.minutes_per_epoch == pytest.approx(10.0)
    assert progress.hours_left == pytest.approx(17 * 10 / 60) and progress.hours_trained == pytest.approx(2.0)
    # max_epochs comes first: 198 done of 200
    late = fake_run(tmp_path, "late", {"epoch": 199, "best_epoch": 197, "best_score": 31.0, "bad_epochs": 1},
                    [60.0] * 3)
    assert read_progress(late).epochs_left == 2
    finished = fake_run(tmp_path, "finished", {"epoch": 30, "best_epoch": 10, "best_score": 33.0, "bad_epochs": 20,
                                               "finished": True, "stop_reason": "no bleu improvement for 20 epochs"},
                        [120.0] * 30)
    assert (read_progress(finished).epochs_done, read_progress(finished).epochs_left) == (30, 0)
    assert read_progress(fake_run(tmp_path, "first", {"epoch": 2, "best_epoch": 1, "best_score": 9.0},
                                  [420.0])).minutes_per_epoch == pytest.approx(7.0)
    assert not read_progress(tmp_path / "nowhere").started

    table = status([str(running), str(finished), str(tmp_path / "nowhere")], now=NOW - 9000 + 4200 + 1200)
    rows = table.splitlines()
    assert rows[2] == ("| running | not finished | 11 | 30.50 (8) | 3 of 20 | 17 | 10.0 | 2.00 | 2.8 | 20 min ago |")
    assert rows[3].startswith("| finished | finished: no bleu improvement for 20 epochs | 30 | 33.00 (10) | 20 of 20 | 0 |")
    assert rows[4] == "| nowhere | not started (no checkpoint) | – | – | – | – | – | – | – | – |"
    assert rows[-1] == ("1 finished, 1 on their way, 1 not started; at most 2.8 h of training left for those on "
                        "their way, one after another.")


def test_status_command_prints_and_writes_the_table(tmp_path: Path) -> None:
    run = fake_run(tmp_path, "run", {"epoch": 3, "best_epoch": 2, "best_score": 12.0, "bad_epochs": 0},
                   [60.0, 60.0])
    result = CliRunner().invoke(app, ["reproduce", "status", str(run), "--output", str(tmp_path / "status.md")])
    assert result.exit_code == 0, result.output
    assert "| run | not finished | 2 | 12.00 (2) | 0 of 20 | 20 | 1.0 |" in result.stdout
    assert (tmp_path / "status.md").read_text(encoding="utf-8") == result.stdout


def test_status_reads_a_run_trained_elsewhere_from_its_record(tmp_path: Path) -> None:
    """``--records``: a run with no trained directory here stands as its record says, marked so; without the option
    it is a run not started."""
    records = tmp_path / "records"
    record = fake_run(records, "elsewhere", {"epoch": 30, "best_epoch": 10, "best_score": 33.0, "bad_epochs": 20,
                                             "finished": True, "stop_reason": "no bleu improvement for 20 epochs"},
                      [120.0] * 30)
    (record / RECORD_FILE).write_text("{}", encoding="utf-8")
    here = fake_run(tmp_path / "runs", "here", {"epoch": 3, "best_epoch": 2, "best_score": 12.0, "bad_epochs": 0},
                    [60.0, 60.0])
    gone = tmp_path / "runs" / "elsewhere"
    result = CliRunner().invoke(app, ["reproduce", "status", str(here), str(gone), "--records", str(records)])
    assert result.exit_code == 0, result.output
    assert "| here | not finished | 2 | 12.00 (2) |" in result.stdout
    assert ("| elsewhere | finished: no bleu improvement for 20 epochs (its record) | 30 | 33.00 (10) | 20 of 20 | 0 |"
            in result.stdout)
    assert result.stdout.splitlines()[-1].startswith("1 finished, 1 on their way, 0 not started")
    plain = CliRunner().invoke(app, ["reproduce", "status", str(here), str(gone)])
    assert "| elsewhere | not started (no checkpoint) |" in plain.stdout


def test_a_metrics_line_cut_short_is_not_an_event_and_the_next_starts_its_own_line(tmp_path: Path) -> None:
    """A full disk (or a kill mid-write) can leave the last line cut: reading it was a JSONDecodeError traceback in
    every report, and the resumed run's first event was glued to it, spoiling both."""
    from nlgkit.core.errors import DataError
    from nlgkit.runs.metrics_log import MetricsLog

    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.write("start")
    log.write("train", update=1)
    with open(log.path, "a", encoding="utf-8") as handle:
        handle.write('{"event": "train", "upd')
    assert [event["event"] for event in log.read()] == ["start", "train"]
    log.write("resume", update=1)  # (the cut bytes hold no event: they go, and the log stays whole lines)
    log.write("train", update=2)
    assert [json.loads(line)["event"] for line in log.path.read_text(encoding="utf-8").splitlines()] == [
        "start", "train", "resume", "train"]
    assert [event.get("update") for event in log.read()] == [None, 1, 1, 2]
    log.path.write_text('{"event": "start"}\n{"event": "tr\n{"event": "end"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"metrics\.jsonl: line 2: not a JSON event"):
        log.read()  # (damage inside the log, not a last write cut short: named, not skipped)
    log.path.write_text('{"event": "start"}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"metrics\.jsonl: line 2: not an event"):
        log.read()

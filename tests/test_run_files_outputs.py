"""No command writes its output over a file of the run or export it reads (its weights, vocabularies, records or
scored test outputs): refused in one line before any work, as an output over an ``--input`` is. New files inside a
run stay allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.runs.files import model_files


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400", "NO_COLOR": "1"})


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    """The files of a trained run, as its commands find them (contents do not matter: the refusal comes first)."""
    run = tmp_path / "run"
    for name in ("checkpoints/best/model.safetensors", "checkpoints/best/meta.json", "checkpoints/last/meta.json",
                 "data/vocab.en.txt", "data/spm.model", "config.json", "metrics.jsonl", "test.hyp.en",
                 "test.hyp.en.json"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(f"{name}\n", encoding="utf-8")
    (tmp_path / "src.de").write_text("ein hund .\n", encoding="utf-8")
    return run


def test_a_runs_files_are_its_checkpoints_data_and_records_and_an_exports_are_all_of_it(tmp_path: Path,
                                                                                       run_dir: Path) -> None:
    (run_dir / "notes").mkdir()
    (run_dir / "notes" / "todo.txt").write_text("x", encoding="utf-8")
    loaded = {"checkpoints/best/model.safetensors", "checkpoints/best/meta.json", "checkpoints/last/meta.json",
              "data/vocab.en.txt", "data/spm.model", "config.json", "test.hyp.en.json"}
    assert {path.relative_to(run_dir).as_posix() for path in model_files(run_dir)} == loaded
    assert {path.relative_to(run_dir).as_posix() for path in model_files(run_dir, records=True)} == {
        *loaded, "metrics.jsonl", "test.hyp.en"}
    export = tmp_path / "export"
    (export / "assets").mkdir(parents=True)
    for name in ("model.bin", "nlgkit.json", "assets/vocab.en.txt"):
        (export / name).write_text("x", encoding="utf-8")
    assert {path.relative_to(export).as_posix() for path in model_files(export)} == {
        "model.bin", "nlgkit.json", "assets/vocab.en.txt"}
    assert model_files(tmp_path / "missing") == []


@pytest.mark.parametrize(("command", "target"), [
    *((command, target) for command in ("translate", "caption", "report", "norms")
      for target in ("data/vocab.en.txt", "checkpoints/best/meta.json", "config.json")),
    ("report", "test.hyp.en"), ("report", "metrics.jsonl")])  # (what report reads besides the model)
def test_an_output_over_a_file_of_the_run_is_refused_before_any_work(tmp_path: Path, run_dir: Path, command: str,
                                                                     target: str) -> None:
    """Each of these exited 0 and left the run broken (a vocabulary replaced by translations, a scored test output
    by a report)."""
    output = run_dir / target
    argv = {"translate": ["translate", "-m", str(run_dir), "-i", str(tmp_path / "src.de"), "-o", str(output)],
            "caption": ["caption", "-m", str(run_dir), "--list", str(tmp_path / "src.de"), "-o", str(output)],
            "report": ["evaluate", "report", str(run_dir), "--output", str(output)],
            "norms": ["evaluate", "norms", str(run_dir), "--png", str(output)]}[command]
    before = {path: path.read_bytes() for path in model_files(run_dir)}
    result = invoke(*argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    label = "RUN_DIR" if command in ("report", "norms") else "--model"
    assert lines == [(f"error: {output}: also given as {label} {run_dir} (one of its files); writing the output "
                     "there would replace that input (write it to another file)")], result.stderr
    assert {path: path.read_bytes() for path in model_files(run_dir)} == before


def test_a_new_file_inside_a_run_is_not_one_of_its_files(run_dir: Path) -> None:
    from nlgkit.core.io import check_output
    from nlgkit.runs.files import models_as_inputs

    for output in (run_dir / "newstest.hyp", run_dir / "report.md", run_dir / "test.hyp.en"):
        check_output(output, models_as_inputs([run_dir]))  # (translating reads no earlier output: -o it again)


@pytest.mark.parametrize("target", ["table.safetensors", "table.vocab.txt"])
def test_the_table_a_continuous_head_is_built_from_is_an_input_of_its_run(tmp_path: Path, run_dir: Path,
                                                                          target: str) -> None:
    """Loading a run with a continuous head reads its table (and word list) from outside the run: ``translate -o``
    over it exited 0 and left the run unloadable. A record's config names such files the same way (input_files)."""
    import json

    table = tmp_path / "table.safetensors"
    table.write_text("x", encoding="utf-8")
    table.with_suffix(".vocab.txt").write_text("a\n", encoding="utf-8")
    (run_dir / "checkpoints" / "best" / "meta.json").write_text(json.dumps(
        {"config": {"head": {"type": "continuous", "table": str(table)}}}), encoding="utf-8")
    assert model_files(run_dir)[-2:] == [table, table.with_suffix(".vocab.txt")]
    output = tmp_path / target
    result = invoke("translate", "-m", str(run_dir), "-i", str(tmp_path / "src.de"), "-o", str(output))
    assert result.exit_code == 2, result.output
    what = "its head.table" if target == "table.safetensors" else "a file of its head.table"
    assert result.stderr.strip().splitlines() == [
        (f"error: {output}: also given as --model {run_dir} ({what}); writing the output there would replace that "
         "input (write it to another file)")]
    assert table.read_text(encoding="utf-8") == "x"

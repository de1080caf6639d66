"""The committed tables are what their report targets write from committed files alone.

`make pappas-report`, `make tokarchuk-report`, `make table1-report` and `make table2-report` train nothing: they
read the weightless run records in results/runs (and, for runs that have none, the figures kept beside their
table), so a change to the report code that would change a committed table must regenerate it, or this fails: a
committed table never silently stops being what its command produces. Each target runs as `make -n` lists it, in
an empty directory that sees the repository's results/ (so no run directory of this machine is read), with
``RUNS_DIR`` pointing nowhere, as on a clean clone with ../shared beside it; the commands run in this process
through the CLI's entry (`nlgkit_command`), so the report code is imported once, not once per command.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import nlgkit_command

ROOT = Path(__file__).resolve().parents[1]
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make_commands(target: str, *settings: str) -> list[list[str]]:
    """The nlgkit commands of ``make TARGET`` (as ``make -n`` prints them), each to run with this Python."""
    listing = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), target, *settings], capture_output=True,
                             text=True, check=True).stdout
    lines = listing.replace("\\\n", " ").splitlines()
    return [[sys.executable, *shlex.split(line)[1:]] for line in lines if " -m nlgkit" in line]


def check_regenerates(target: str, tmp_path: Path, *settings: str) -> list[str]:
    """Run ``make TARGET``'s commands with their outputs in ``tmp_path`` and compare each with the committed
    file; the subcommands run, in order."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "results").symlink_to(ROOT / "results")  # the committed records, named as the Makefile names them
    commands = make_commands(target, f"RUNS_DIR={tmp_path / 'no-runs'}", *settings)
    for command in commands:
        written: list[tuple[Path, Path]] = []  # (committed file, the file the command wrote)
        if "--output" in command:
            output = command.index("--output") + 1
            committed, command[output] = ROOT / command[output], str(tmp_path / Path(command[output]).name)
            written.append((committed, Path(command[output])))
            kept = committed.with_suffix(".json")  # the figures a table keeps beside it, read and written back
            if kept.is_file():
                shutil.copyfile(kept, Path(command[output]).with_suffix(".json"))
                written.append((kept, Path(command[output]).with_suffix(".json")))
        with contextlib.chdir(work):  # in this process: the CLI as the console entry runs it, imported once
            try:
                nlgkit_command(command[command.index("nlgkit") + 1:])
            except SystemExit as exc:
                raise AssertionError(f"{shlex.join(command[1:])} failed with exit code {exc.code} (its error "
                                     "line is in the captured stderr)") from None
        for committed, path in written:
            assert path.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8"), (
                f"{committed.relative_to(ROOT)} is not what `make {target}` writes from the committed files")
            # its figures (TABLE_*.png): the same ones, so none is left over from runs the table no longer shows
            figures = [sorted(p.name for p in where.parent.glob(f"{where.stem}_*.png")) for where in (committed, path)]
            assert figures[0] == figures[1], f"{committed.relative_to(ROOT)}: figures {figures[0]} committed, " \
                                             f"{figures[1]} written"
    return [name_of(command) for command in commands]


def name_of(command: list[str]) -> str:
    """The subcommand: ``pappas`` of ``python -m nlgkit reproduce pappas …``, ``prepare`` of ``… prepare …``."""
    words = command[command.index("-m") + 1:]
    if words[0] == "nlgkit" and words[1] == "reproduce":
        return words[2]
    return words[1]


@needs_make
def test_plain_pappas_report_writes_the_committed_tables(tmp_path: Path) -> None:
    """Plain `make pappas-report` (the Makefile's defaults are the committed table's settings)."""
    assert check_regenerates("pappas-report", tmp_path) == ["pappas", "log-summary"]


@needs_make
def test_pappas_sizes_given_keep_their_meaning() -> None:
    """Sizes passed on the command line run seed 1 only, unless seeds are passed too, then at every size."""
    runs = " ".join(" ".join(command) for command in make_commands("pappas-report", "PAPPAS_SIZES=2000 8000 32000"))
    assert "pappas_bpe32000_joint " in runs and "_seed2" not in runs
    runs = " ".join(" ".join(command) for command in make_commands("pappas-report", "PAPPAS_SIZES=2000",
                                                                    "PAPPAS_SEEDS=1 2"))
    assert "pappas_bpe2000_tied_seed2" in runs and "pappas_bpe8000_learned " not in runs


@needs_make
def test_tokarchuk_report_regenerates_from_the_records(tmp_path: Path) -> None:
    """`make tokarchuk-report` on a clean clone: it reads the five records alone (no data directory: each keeps its
    training words' counts for Fig. 3), whose configs name no file outside the repository."""
    assert check_regenerates("tokarchuk-report", tmp_path) == ["tokarchuk", "log-summary"]


@needs_make
def test_table1_report_regenerates_from_the_kept_figures(tmp_path: Path) -> None:
    """Table 1's runs were never archived: `make table1-report` re-emits results/table1.json's figures, each row
    marked unrecorded in the table itself, and writes the JSON back unchanged."""
    assert check_regenerates("table1-report", tmp_path) == ["table1"]
    table = (ROOT / "results" / "table1.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith(("| tell |", "| attend |"))]
    assert len(rows) == 6 and all("| unrecorded; " in row for row in rows)


@needs_make
def test_table2_report_regenerates_tables_2_and_4_from_the_records(tmp_path: Path) -> None:
    """`make table2-report`: Tables 2 and 4 (with Fig. 2) and the runs' logs from the weightless records in
    results/runs alone."""
    assert check_regenerates("table2-report", tmp_path) == ["table2", "table4", "log-summary"]
    recorded = sorted(path.parent.name for path in (ROOT / "results" / "runs").glob("multi30k_*/record.json")
                      if not path.parent.name.endswith(("_fp32", "_bf16")))  # the precision check's runs
    table2 = (ROOT / "results" / "table2.md").read_text(encoding="utf-8")
    run_rows = [line for line in table2.splitlines() if line.startswith("| Multi30K") and "mean of" not in line]
    assert sorted(line.rsplit("|", 2)[-2].strip().split("/")[-1] for line in run_rows) == recorded
    assert "unrecorded" not in table2
    table4 = (ROOT / "results" / "table4.md").read_text(encoding="utf-8")
    fig2 = table4[table4.index("## Fig. 2"):]
    assert sorted(line.split("`")[1] for line in fig2.splitlines() if line.startswith("| `")) == recorded
    logs = (ROOT / "results" / "table2_runs.md").read_text(encoding="utf-8")
    assert sorted(name for name in recorded if f"Read from its record `results/runs/{name}`" in logs) == recorded


@needs_make
def test_hirasawa_report_regenerates_from_the_records(tmp_path: Path) -> None:
    """`make hirasawa-report`: Tables 3–4 (BLEU and METEOR from the kept outputs), the bootstrap and Fig. 1."""
    assert check_regenerates("hirasawa-report", tmp_path) == ["hirasawa"]


@needs_make
def test_table2_missing_names_the_runs_without_a_finished_record() -> None:
    """`make table2-missing` (what is left to train, scripts/table2_on_gpu.sh's default runs): every Table 2 run
    of the Makefile whose committed record is absent or unfinished, and no other."""
    listed = subprocess.run(["make", "-s", "-C", str(ROOT), "-o", ".venv/.installed-stamp", "table2-missing"],
                            capture_output=True, text=True, check=True).stdout.split()
    runs = subprocess.run(["make", "-s", "-C", str(ROOT), "-o", ".venv/.installed-stamp", "--eval",
                           "print-runs:\n\t@echo $(TABLE2_RUNS)", "print-runs"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert len(runs) >= 18 and set(listed) <= set(runs)
    summaries = {run: ROOT / "results" / "runs" / run / "summary.json" for run in runs}
    finished = {run for run, path in summaries.items() if path.is_file() and '"finished": true' in path.read_text()}
    assert listed == [run for run in runs if run not in finished]

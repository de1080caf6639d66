"""The committed Pappas tables are what `make pappas-report` writes from the committed records alone.

A change to the report code that would change `results/pappas.md` or `results/pappas_runs.md` must regenerate them
(`make pappas-report RUNS_DIR=/nonexistent` with the settings of ``COMMITTED``), or this fails: a committed table
never silently stops being what its command produces.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from nlgkit.experiments.reproduce import main as reproduce

ROOT = Path(__file__).resolve().parents[1]
# The Makefile settings of the committed runs: 2k and 8k vocabularies, a second seed at 8k.
COMMITTED = ["PAPPAS_SIZES=2000 8000", "PAPPAS_SEEDS=1 2", "PAPPAS_SEED_SIZES=8000"]


def pappas_report_commands(runs_dir: Path) -> list[list[str]]:
    """The ``nlgkit.experiments.reproduce`` commands of ``make pappas-report`` (as ``make -n`` prints them), arguments only."""
    listing = subprocess.run(["make", "-s", "-n", "-C", str(ROOT), "pappas-report", f"RUNS_DIR={runs_dir}",
                              *COMMITTED], capture_output=True, text=True, check=True).stdout
    lines = listing.replace("\\\n", " ").splitlines()
    return [shlex.split(line)[3:] for line in lines if "-m nlgkit.experiments.reproduce" in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_committed_pappas_tables_regenerate_from_their_records(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    commands = pappas_report_commands(tmp_path / "no-runs")
    assert [command[0] for command in commands] == ["pappas", "log-summary"]
    monkeypatch.chdir(ROOT)  # the records are named relative to the repository, as the Makefile names them
    for command in commands:
        output = command.index("--output") + 1
        committed, command[output] = ROOT / command[output], str(tmp_path / Path(command[output]).name)
        reproduce(command)
        assert Path(command[output]).read_text(encoding="utf-8") == committed.read_text(encoding="utf-8"), (
            f"{committed.relative_to(ROOT)} is not what `make pappas-report` writes from results/runs")

"""The real entry point (`python -m nlgkit`): every subcommand listed, usage errors on one line."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def test_python_dash_m_lists_every_subcommand() -> None:
    result = subprocess.run([sys.executable, "-m", "nlgkit", "--help"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    for command in ("prepare", "bpe", "train", "translate", "evaluate"):
        assert command in result.stdout


@pytest.mark.parametrize("args,needle", [
    (["translate"], "Missing option '--model'"),
    (["train", "--bogus"], "No such option: --bogus"),
    (["nosuch"], "No such command 'nosuch'"),
    (["translate", "-m", "x", "--beam", "two"], "Invalid value for '--beam'"),
])
def test_usage_errors_are_one_line_from_the_real_entry_point(args: list[str], needle: str) -> None:
    result = subprocess.run([sys.executable, "-m", "nlgkit", *args], capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.stderr


def test_a_terminated_prepare_removes_its_staging_directory(multi30k_source: Path, tmp_path: Path) -> None:
    """SIGTERM (``kill``, a scheduler's time limit) while ``prepare`` writes its hidden staging sibling: the
    command ends with one line and 128 + 15, and leaves neither the output nor the staging directory (the default
    action ended the process at once and left ``.out.xxxx.tmp`` behind)."""
    process = subprocess.Popen([sys.executable, "-m", "nlgkit", "prepare", "multi30k", "--source",
                                str(multi30k_source), "--out", str(tmp_path / "out")],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(tmp_path.glob(".out.*.tmp")):  # the staging directory exists: prepare is writing into it
        assert process.poll() is None and time.monotonic() < deadline, "prepare ended before staging"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.strip().splitlines() == ["error: terminated"]
    assert [p.name for p in tmp_path.iterdir()] == []


def test_a_sigterm_the_process_ignores_stays_ignored() -> None:
    """``nohup``-style launchers may start a process with SIGTERM ignored: the command does not undo that."""
    from nlgkit.cli.common import terminate_as_interrupt

    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        terminate_as_interrupt()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)

"""The real entry point (`python -m nlgkit`): every subcommand listed, usage errors on one line."""

from __future__ import annotations

import subprocess
import sys

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

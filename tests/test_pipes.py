"""Inputs that are not regular files: bash's ``<(…)`` (a pipe at /dev/fd/N), /dev/stdin and FIFOs are read as files
are (sacrebleu, fairseq and OpenNMT read them); a directory, a missing path or a socket is a one-line error saying
which."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nlgkit.core.errors import DataError
from nlgkit.core.io import read_lines, require_readable
from nlgkit.generation.output import line_groups, read_text_input
from nlgkit.generation.translate import read_image_list

HYPS = "a dog runs on the grass .\ntwo men are talking .\na girl in a red coat .\n"
REFS = "a dog runs in the grass .\ntwo men talk .\na girl wearing a red coat .\n"


def fifo_with(tmp_path: Path, name: str, text: str) -> Path:
    """A named pipe that a thread fills with ``text`` once a reader opens it."""
    path = tmp_path / name
    os.mkfifo(path)

    def write() -> None:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    threading.Thread(target=write, daemon=True).start()
    return path


def test_a_fifo_reads_as_the_file_with_its_lines(tmp_path: Path) -> None:
    assert read_lines(fifo_with(tmp_path, "lines", HYPS)) == HYPS.splitlines()
    assert read_text_input(fifo_with(tmp_path, "input", REFS), print) == (REFS.splitlines(), str(tmp_path / "input"))
    groups = list(line_groups(fifo_with(tmp_path, "streamed", HYPS), 2, print))
    assert groups == [(1, HYPS.splitlines()[:2]), (3, HYPS.splitlines()[2:])]


def test_a_directory_a_missing_path_and_a_socket_are_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"^.*folder: a directory, not a phrase table$"):
        (tmp_path / "folder").mkdir()
        require_readable(tmp_path / "folder", "phrase table")
    with pytest.raises(DataError, match=r"^.*missing: file not found$"):
        read_lines(tmp_path / "missing")
    with pytest.raises(DataError, match="a directory, not a file"):
        list(line_groups(tmp_path / "folder", 2, print))
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(DataError, match=r"sock: not a file \(a socket or a block device\)"):
            read_text_input(tmp_path / "sock", print)
        with pytest.raises(DataError, match=r"sock: not an image list or directory \(a socket"):
            read_image_list(tmp_path / "sock")
    finally:
        server.close()


def nlgkit_in_bash(arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``nlgkit ARGUMENTS`` as bash runs it, so that ``<(…)`` is bash's own process substitution."""
    command = f"{shlex.quote(sys.executable)} -m nlgkit {arguments}"
    return subprocess.run(["bash", "-c", command], check=False, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_evaluate_scores_process_substitutions_as_the_files_they_print(tmp_path: Path) -> None:
    (tmp_path / "hyp.txt").write_text(HYPS, encoding="utf-8")
    (tmp_path / "ref.txt").write_text(REFS.upper(), encoding="utf-8")
    files = nlgkit_in_bash("evaluate --hyp hyp.txt --ref ref.txt --lowercase --json", tmp_path)
    piped = nlgkit_in_bash("evaluate --hyp <(cat hyp.txt) --ref <(tr A-Z a-z < ref.txt) --json", tmp_path)
    assert files.returncode == 0, files.stderr
    assert piped.returncode == 0, piped.stderr
    from_files, from_pipes = json.loads(files.stdout), json.loads(piped.stdout)
    assert from_files["bleu"]["score"] > 10
    assert {metric: from_pipes[metric]["score"] for metric in ("bleu", "chrf", "ter")} == \
        {metric: from_files[metric]["score"] for metric in ("bleu", "chrf", "ter")}
    folder = nlgkit_in_bash("evaluate --hyp . --ref ref.txt", tmp_path)
    assert folder.returncode == 2
    assert folder.stderr == "error: .: a directory, not a file\n"

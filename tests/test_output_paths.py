"""Where an output cannot go: never over one of the command's own inputs (written atomically, it would replace that
input with what was made from it), and a path that cannot be written is one line naming it, not a traceback naming a
temporary file."""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from nlgkit.cli.common import handle_errors, writes_to_terminal
from nlgkit.cli.main import app
from nlgkit.core.errors import DataError
from nlgkit.core.io import atomic_write, check_output, own_descriptor, written_in_place

TEXT = "ein Hund läuft .\nzwei Katzen schlafen .\n"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400", "NO_COLOR": "1"})


def one_line_error(result: Any, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    assert all(needle in lines[0] for needle in needles), lines[0]
    return lines[0]


@pytest.fixture()
def text(tmp_path: Path) -> Path:
    path = tmp_path / "src.de"
    path.write_text(TEXT, encoding="utf-8")
    return path


def test_an_output_that_is_an_input_by_any_name_is_refused(tmp_path: Path, text: Path) -> None:
    (tmp_path / "link.de").symlink_to(text)
    os.link(text, tmp_path / "hard.de")
    (tmp_path / "sub").mkdir()
    for output in (text, tmp_path / "link.de", tmp_path / "hard.de", tmp_path / "sub" / ".." / "src.de"):
        with pytest.raises(DataError, match=r"also given as --input; writing the output there would replace"):
            check_output(output, [("--target-prefix", None), ("--input", text)])


def test_other_outputs_and_standard_streams_pass(tmp_path: Path, text: Path) -> None:
    other = tmp_path / "other.de"
    other.write_text(TEXT, encoding="utf-8")  # the same bytes are another file
    for output in (other, tmp_path / "new.en", "-", None):
        check_output(output, [("--input", text), ("--codes", "-"), ("--constraints", None)])
    check_output(text, [("--input", "-"), ("--input", tmp_path / "missing.de")])


@pytest.mark.parametrize("argv", [
    ["translate", "--model", "{tmp}/no-run", "--input", "{text}", "--output", "{text}"],
    ["translate", "--model", "{tmp}/no-run", "--input", "{tmp}/other.de", "--target-prefix", "{text}",
     "--output", "{text}"],
    ["caption", "--model", "{tmp}/no-run", "--list", "{text}", "--output", "{text}"],
    ["bpe", "learn", "--input", "{tmp}/other.de", "--input", "{text}", "--output", "{text}", "--symbols", "5"],
    ["bpe", "apply", "--codes", "{tmp}/other.de", "--input", "{text}", "--output", "{text}"],
    ["embed", "random", "--vocab", "{text}", "--output", "{text}"],
    ["embed", "random", "--vocab", "{tmp}/src.vocab.txt", "--output", "{tmp}/src.safetensors"],
], ids=["translate", "translate-prefix", "caption", "bpe-learn", "bpe-apply", "embed", "embed-word-list"])
def test_commands_refuse_to_write_over_their_inputs_before_any_work(tmp_path: Path, text: Path,
                                                                    argv: list[str]) -> None:
    """Refused before the model or codes are read (the run named here does not even exist), and the input is
    left as it was."""
    (tmp_path / "other.de").write_text(TEXT, encoding="utf-8")
    (tmp_path / "src.vocab.txt").write_text("hund\t3\n", encoding="utf-8")
    before = {path: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    result = invoke(*(word.format(tmp=tmp_path, text=text) for word in argv))
    one_line_error(result, "also given as", "writing the output there would replace that input")
    assert {path: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()} == before


def test_an_output_below_a_file_or_over_a_folder_names_the_output(tmp_path: Path, text: Path) -> None:
    (tmp_path / "folder").mkdir()
    for output, reason in ((text / "out.txt", f"{text} is a file, not a folder"),
                           (tmp_path / "folder", "it is a directory")):
        with pytest.raises(DataError) as info, atomic_write(output) as handle:
            handle.write("x")
        assert str(info.value) == f"{output}: cannot be written ({reason})"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["folder", "src.de"]  # no temporary file left


def test_an_unwritable_output_is_refused_before_any_work(tmp_path: Path, text: Path) -> None:
    """translate finds out before it loads a model (the run named here does not exist), not after translating."""
    (tmp_path / "folder").mkdir()
    for output, reason in ((tmp_path / "folder", "it is a directory"),
                           (text / "sub" / "out.en", f"{text} is a file, not a folder")):
        with pytest.raises(DataError, match=re.escape(f"{output}: cannot be written ({reason})")):
            check_output(output)
        one_line_error(invoke("translate", "--model", str(tmp_path / "no-run"), "--input", str(text), "--output",
                              str(output)), f"{output}: cannot be written ({reason})")
    check_output(tmp_path / "new" / "deeper" / "out.en")  # folders that do not exist yet are made
    if os.geteuid() != 0:  # (root may write anywhere)
        (tmp_path / "locked").mkdir(mode=0o555)
        with pytest.raises(DataError, match="no permission to write in"):
            check_output(tmp_path / "locked" / "out.en")


def test_the_command_line_names_an_unwritable_output_in_one_line(tmp_path: Path, text: Path) -> None:
    assert invoke("bpe", "learn", "--input", str(text), "--output", str(tmp_path / "codes"), "--symbols",
                  "5").exit_code == 0
    one_line_error(invoke("bpe", "apply", "--codes", str(tmp_path / "codes"), "--input", str(text), "--output",
                          str(text / "pieces")), f"{text}/pieces: cannot be written ({text} is a file, not a folder)")


def test_any_os_error_is_one_line_not_a_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 text: Path) -> None:
    """A full disk or a read-only file system while writing (not only a missing or forbidden file); a folder that
    cannot be made because a file is in its way says so."""
    for error, expected in ((FileExistsError(errno.EEXIST, "File exists", str(text)),
                             f"error: {text}: a file, where a folder is needed"),
                            (FileExistsError(errno.EEXIST, "File exists", str(tmp_path)),
                             f"error: {tmp_path}: File exists"),
                            (OSError(errno.ENOSPC, "No space left on device", "out.txt"),
                             "error: out.txt: No space left on device"),
                            (OSError(errno.EROFS, "Read-only file system", "/ro/out.txt"),
                             "error: /ro/out.txt: Read-only file system"),
                            (NotADirectoryError(errno.ENOTDIR, "Not a directory", "a/b"), "error: a/b: Not a directory"),
                            (NotADirectoryError(errno.ENOTDIR, "Not a directory", str(text / "run" / "x")),
                             f"error: {text}: a file, where a folder is needed"),
                            (OSError("no file named"), "error: no file named")):
        @handle_errors
        def command(error: OSError = error) -> None:
            raise error

        with pytest.raises(typer.Exit) as exit_info:
            command()
        assert exit_info.value.exit_code == 2
        assert capsys.readouterr().err == expected + "\n"


def test_a_data_directory_below_a_file_is_one_line(tmp_path: Path, text: Path) -> None:
    one_line_error(invoke("prepare", "multi30k", "--pair", "de-en", "--out", str(text / "sub")),
                   f"{text}: a file, where a folder is needed")


@pytest.mark.parametrize("argv", [["reproduce", "table3"], ["reproduce", "table2", "{tmp}/no-run"],
                                  ["evaluate", "report", "{tmp}/no-run"], ["bench"]])
def test_long_commands_refuse_an_unwritable_output_as_they_parse_it(tmp_path: Path, text: Path,
                                                                   argv: list[str]) -> None:
    """Tables, reports and benchmarks write last, after minutes or hours: the option is checked when parsed (the
    run named here does not even exist, and the benchmark never starts)."""
    for output, reason in ((tmp_path, "it is a directory"), (text / "t.md", f"{text} is a file, not a folder")):
        result = invoke(*(word.format(tmp=tmp_path) for word in argv), "--output", str(output))
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert f"Invalid value for '--output': {output}: cannot be written ({reason})" in result.output


def test_a_named_pipe_is_written_into_not_replaced(tmp_path: Path) -> None:
    """bash's ``--output >(gzip > out.gz)`` and a FIFO: a rename over the pipe would leave its reader with nothing."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with atomic_write(fifo) as handle:
        handle.write("a dog runs .\n")
    reader.join(timeout=30)
    assert received == [b"a dog runs .\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert written_in_place(fifo) and written_in_place("/dev/null") and written_in_place("/dev/stdout")
    check_output("/dev/stdout", [("--input", "/dev/stdin")])  # (may be one terminal: still nothing replaced)


def test_a_descriptor_is_written_through_so_its_offset_moves_on(tmp_path: Path) -> None:
    """``--output /dev/stdout`` with standard output redirected to a file: the output lands where the shell's next
    line would have, and the shell's next line after it (neither the file emptied nor the link replaced)."""
    log = tmp_path / "log"
    with open(log, "w", encoding="utf-8") as shell:
        shell.write("before\n")
        shell.flush()
        name = f"/dev/fd/{shell.fileno()}"
        assert own_descriptor(name) == shell.fileno() and own_descriptor(f"/proc/self/fd/{shell.fileno()}") == \
            shell.fileno() and own_descriptor("/dev/stdout") == 1 and own_descriptor(log) is None
        with atomic_write(name) as handle:
            handle.write("a dog runs .\n")
        shell.write("after\n")
    assert log.read_text(encoding="utf-8") == "before\na dog runs .\nafter\n"
    assert os.path.islink("/dev/stdout") and os.readlink("/dev/stdout") == "/proc/self/fd/1"


def test_a_link_to_a_file_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("old\n", encoding="utf-8")
    (tmp_path / "link.txt").symlink_to("real.txt")
    assert not written_in_place(tmp_path / "link.txt")
    with atomic_write(tmp_path / "link.txt") as handle:
        handle.write("new\n")
    assert os.readlink(tmp_path / "link.txt") == "real.txt"
    assert (tmp_path / "real.txt").read_text(encoding="utf-8") == "new\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_a_terminal_is_told_from_files_pipes_and_the_null_device(tmp_path: Path) -> None:
    """The progress bar's question (``writes_to_terminal``): a terminal by any name, its own or through one of the
    process's descriptors; never a file, a pipe or ``/dev/null`` (a character device, but no terminal)."""
    leader, follower = os.openpty()
    try:
        assert writes_to_terminal(Path(os.ttyname(follower)))
        assert writes_to_terminal(Path(f"/dev/fd/{follower}"))
    finally:
        os.close(leader)
        os.close(follower)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "file").touch()
    for output in (Path("/dev/null"), fifo, tmp_path / "file", tmp_path / "not_yet"):
        assert not writes_to_terminal(output)

"""Inputs and outputs that fail as they are read or written: a closed standard stream, a truncated or false ``.gz``,
a full disk, a directory given as a file, an empty output path. Each is one ``error:`` line naming the file or
stream, exit 2, no traceback, and no output or temporary file left behind."""

from __future__ import annotations

import errno
import gzip
import io
import os
import shlex
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from nlgkit.cli import common
from nlgkit.cli.common import end_at_once, handle_errors, output_path, writable_output, writes_to_terminal
from nlgkit.cli.main import app
from nlgkit.core.errors import DataError
from nlgkit.core.io import atomic_write, read_json, read_lines, require_file
from nlgkit.generation.output import answered_lines, line_groups, read_text_input, write_lines

TEXT = "a dog runs on the grass .\ntwo men are talking .\na girl in a red coat .\n"
TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "400", "NO_COLOR": "1"})


def one_line_error(result: Any, expected: str) -> None:
    """Exit 2 and exactly ``error: EXPECTED`` on stderr: one line, no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stderr == f"error: {expected}\n", result.stderr


def nlgkit_in_bash(arguments: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``nlgkit ARGUMENTS`` as bash runs it (its redirections: ``<&-``, ``>&-``, ``> /dev/full``)."""
    command = f"{shlex.quote(sys.executable)} -m nlgkit {arguments}"
    environment = {**os.environ, **env}
    return subprocess.run(["bash", "-c", command], check=False, cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={key: value for key, value in environment.items() if value != "unset"})


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    """``text.txt``, BPE ``codes`` learnt from it, a truncated ``trunc.gz`` and a ``fake.gz`` that is plain text."""
    (tmp_path / "text.txt").write_text(TEXT * 4, encoding="utf-8")  # (merges need pairs seen twice)
    assert invoke("bpe", "learn", "--input", str(tmp_path / "text.txt"), "--output", str(tmp_path / "codes"),
                  "--symbols", "5").exit_code == 0
    (tmp_path / "trunc.gz").write_bytes(gzip.compress(TEXT.encode() * 50)[:-30])
    (tmp_path / "fake.gz").write_text(TEXT, encoding="utf-8")
    return tmp_path


# 1. a standard stream closed (<&-, >&-): Python sets sys.stdin / sys.stdout to None


@pytest.mark.parametrize(("redirection", "arguments", "stream"), [
    ("<&-", "bpe apply --codes codes", "standard input"),  # (--input - : stdin)
    (">&-", "bpe apply --codes codes --input text.txt", "standard output"),
    (">&-", "evaluate --hyp text.txt --ref text.txt", "standard output"),  # (rich's table, to stdout)
], ids=["stdin", "stdout-lines", "stdout-table"])
def test_a_closed_standard_stream_is_one_line_naming_it(files: Path, redirection: str, arguments: str,
                                                        stream: str) -> None:
    result = nlgkit_in_bash(f"{arguments} {redirection}", files)
    assert (result.returncode, result.stderr) == (2, f"error: {stream}: closed\n")


def test_closed_streams_in_translates_reading_and_writing(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """translate's steps with stdin or stdout closed (a run is not needed to reach them): its progress-bar question
    (``sys.stdin.isatty()``, :func:`writes_to_terminal`) is "no terminal"; reading or writing the stream is the
    command's one line, for the whole input and for a stream alike."""
    @handle_errors
    def translate_stdin() -> None:
        assert not ((sys.stdin.isatty()) or writes_to_terminal(None))
        read_text_input(None, print)

    @handle_errors
    def stream_stdin() -> None:
        list(line_groups(None, 2, print))

    @handle_errors
    def translate_to_stdout() -> None:
        assert not writes_to_terminal(None)
        write_lines(["a dog ."], None)

    @handle_errors
    def stream_to_stdout() -> None:
        with answered_lines(None) as answer:
            answer(["a dog ."])

    for command, stream in ((translate_stdin, "stdin"), (stream_stdin, "stdin"), (translate_to_stdout, "stdout"),
                            (stream_to_stdout, "stdout")):
        with monkeypatch.context() as patch:
            patch.setattr(sys, stream, None)
            with pytest.raises(typer.Exit) as exit_info:
                command()
            assert getattr(sys, stream) is None  # as it was, once the command ended
        assert exit_info.value.exit_code == 2
        assert capsys.readouterr().err == f"error: standard {'input' if stream == 'stdin' else 'output'}: closed\n"
    with monkeypatch.context() as patch:  # (outside a command, the library's own readers and writers say so too)
        patch.setattr(sys, "stdout", None)
        with pytest.raises(DataError, match="^standard output: closed$"):
            write_lines(["a dog ."], None)
        assert not writes_to_terminal(None)


def test_a_command_that_does_not_use_a_closed_stream_runs(files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``translate -i IN -o OUT >&-`` wrote its file, then ended with a traceback: the end flushed sys.stdout,
    None. Now it ends as it should."""
    exits: list[int] = []
    monkeypatch.setattr(common.os, "_exit", exits.append)
    monkeypatch.setattr(sys, "stdout", None)
    end_at_once(0, ["translate", "-i", "in.txt", "-o", "out.txt"])
    assert exits == [0]
    result = nlgkit_in_bash("bpe apply --codes codes --input text.txt --output pieces.txt >&-", files)
    assert (result.returncode, result.stderr) == (0, "")
    assert (files / "pieces.txt").read_text(encoding="utf-8").count("\n") == 12


# 2. and 3. a truncated gzip file, a .gz that is not gzip, corrupt compressed data


def test_a_truncated_or_false_gzip_file_is_named(files: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.gz"
    compressed = bytearray(gzip.compress(TEXT.encode() * 50))
    compressed[20:40] = b"\xff" * 20  # (a deflate block that cannot be decoded: a zlib.error)
    corrupt.write_bytes(bytes(compressed))
    with pytest.raises(DataError) as truncated:
        read_lines(files / "trunc.gz")
    assert str(truncated.value) == f"{files}/trunc.gz: unreadable ({TRUNCATED})"
    with pytest.raises(DataError) as fake:
        read_lines(files / "fake.gz")
    assert str(fake.value) == f"{files}/fake.gz: unreadable (Not a gzipped file (b'a '))"
    with pytest.raises(DataError, match=r"^.*corrupt\.gz: unreadable \(.+\)$"):
        read_lines(corrupt)


@pytest.mark.parametrize("name", ["trunc.gz", "fake.gz"])
@pytest.mark.parametrize("argv", [
    ["bpe", "learn", "--input", "{input}", "--output", "{tmp}/out.codes", "--symbols", "5"],
    ["evaluate", "--hyp", "{input}", "--ref", "{tmp}/text.txt"],
    ["embed", "train", "--method", "word2vec", "--corpus", "{input}", "--output", "{tmp}/out.safetensors"],
], ids=["bpe-learn", "evaluate", "embed-train"])
def test_commands_name_a_gzip_input_they_cannot_read(files: Path, argv: list[str], name: str) -> None:
    """Was ``error: interrupted`` (exit 130: click's word for an EOFError) or ``error: Not a gzipped file``, with
    no file named."""
    before = leftovers(files)
    result = invoke(*(word.format(input=files / name, tmp=files) for word in argv))
    reason = TRUNCATED if name == "trunc.gz" else "Not a gzipped file (b'a ')"
    one_line_error(result, f"{files / name}: unreadable ({reason})")
    assert leftovers(files) == before  # no output, no temporary file


def test_prepare_names_a_truncated_corpus_side(files: Path, tmp_path: Path) -> None:
    """``prepare parallel`` reads each side with ``read_lines`` and its wording, as every other reader does."""
    for split in ("train", "valid", "test"):
        for lang in ("de", "en"):
            (tmp_path / f"{split}.{lang}").write_text(TEXT, encoding="utf-8")
    (tmp_path / "train.de").unlink()
    (tmp_path / "train.de.gz").write_bytes((files / "trunc.gz").read_bytes())
    result = invoke("prepare", "parallel", "--train", f"{tmp_path}/train", "--valid", f"{tmp_path}/valid",
                    "--test", f"{tmp_path}/test", "--src", "de", "--tgt", "en", "--tokenizer", "none",
                    "--out", f"{tmp_path}/data")
    one_line_error(result, f"{tmp_path}/train.de.gz: unreadable ({TRUNCATED})")
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(("error", "expected"), [
    (EOFError(TRUNCATED), f"unexpected end of input ({TRUNCATED})"),
    (EOFError(), "unexpected end of input (EOFError)"),
    (zlib.error("Error -3 while decompressing data: invalid block type"),
     "corrupt compressed input (Error -3 while decompressing data: invalid block type)"),
])
def test_a_stray_eof_or_zlib_error_is_not_an_interruption(capsys: pytest.CaptureFixture[str], error: Exception,
                                                          expected: str) -> None:
    @handle_errors
    def command() -> None:
        raise error

    with pytest.raises(typer.Exit) as exit_info:
        command()
    assert exit_info.value.exit_code == 2
    assert capsys.readouterr().err == f"error: {expected}\n"


# 4. a full disk, an I/O error: the output named, atomicity kept


def no_space() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("where", ["block", "flush", "fsync"])
def test_a_full_disk_names_the_output_and_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              where: str) -> None:
    """The disk fills while the block writes, or as the file is flushed or synced: the error names the output (not
    an errno alone, nor the temporary file), the temporary file is removed and the old output is left whole."""
    output = tmp_path / "out.txt"
    output.write_text("old\n", encoding="utf-8")

    def refuse(*_: Any) -> None:
        raise no_space()

    if where == "fsync":
        monkeypatch.setattr("nlgkit.core.io.os.fsync", refuse)
    with pytest.raises(DataError) as info, atomic_write(output) as handle:
        handle.write("new\n")
        if where == "block":
            refuse()
        elif where == "flush":
            monkeypatch.setattr(handle, "flush", refuse)
    assert str(info.value) == f"{output}: cannot be written (No space left on device)"
    assert leftovers(tmp_path) == ["out.txt"] and output.read_text(encoding="utf-8") == "old\n"


def test_another_files_error_in_the_block_is_left_as_it_is(tmp_path: Path) -> None:
    """An error naming another file (an input that vanished) is that file's, not the output's."""
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", str(tmp_path / "input.txt"))
    with pytest.raises(FileNotFoundError) as info, atomic_write(tmp_path / "out.txt") as handle:
        handle.write("x")
        raise missing
    assert info.value is missing and leftovers(tmp_path) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_device_is_named(files: Path) -> None:
    with pytest.raises(DataError, match=r"^/dev/full: cannot be written \(No space left on device\)$"), \
            atomic_write("/dev/full") as handle:
        handle.write("x" * 10)
    for argv in (["bpe", "apply", "--codes", "codes", "--input", "text.txt", "--output", "/dev/full"],
                 ["bpe", "learn", "--input", "text.txt", "--output", "/dev/full", "--symbols", "5"]):
        one_line_error(invoke(*(str(files / word) if word in ("codes", "text.txt") else word for word in argv)),
                       "/dev/full: cannot be written (No space left on device)")


def test_a_file_of_proc_is_named(files: Path) -> None:
    """``-o /proc/version``: an I/O error as root; no permission to write to it otherwise. Named either way."""
    result = invoke("bpe", "apply", "--codes", str(files / "codes"), "--input", str(files / "text.txt"),
                    "--output", "/proc/version")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith("error: /proc/version: cannot be written (") and result.stderr.count("\n") == 1


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("arguments", ["bpe apply --codes codes --input text.txt",
                                       "evaluate --hyp text.txt --ref text.txt"], ids=["bpe-apply", "evaluate"])
def test_standard_output_on_a_full_device_is_named(files: Path, arguments: str, buffered: bool) -> None:
    """``> /dev/full``: one line naming standard output (buffered, the interpreter's last flush used to fail again:
    "Exception ignored", exit 120)."""
    result = nlgkit_in_bash(f"{arguments} > /dev/full", files, PYTHONUNBUFFERED="unset" if buffered else "1")
    assert (result.returncode, result.stderr) == (
        2, "error: standard output: cannot be written (No space left on device)\n")


class FullStream(io.StringIO):
    """A standard output whose device is full."""

    def write(self, text: str) -> int:
        raise no_space()

    def flush(self) -> None:
        raise no_space()


def answer_one() -> None:
    with answered_lines(None) as answer:
        answer(["a dog ."])


@pytest.mark.parametrize("writer", [lambda: write_lines(["a dog ."], None), answer_one],
                         ids=["write_lines", "answered_lines"])
def test_translates_writers_name_standard_output(monkeypatch: pytest.MonkeyPatch,
                                                 writer: Callable[[], None]) -> None:
    """translate's and caption's line writers, as a library (no command around them to name the stream)."""
    monkeypatch.setattr(sys, "stdout", FullStream())
    with pytest.raises(DataError, match=r"^standard output: cannot be written \(No space left on device\)$"):
        writer()


def test_a_closed_pipe_is_still_not_an_error(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``nlgkit … | head``: the reader stopped; exit 1 and no message, as before standard output was named."""
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    @handle_errors
    def command() -> None:
        print("a dog .")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # (handle_errors closes it)
    with pytest.raises(typer.Exit) as exit_info:
        command()
    assert exit_info.value.exit_code == 1


# 5. a directory where a file is expected


def test_a_directory_is_named_as_one_not_as_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    with pytest.raises(DataError, match=r"^.*folder: a directory, not a file$"):
        read_json(tmp_path / "folder")
    with pytest.raises(DataError, match=r"^.*folder: a directory, not a codes file$"):
        require_file(tmp_path / "folder", "codes file")
    with pytest.raises(DataError, match=r"^.*missing: codes file not found$"):
        require_file(tmp_path / "missing", "codes file")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(DataError, match=r"^.*fifo: a pipe or a device, where a codes file is needed$"):
        require_file(tmp_path / "fifo", "codes file")
    (tmp_path / "codes").write_text("a b\n", encoding="utf-8")
    require_file(tmp_path / "codes", "codes file")


# 6. an empty output path


def test_an_empty_output_path_is_refused_as_one(tmp_path: Path) -> None:
    """``--output ""`` was ``.: cannot be written (it is a directory)``."""
    for check in (writable_output, output_path):
        with pytest.raises(typer.BadParameter, match="empty path ''"):
            check("")
    assert output_path("out.txt") == Path("out.txt") and writable_output(str(tmp_path / "t.md"))
    result = invoke("reproduce", "table3", "--output", "")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Invalid value for '--output': empty path ''" in result.output

    parsed = typer.Typer()

    @parsed.command()
    def command(output: Path = typer.Option(..., parser=output_path)) -> None:  # noqa: B008 - typer's own idiom
        print(output)

    refused = CliRunner().invoke(parsed, ["--output", ""])
    assert refused.exit_code == 2 and "empty path ''" in refused.output


def test_a_byte_order_mark_is_not_part_of_the_first_line() -> None:
    """Kept, it joined the first word of a prepared corpus (a vocabulary entry "\ufeffa") and the first path of a
    list; only a mark at the very start is one."""
    from nlgkit.core.io import decode_lines

    assert decode_lines(b"\xef\xbb\xbfa dog\r\ntwo cats\n", "x") == ["a dog", "two cats"]
    assert decode_lines("a\n\ufeffb\n".encode(), "x") == ["a", "\ufeffb"]

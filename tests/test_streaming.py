"""``translate_input``: whole and streamed input give the same lines, each with its own per-line values; a per-line
file of another length is an error naming it, and an output file is then not written."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from nlgkit.core.errors import DataError
from nlgkit.generation.streaming import PerLine, translate_input
from nlgkit.generation.translate import Translator


class Echo(Translator):
    """A translator without a model: each output line shows its input line's number, text and per-line values."""

    def __init__(self) -> None:  # (no run to load)
        self.calls: list[tuple[int, int]] = []  # (first line number, group size)

    def lines(self, lines: list[str], name: str = "<stdin>", first_number: int = 1,
              images: Sequence[Path] | None = None, prefixes: Sequence[str] | None = None,
              constraints: Sequence[str] | None = None, constraints_name: str = "constraints",
              prefixes_name: str = "target prefix") -> list[str]:
        self.calls.append((first_number, len(lines)))
        def value(values: Sequence[Any] | None, i: int) -> str:
            return "-" if values is None else str(values[i])
        return [f"{first_number + i}|{line}|{value(prefixes, i)}|{value(constraints, i)}|{value(images, i)}"
                for i, line in enumerate(lines)]


def files(tmp_path: Path, count: int) -> dict[str, PerLine]:
    return {"prefixes": PerLine("--target-prefix", tmp_path / "p", [f"p{i}" for i in range(1, count + 1)]),
            "constraints": PerLine("--constraints", tmp_path / "c", [f"c{i}" for i in range(1, count + 1)]),
            "images": PerLine("--images", tmp_path / "i", [Path(f"{i}.jpg") for i in range(1, count + 1)], "images")}


def test_streamed_groups_equal_the_whole_input(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(1, 8)), encoding="utf-8")
    outputs = {}
    for buffer_size in (0, 3, 7, 10):
        echo, out = Echo(), tmp_path / f"out{buffer_size}.txt"
        assert translate_input(echo, source, out, print, buffer_size=buffer_size, **files(tmp_path, 7)) == 7
        outputs[buffer_size] = out.read_text(encoding="utf-8")
        assert echo.calls == {0: [(1, 7)], 3: [(1, 3), (4, 3), (7, 1)], 7: [(1, 7)], 10: [(1, 7)]}[buffer_size]
    assert outputs[0].splitlines()[4] == "5|line 5|p5|c5|5.jpg"
    assert outputs[0] == outputs[3] == outputs[7] == outputs[10]
    echo = Echo()
    assert translate_input(echo, source, tmp_path / "plain.txt", print) == 7
    assert (tmp_path / "plain.txt").read_text(encoding="utf-8").splitlines()[0] == "1|line 1|-|-|-"


@pytest.mark.parametrize("key", ["prefixes", "constraints", "images"])
@pytest.mark.parametrize("buffer_size", [0, 3])
@pytest.mark.parametrize("count", [6, 8])
def test_a_file_of_another_length_is_named_and_nothing_is_written(tmp_path: Path, key: str, buffer_size: int,
                                                                  count: int) -> None:
    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {i}\n" for i in range(1, 8)), encoding="utf-8")
    given = files(tmp_path, 7)
    given[key] = files(tmp_path, count)[key]
    out = tmp_path / "out.txt"
    unit = "images" if key == "images" else "lines"
    if buffer_size and count < 7:  # streamed: the group that runs out of values
        expected = f"{given[key].label}: {count} {unit}, fewer than the lines of {source}"
    else:
        expected = f"{given[key].label}: {count} {unit} for the 7 lines of {source}"
    with pytest.raises(DataError) as raised:
        translate_input(Echo(), source, out, print, buffer_size=buffer_size, **given)
    assert str(raised.value) == expected
    assert not out.exists()


def test_streamed_stdout_gets_each_group_before_the_next_is_searched(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a\nb\nc\n", encoding="utf-8")
    written = []

    class Watching(Echo):
        def lines(self, lines: list[str], *args: Any, **kwargs: Any) -> list[str]:
            written.append(capsys.readouterr().out)  # what stdout holds when this group's search starts
            return super().lines(lines, *args, **kwargs)

    assert translate_input(Watching(), source, None, print, buffer_size=2) == 3
    assert written == ["", "1|a|-|-|-\n2|b|-|-|-\n"]
    assert capsys.readouterr().out == "3|c|-|-|-\n"


def test_a_pipe_named_by_output_gets_each_group_before_the_next_is_searched(tmp_path: Path) -> None:
    """``--buffer-size N --output >(…)`` answers as stdout does: the pipe holds each group's lines before the next
    group is searched (a file output is written whole at the end, as above)."""
    source = tmp_path / "in.txt"
    source.write_text("a\nb\nc\n", encoding="utf-8")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # (opened first, so that the writer's open does not wait)
    arrived = []

    def pending() -> bytes:
        try:
            return os.read(reader, 1 << 16)
        except BlockingIOError:  # a writer, nothing written yet
            return b""

    class Watching(Echo):
        def lines(self, lines: list[str], *args: Any, **kwargs: Any) -> list[str]:
            arrived.append(pending())  # what the pipe holds when this group's search starts
            return super().lines(lines, *args, **kwargs)

    try:
        assert translate_input(Watching(), source, fifo, print, buffer_size=2) == 3
        arrived.append(pending())
    finally:
        os.close(reader)
    assert arrived == [b"", b"1|a|-|-|-\n2|b|-|-|-\n", b"3|c|-|-|-\n"]

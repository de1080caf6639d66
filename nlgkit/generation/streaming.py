"""A whole input translated as ``nlgkit translate`` does it: read at once, or streamed in groups answered as they
complete, with the files that give each input line more (its target prefix, its constraint phrases, its image)
kept line for line with it.

A file of another length than the input is a :class:`DataError` naming the file, and an output file is then not
written at all (stdout, a pipe, has its finished groups already). Streamed, a file shorter than the input shows at
the group it runs out in, a longer one only at the input's end: the input's length is not known before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlgkit.core.errors import DataError
from nlgkit.generation.output import answered_lines, line_groups, read_text_input, write_lines
from nlgkit.generation.translate import Translator

if TYPE_CHECKING:  # (CTranslate2 is an optional extra)
    from nlgkit.generation.ct2 import CT2Translator


@dataclass(frozen=True)
class PerLine:
    """A file with one value per input line (``--target-prefix``, ``--constraints``: text lines; ``--images``:
    image paths), named in errors by its flag and path."""

    flag: str
    path: Path
    values: Sequence[Any]
    unit: str = "lines"

    @property
    def label(self) -> str:
        return f"{self.flag} {self.path}"

    def group(self, first: int, size: int, name: str, whole: bool) -> Sequence[Any]:
        """The values of input lines ``first`` … ``first + size − 1`` of ``name``; ``whole``: those are all of its
        lines, so that the file must have exactly as many."""
        if whole:
            self.check_length(size, name)
        values = self.values[first - 1 : first - 1 + size]
        if len(values) != size:
            raise DataError(f"{self.label}: {len(self.values)} {self.unit}, fewer than the lines of {name}")
        return values

    def check_length(self, count: int, name: str) -> None:
        """One value for each of the ``count`` lines of ``name``, or a DataError naming this file."""
        if len(self.values) != count:
            raise DataError(f"{self.label}: {len(self.values)} {self.unit} for the {count} lines of {name}")


def translate_input(translator: Translator | CT2Translator, source: Path | None, output: Path | None,
                    warn: Callable[[str], None], *, buffer_size: int = 0, prefixes: PerLine | None = None,
                    constraints: PerLine | None = None, images: PerLine | None = None) -> int:
    """Translate ``source`` (stdin when None) into ``output`` (stdout when None), one output line per input line
    (``nbest`` with n-best output), and return the number of input lines. ``buffer_size`` > 0 streams the input in
    groups of that many lines: each group is searched when complete and, on stdout or a stream ``output`` (a pipe,
    ``/dev/stdout``), written and flushed at once (an output file is still written whole, atomically, at the end).
    ``constraints``: nlgkit's search only."""
    name = str(source) if source is not None else "<stdin>"
    files = [file for file in (prefixes, constraints, images) if file is not None]

    def translated(group: list[str], first: int, whole: bool) -> list[str]:
        values = {file.flag: file.group(first, len(group), name, whole) for file in files}
        per_line: dict[str, Any] = {
            "images": values.get(images.flag) if images is not None else None,
            "prefixes": values.get(prefixes.flag) if prefixes is not None else None,
            "prefixes_name": prefixes.label if prefixes is not None else "target prefix"}
        if constraints is not None:
            if not isinstance(translator, Translator):
                raise DataError(f"{constraints.label}: lexical constraints need nlgkit's search (--engine torch)")
            per_line.update(constraints=values[constraints.flag], constraints_name=constraints.label)
        return translator.lines(group, name, first, **per_line)

    if buffer_size == 0:
        lines, _ = read_text_input(source, warn)
        write_lines(translated(lines, 1, whole=True), output)
        return len(lines)
    count = 0
    with answered_lines(output) as answer:  # stdout, a pipe: each group at once; a file: all of them at the end
        for first, group in line_groups(source, buffer_size, warn):
            answer(translated(group, first, whole=False))
            count = first - 1 + len(group)
        for file in files:  # a longer file shows only now (a shorter one stopped at its group)
            file.check_length(count, name)
    return count

"""Images captioned as ``nlgkit caption`` does it: a list read at once, or streamed in groups of ``--buffer-size``
paths captioned as they arrive (``find … | nlgkit caption --list - --buffer-size 8``).

Stdout or a stream output (a pipe, ``/dev/stdout``) gets each batch's lines as soon as it is captioned; an output
file is written whole, atomically, at the end, and not at all after an error. A file with a line per image
(``--constraints``, ``--target-prefix``) of another length than the images is an error naming it: before any work
when the list is read at once; streamed, a shorter one at the group it runs out in, a longer one at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgkit.core.errors import DataError
from nlgkit.core.io import check_output
from nlgkit.generation.caption import CaptionResult, caption_images, check_caption_options, image_encoder
from nlgkit.generation.decode import once
from nlgkit.generation.output import SearchOptions, answered_lines, line_groups, read_text_input
from nlgkit.generation.targets import TargetReader
from nlgkit.runs.loading import TrainedRun


@dataclass(frozen=True)
class PerImage:
    """The lines of a file with one line per image, named in errors by ``label`` (its flag and path)."""

    label: str
    lines: Sequence[str]

    def take(self, done: int, count: int) -> Sequence[str]:
        """The lines of images ``done`` … ``done + count − 1``."""
        if len(self.lines) < done + count:
            raise DataError(f"{self.label}: {len(self.lines)} lines, fewer than the images")
        return self.lines[done:done + count]

    def check(self, images: int) -> None:
        if len(self.lines) != images:
            raise DataError(f"{self.label}: {len(self.lines)} lines for {images} images")


def image_groups(images: Sequence[str], listing: Path | None, size: int,
                 warn: Callable[[str], None]) -> Iterator[list[str]]:
    """The image paths to caption, in groups of up to ``size`` (0: one group of all): the arguments first, then the
    non-blank lines of ``listing`` (``-``: stdin), read as they arrive when ``size`` > 0."""
    source = None if listing is None or str(listing) == "-" else listing
    if size == 0:
        lines = read_text_input(source, warn)[0] if listing is not None else []
        yield [*images, *(line.strip() for line in lines if line.strip())]
        return
    for start in range(0, len(images), size):
        yield list(images[start:start + size])
    if listing is not None:
        for _, lines in line_groups(source, size, warn):
            if group := [line.strip() for line in lines if line.strip()]:
                yield group


def caption_input(run: TrainedRun, groups: Iterable[list[str]], options: SearchOptions, output: Path | None,
                  render: Callable[[int, Sequence[CaptionResult]], list[str]], *, whole: bool,
                  constraints: PerImage | None = None, prefixes: PerImage | None = None,
                  **caption_options: Any) -> list[CaptionResult]:
    """Caption each group of ``groups`` into ``output`` (stdout when None): ``render(first, results)`` gives the
    lines of consecutive results, ``results[0]`` being image ``first``. ``whole``: ``groups`` is one group of every
    image (the list read at once). ``caption_options`` go to :func:`caption_images` (attention, warnings, progress).
    Return every image's result, failed ones included."""
    check_caption_options(run, caption_options.get("attention_dir"))  # before the first images arrive
    reader = TargetReader(run.tgt_vocab, lambda: run.task.target_tokenizer(run.assets))
    per_image = [file for file in (constraints, prefixes) if file is not None]
    # the min_len warning is about the options, not an image: once for the stream, not once a group
    limit_note = once(caption_options.get("note") or caption_options.get("warn") or print)
    encoder = None
    results: list[CaptionResult] = []
    with answered_lines(output) as answer:  # stdout, a pipe: each batch at once; a file: all of them at the end
        for group in groups:
            done = len(results)
            if whole:
                for file in per_image:
                    file.check(len(group))
            if output is not None:  # (a listed image named as the output file would be replaced by it)
                check_output(output, [("an image", path) for path in group])
            if encoder is None:  # (built once, when the first images are known)
                encoder = image_encoder(run)
            results += caption_images(
                run, group, options, encoder=encoder, targets=reader, first_image=done,
                on_results=lambda first, batch: answer(render(first, batch)),
                constraints=None if constraints is None else constraints.take(done, len(group)),
                constraints_name=constraints.label if constraints is not None else "constraints",
                prefixes=None if prefixes is None else prefixes.take(done, len(group)),
                prefixes_name=prefixes.label if prefixes is not None else "target prefix", limit_note=limit_note,
                **caption_options)
        if not results:
            raise DataError("no images given (arguments or --list FILE)")
        for file in per_image:  # a longer file shows only now (a shorter one stopped at its group)
            file.check(len(results))
    return results

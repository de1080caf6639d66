"""``nlgkit bpe``: learn and apply subword models outside ``prepare`` (e.g. for your own pipelines)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import handle_errors
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import atomic_write, check_output, decode_lines, read_lines

app = typer.Typer(help="Learn or apply BPE (subword-nmt) and SentencePiece models on tokenised text.",
                  no_args_is_help=True)


def _input_lines(name: str) -> list[str]:
    if name == "-":
        return decode_lines(sys.stdin.buffer.read(), "<stdin>")
    return read_lines(name)


@app.command("learn")
@handle_errors
def learn_cmd(
    inputs: Annotated[list[Path], typer.Option("--input", help="tokenised text (repeat for several files)")],
    output: Annotated[Path, typer.Option("--output", help="codes file (bpe) or model file (spm) to write")],
    symbols: Annotated[int, typer.Option("--symbols", help="BPE merges or SentencePiece pieces")] = 10000,
    kind: Annotated[str, typer.Option("--type", help="bpe (subword-nmt) or spm (SentencePiece)")] = "bpe",
) -> None:
    """Learn a subword model from the given files."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.subword import SUBWORD_KINDS, learn

    if kind not in SUBWORD_KINDS:
        raise ConfigError(f"--type {kind!r}: expected one of {', '.join(SUBWORD_KINDS)}")
    if symbols <= 0:
        raise ConfigError(f"--symbols {symbols}: must be positive")
    check_output(output, [("--input", path) for path in inputs])
    texts = [read_lines(path) for path in inputs]
    if not any(line.strip() for text in texts for line in text):  # (the learners' own errors name no input)
        raise DataError(f"{', '.join(map(str, inputs))}: no text to learn from (empty or blank lines only)")
    learn(kind, (line for text in texts for line in text), output, symbols)
    typer.echo(f"wrote {output}", err=True)


@app.command("apply")
@handle_errors
def apply_cmd(
    codes: Annotated[Path, typer.Option("--codes", help="BPE codes or SentencePiece model (detected)")],
    source: Annotated[str, typer.Option("--input", help="tokenised text to segment (- = stdin)")] = "-",
    output: Annotated[str, typer.Option("--output", help="where to write the pieces (- = stdout)")] = "-",
) -> None:
    """Segment tokenised text, one sentence per line, pieces separated by spaces."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.subword import sniff_segmenter

    check_output(output, [("--input", source), ("--codes", codes)])
    segmenter = sniff_segmenter(codes)
    out_lines = [" ".join(segmenter.segment(line.split())) + "\n" for line in _input_lines(source)]
    if output == "-":
        sys.stdout.writelines(out_lines)
        sys.stdout.flush()
    else:
        with atomic_write(output) as handle:
            handle.writelines(out_lines)

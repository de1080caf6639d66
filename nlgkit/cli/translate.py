"""``nlgkit translate``: one output line per input line, in order, whatever the input.

Defined behaviour for awkward input (also in the README):
- an empty (or whitespace-only) line gives an empty output line;
- bytes that are not UTF-8 are replaced by U+FFFD (an unknown word) with a warning naming the line;
- a line longer than ``--max-input-tokens`` tokens is cut to that length, with a warning naming the line;
- an empty input gives an empty output.
With ``--nbest N`` (N > 1) each input gives N lines ``INDEX ||| hypothesis ||| score`` (Moses n-best format,
INDEX counted from 0), best first.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import handle_errors
from nlgkit.errors import DataError
from nlgkit.io import atomic_write, decode_lines


def read_input(path: Path | None) -> tuple[list[str], str]:
    """Lines of the input (stdin when ``path`` is None), decoding leniently with a warning per bad line."""
    name = str(path) if path else "<stdin>"
    if path is not None:
        if not path.is_file():
            raise DataError(f"{path}: file not found")
        raw = path.read_bytes()
    else:
        raw = sys.stdin.buffer.read()

    def warn(number: int) -> None:
        typer.echo(f"warning: {name}: line {number}: invalid UTF-8 replaced by U+FFFD", err=True)

    return decode_lines(raw, name, on_invalid=warn), name


@handle_errors
def translate(
    model: Annotated[Path, typer.Option("--model", "-m", envvar="NLGKIT_MODEL",
                                        help="Run directory written by `nlgkit train` (or $NLGKIT_MODEL)")],
    checkpoint: Annotated[str, typer.Option(help="best, last, or a checkpoint directory")] = "best",
    beam: Annotated[int | None, typer.Option(help="Beam size (1 = greedy); default from the run's [search]")] = None,
    nbest: Annotated[int | None, typer.Option(help="Hypotheses per input (Moses n-best format when > 1)")] = None,
    length_penalty: Annotated[float | None, typer.Option(help="Scores divided by length**this")] = None,
    max_len_a: Annotated[float | None, typer.Option(help="Output length limit: a * source length + b")] = None,
    max_len_b: Annotated[int | None, typer.Option(help="Output length limit: a * source length + b")] = None,
    max_len: Annotated[int, typer.Option(help="Absolute cap on output tokens (0 = only the a/b limit)")] = 0,
    batch_size: Annotated[int | None, typer.Option(help="Sentences per search batch")] = None,
    max_input_tokens: Annotated[int, typer.Option(help="Longer input lines are cut to this many tokens")] = 400,
    input: Annotated[Path | None, typer.Option("--input", "-i", help="Input file (default: stdin)")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Output file (default: stdout)")] = None,
    pretokenized: Annotated[bool, typer.Option(help="Input is already in the data directory's token form")] = False,
    detokenize: Annotated[bool, typer.Option(help="Detokenise output to the form of the training text")] = True,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N")] = "auto",
) -> None:
    """Translate text with a trained run (stdin → stdout by default)."""
    from nlgkit.inference import translate_ids
    from nlgkit.runs import load_trained

    if max_input_tokens <= 0:
        raise DataError(f"--max-input-tokens = {max_input_tokens}: must be positive")
    run = load_trained(model, checkpoint, device)
    search = run.config.search
    beam = beam or search.beam
    nbest = nbest or (search.nbest if search.nbest <= beam else 1)
    if beam <= 0 or nbest <= 0 or nbest > beam:
        raise DataError(f"--beam {beam} / --nbest {nbest}: need 1 <= nbest <= beam")
    lines, name = read_input(input)
    sources: list[list[int]] = []
    for number, line in enumerate(lines, start=1):
        tokens = line.split() if pretokenized else run.src_pipeline.encode(line)
        if len(tokens) > max_input_tokens:
            typer.echo(f"warning: {name}: line {number}: {len(tokens)} tokens, cut to {max_input_tokens}", err=True)
            tokens = tokens[:max_input_tokens]
        sources.append(run.src_vocab.encode(tokens))
    todo = [i for i, s in enumerate(sources) if s]
    found = translate_ids(
        run.model, [sources[i] for i in todo], run.tgt_vocab, beam=beam, nbest=nbest,
        length_penalty=search.length_penalty if length_penalty is None else length_penalty,
        max_len_a=search.max_len_a if max_len_a is None else max_len_a,
        max_len_b=search.max_len_b if max_len_b is None else max_len_b,
        max_len=max_len, batch_size=batch_size or search.batch_size, device=run.device,
    )
    results: list[list] = [[] for _ in sources]
    for i, hyps in zip(todo, found):
        results[i] = hyps

    def render(tokens: list[int]) -> str:
        words = run.tgt_vocab.decode(tokens)
        return run.tgt_pipeline.decode(words) if detokenize else " ".join(words)

    out_lines = []
    for index, hyps in enumerate(results):
        if nbest == 1:
            out_lines.append(render(hyps[0].tokens) if hyps else "")
        else:
            ranked = hyps or []
            for hyp in ranked:
                out_lines.append(f"{index} ||| {render(hyp.tokens)} ||| {hyp.score:.4f}")
            for _ in range(nbest - len(ranked)):
                out_lines.append(f"{index} |||  ||| -inf")
    text = "".join(line + "\n" for line in out_lines)
    if output is not None:
        with atomic_write(output) as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()

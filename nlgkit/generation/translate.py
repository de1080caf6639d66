"""Translating text lines with a trained run: tokenise like ``prepare``, search, detokenise.

Awkward input has defined behaviour: an empty (or whitespace-only) line gives an empty output line, and
a line longer than ``max_input_tokens`` tokens is cut to that length with a warning naming the line.
"""

from __future__ import annotations

from collections.abc import Callable

from nlgkit.errors import DataError
from nlgkit.generation.output import SearchOptions, output_lines
from nlgkit.inference import generate
from nlgkit.runs import TrainedRun


def translate_lines(run: TrainedRun, lines: list[str], options: SearchOptions, *, name: str = "<stdin>",
                    pretokenized: bool = False, detokenize: bool = True, max_input_tokens: int = 400,
                    warn: Callable[[str], None] = print) -> list[str]:
    """The output lines for ``lines``: one per input line (``nbest`` per line with n-best output)."""
    if run.config.task.type != "translation":
        raise DataError(f"{run.checkpoint}: a {run.config.task.type} model; `nlgkit translate` needs a "
                        f"translation model")
    if max_input_tokens <= 0:
        raise DataError(f"--max-input-tokens = {max_input_tokens}: must be positive")
    from nlgkit.data.tokenize import load_pipeline

    src_pipeline = load_pipeline(run.assets, run.config.data.src_lang)
    sources: list[list[int]] = []
    for number, line in enumerate(lines, start=1):
        tokens = line.split() if pretokenized else src_pipeline.encode(line)
        if len(tokens) > max_input_tokens:
            warn(f"{name}: line {number}: {len(tokens)} tokens, cut to {max_input_tokens}")
            tokens = tokens[:max_input_tokens]
        sources.append(run.src_vocab.encode(tokens))
    todo = [i for i, source in enumerate(sources) if source]
    found = generate(run.model, run.task, [sources[i] for i in todo], run.tgt_vocab, device=run.device,
                     **options.search_kwargs())
    results: list[list] = [[] for _ in sources]
    for i, hyps in zip(todo, found):
        results[i] = hyps
    detokenizer = run.detokenizer()

    def render(tokens: list[int]) -> str:
        words = run.tgt_vocab.decode(tokens)
        return detokenizer(words) if detokenize else " ".join(words)

    return output_lines(results, options.nbest, render)

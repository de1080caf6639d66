"""Search options, lenient input reading and output lines shared by ``translate`` and ``caption``.

Both commands promise one output line per input (``nbest`` lines with ``--nbest``), in input order,
whatever the input; this module is where that promise is kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlgkit.core.config import SearchConfig
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import (
    STREAM_NAMES,
    atomic_write,
    decode_lines,
    naming_write_errors,
    require_readable,
    standard_stream,
    written_in_place,
)
from nlgkit.generation.decode import ReferenceScore
from nlgkit.search import Hypothesis, Sampling

# Bounds of the search flags that no real use nears: past them lengths and beams overflow 32-bit tensors and
# length ** penalty overflows a float, as tracebacks from inside the search rather than a flag's error.
MAX_COUNT = 2**31 - 1
MAX_LENGTH_PENALTY = 10.0
# the command line's sampling options and the Sampling fields they set
SAMPLING_FLAGS = {"sampling_topk": "topk", "sampling_topp": "topp", "temperature": "temperature", "seed": "seed"}


@dataclass(frozen=True)
class SearchOptions:
    """The run's ``[search]`` section with the command line's overrides applied."""

    beam: int
    nbest: int
    length_penalty: float
    max_len_a: float
    max_len_b: int
    max_len: int = 0
    batch_size: int = 64
    min_len: int = 0
    no_repeat_ngram_size: int = 0
    no_unk: bool = False
    sampling: Sampling | None = None  # draw nbest outputs instead of searching a beam

    @classmethod
    def resolve(cls, defaults: SearchConfig, **overrides: float | None) -> SearchOptions:
        """``defaults`` with every override that is not None; nbest falls back to 1 when beam shrinks.

        ``sampling=True`` with ``sampling_topk``, ``sampling_topp``, ``temperature`` and ``seed`` (fairseq's
        flags) draws ``nbest`` samples per input; the beam does not apply."""
        given = {name: value for name, value in overrides.items() if value is not None}
        knobs = {SAMPLING_FLAGS[name]: given.pop(name) for name in list(given) if name in SAMPLING_FLAGS}
        sampling = Sampling(**knobs) if given.pop("sampling", False) else None  # type: ignore[arg-type]
        if knobs and sampling is None:
            flags = ", ".join(f"--{name.replace('_', '-')}" for name in SAMPLING_FLAGS if SAMPLING_FLAGS[name] in knobs)
            raise DataError(f"{flags}: only with --sampling")
        values = {f.name: getattr(defaults, f.name) for f in dataclasses.fields(defaults)}
        values.update(given)
        if "nbest" not in given and values["nbest"] > values["beam"]:
            values["nbest"] = 1
        options = cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values},
                      sampling=sampling)
        if sampling is not None and options.nbest <= 0:
            raise DataError(f"--nbest {options.nbest}: the number of samples must be positive")
        if sampling is None and (options.beam <= 0 or options.nbest <= 0 or options.nbest > options.beam):
            raise DataError(f"--beam {options.beam} / --nbest {options.nbest}: need 1 <= nbest <= beam")
        if options.batch_size <= 0:
            raise DataError(f"--batch-size {options.batch_size}: must be positive")
        for flag, number in (("--length-penalty", options.length_penalty), ("--max-len-a", options.max_len_a)):
            if not math.isfinite(number):  # (typer reads "nan" and "inf" as floats)
                raise DataError(f"{flag} {number}: must be a finite number")
        if abs(options.length_penalty) > MAX_LENGTH_PENALTY:  # length ** it must stay a float for any length
            raise DataError(f"--length-penalty {options.length_penalty}: must be within ±{MAX_LENGTH_PENALTY}")
        for flag, size in (("--beam", options.beam), ("--nbest", options.nbest), ("--batch-size", options.batch_size),
                           ("--min-len", options.min_len), ("--max-len", options.max_len),
                           ("--max-len-a", options.max_len_a), ("--max-len-b", options.max_len_b),
                           ("--no-repeat-ngram-size", options.no_repeat_ngram_size)):
            if abs(size) > MAX_COUNT:  # (a tensor of lengths or a beam this wide overflows before it could run)
                raise DataError(f"{flag} {size}: too large (at most {MAX_COUNT:,})")
        for flag, value in (("--min-len", options.min_len), ("--no-repeat-ngram-size", options.no_repeat_ngram_size),
                            ("--max-len", options.max_len), ("--max-len-a", options.max_len_a)):
            if value < 0:
                raise DataError(f"{flag} {value}: must be 0 or positive")
        options.check_min_len()
        return options

    def check_min_len(self) -> None:
        """A ``min_len`` above a length limit that holds for every input asks for outputs at least ``min_len`` and
        at most the limit long, which none can be: a ConfigError naming both. (A target prefix longer than the
        limit moves the cut past itself, but then the limit is not kept either.) A limit that depends on the source
        length is :func:`nlgkit.generation.decode.generate`'s to warn about."""
        if self.max_len > 0 and self.min_len > self.max_len:
            raise ConfigError(f"--min-len {self.min_len} is above --max-len {self.max_len}: no output can have at "
                              f"least {self.min_len} tokens and at most {_tokens(self.max_len)}")
        limit = max(1, self.max_len_b)  # (generate's limit a · length + b at a = 0, never under 1)
        if self.max_len_a == 0 and self.min_len > limit:
            raise ConfigError(f"--min-len {self.min_len} is above the length limit --max-len-b {self.max_len_b} "
                              f"(with --max-len-a 0): no output can have at least {self.min_len} tokens and at "
                              f"most {_tokens(limit)}")

    def search_kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # (asdict would unpack sampling)


def _tokens(count: int) -> str:
    return f"{count} token" + ("" if count == 1 else "s")


def read_text_input(path: Path | None, warn: Callable[[str], None]) -> tuple[list[str], str]:
    """Lines of the input (stdin when ``path`` is None), decoding leniently with a warning per bad line."""
    name = str(path) if path else "<stdin>"
    if path is not None:
        require_readable(path)
        raw = path.read_bytes()
    else:
        raw = standard_stream("stdin").buffer.read()
    return decode_lines(raw, name,
                        on_invalid=lambda number: warn(f"{name}: line {number}: invalid UTF-8 replaced by U+FFFD")), name


def _warn_invalid_utf8(warn: Callable[[str], None], where: str) -> Callable[[int], None]:
    return lambda _: warn(f"{where}: invalid UTF-8 replaced by U+FFFD")


def line_groups(path: Path | None, size: int, warn: Callable[[str], None]) -> Iterator[tuple[int, list[str]]]:
    """``(first line number, lines)`` groups of up to ``size`` lines, read as they arrive (stdin when ``path``
    is None): a group is handed on as soon as it is complete, so a pipe gets answers before its EOF."""
    name = str(path) if path else "<stdin>"
    if path is not None:
        require_readable(path)
    handle = open(path, "rb") if path is not None else standard_stream("stdin").buffer  # noqa: SIM115 - closed below
    try:
        group: list[str] = []
        number = first = 1
        for raw in iter(handle.readline, b""):
            group += decode_lines(raw, name, on_invalid=_warn_invalid_utf8(warn, f"{name}: line {number}"))
            number += 1
            if len(group) == size:
                yield first, group
                group, first = [], number
        if group:
            yield first, group
    finally:
        if path is not None:
            handle.close()


def cut_tokens(tokens: list[str], limit: int, warn: Callable[[str], None], where: str) -> list[str]:
    """``tokens``, cut to ``limit`` with a warning naming ``where`` (an over-long line still gets its output)."""
    if len(tokens) > limit:
        warn(f"{where}: {len(tokens)} tokens, cut to {limit}")
        return tokens[:limit]
    return tokens


def placed(sources: Sequence[object | None], found: Sequence[list[Hypothesis]]) -> list[list[Hypothesis]]:
    """``found`` (one list per source that is not None, in order) back at its sources' places; none elsewhere."""
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for i, hyps in zip([i for i, source in enumerate(sources) if source is not None], found, strict=True):
        results[i] = hyps
    return results


def output_lines(results: Sequence[list[Hypothesis]], nbest: int, render: Callable[[int, Hypothesis], str],
                 first_index: int = 0, extras: Sequence[Callable[[int, Hypothesis], str]] = ()) -> list[str]:
    """One line per input (empty when it has no hypothesis); with nbest > 1, Moses n-best lines
    ``INDEX ||| text ||| score`` (INDEX from ``first_index``, 0 for a whole input; best first, padded to nbest
    lines per input). ``render(i, hypothesis)`` writes a hypothesis of ``results[i]``; each of ``extras`` (its
    word alignment, its token scores) is added to each line as one more field `` ||| extra``, as Moses adds its
    alignment."""
    def last(i: int, hyp: Hypothesis | None) -> str:
        return "".join(f" ||| {extra(i, hyp) if hyp is not None else ''}" for extra in extras)

    lines = []
    for i, hyps in enumerate(results):
        if nbest == 1:
            lines.append(render(i, hyps[0]) + last(i, hyps[0]) if hyps else "")
            continue
        for hyp in hyps:
            lines.append(f"{first_index + i} ||| {render(i, hyp)} ||| {hyp.score:.4f}{last(i, hyp)}")
        lines.extend(f"{first_index + i} |||  ||| -inf{last(i, None)}" for _ in range(nbest - len(hyps)))
    return lines


def score_lines(scores: Sequence[ReferenceScore | None], token_scores: bool = False) -> list[str]:
    """``LOG_PROB<TAB>TOKENS`` per input (natural log; an empty line where the input had no source); with
    ``token_scores``, a third column: each token's log-score, the EOS's last."""
    def line(s: ReferenceScore) -> str:
        return f"{s.log_prob:.4f}\t{s.tokens}" + (f"\t{format_scores(s.token_scores)}" if token_scores else "")

    return [line(s) if s is not None else "" for s in scores]


def format_scores(scores: Sequence[float]) -> str:
    """Per-token log-scores as output lines show them: 4 decimals, space-separated."""
    return " ".join(f"{score:.4f}" for score in scores)


def token_scores_field(_: int, hypothesis: Hypothesis) -> str:
    """The ``--token-scores`` field of an output line (an ``output_lines`` extra)."""
    return format_scores(hypothesis.token_scores or [])


def score_summary(scores: Sequence[ReferenceScore | None], normalized: bool) -> str:
    """One line for the whole input: tokens, unknown words, log-score per token and, for a head whose scores
    are probabilities, the perplexity."""
    scored = [s for s in scores if s is not None]
    tokens = sum(s.tokens for s in scored)
    if not tokens:
        return f"scored 0 of {len(scores)} lines"
    per_token = sum(s.log_prob for s in scored) / tokens
    unknown = sum(s.unknown for s in scored)
    text = (f"scored {len(scored)} of {len(scores)} lines: {tokens} target tokens ({unknown} unknown), "
            f"log-score per token {per_token:.4f}")
    return text + (f", perplexity {math.exp(-per_token):.2f}" if normalized else " (the head's scores are not "
                                                                                  "probabilities: no perplexity)")


@contextlib.contextmanager
def answered_lines(output: Path | None) -> Iterator[Callable[[Sequence[str]], None]]:
    """A writer of output lines as they are ready (a stream's groups, a batch's captions): stdout and a stream
    ``output`` (a pipe, ``/dev/stdout``: :func:`written_in_place`) get each call's lines at once, flushed; an output
    file gets all of them at the end, atomically, and nothing when the block fails."""
    if output is not None and not written_in_place(output):
        kept: list[str] = []
        yield kept.extend
        write_lines(kept, output)
        return
    with atomic_write(output) if output is not None else contextlib.nullcontext(standard_stream("stdout")) as stream:
        def answer(lines: Sequence[str]) -> None:
            with naming_write_errors(str(output) if output is not None else STREAM_NAMES["stdout"]):
                stream.write("".join(line + "\n" for line in lines))
                stream.flush()

        yield answer


def write_lines(lines: Sequence[str], output: Path | None) -> None:
    """To ``output`` atomically (never half-written), or to stdout; a write refused (a full disk) names where."""
    text = "".join(line + "\n" for line in lines)
    if output is not None:
        with atomic_write(output) as handle:
            handle.write(text)
    else:
        stdout = standard_stream("stdout")
        with naming_write_errors(STREAM_NAMES["stdout"]):
            stdout.write(text)
            stdout.flush()

"""``nlgkit translate``: one output line per input line, in order, whatever the input.

Defined behaviour for awkward input (also in the README):
- an empty (or whitespace-only) line gives an empty output line;
- bytes that are not UTF-8 are replaced by U+FFFD (an unknown word) with a warning naming the line;
- a line longer than ``--max-input-tokens`` tokens is cut to that length, with a warning naming the line;
- an empty input gives an empty output.
With ``--buffer-size N`` the input is read as a stream: each group of N lines is translated, written and
flushed before the next is read (an interactive pipe); without it all input is read first.
With ``--score-reference REF`` nothing is searched: each input line gives ``LOG_PROB<TAB>TOKENS``, the model's
log-score of that line of REF (natural log, summed over its target tokens and EOS, TOKENS of them), and stderr
a summary (perplexity for probability heads); an input line without a source gives an empty line.
With ``--nbest N`` (N > 1) each input gives N lines ``INDEX ||| hypothesis ||| score`` (Moses n-best format,
INDEX counted from 0), best first. With ``--replace-unk`` each ``<unk>`` of an output becomes the source token its
step attended to most (or its entry in ``--phrase-table``); ``--report-align`` ends each line in ``||| SRC-TGT``
pairs (source and output token indices, from 0); ``--target-prefix FILE`` starts each output with its line of FILE;
``--constraints FILE`` makes each output contain its line's tab-separated phrases (lexically constrained beam search);
``--token-scores`` ends each line in its tokens' log-probabilities; ``--json`` writes one JSON record per input line
instead (``nlgkit serve``'s answer). The work is done in ``nlgkit.generation``; this module parses and prints.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import ReportTime, handle_errors, progress_bar, time_report, warn, writes_to_terminal
from nlgkit.cli.search_flags import (
    Beam,
    Checkpoint,
    Device,
    LengthPenalty,
    MinLen,
    NoRepeatNgramSize,
    NoUnk,
    Output,
    SamplingSwitch,
    SamplingTopk,
    SamplingTopp,
    Seed,
    Temperature,
)


@handle_errors
def translate(
    model: Annotated[list[Path], typer.Option("--model", "-m", envvar="NLGKIT_MODEL",
                                              help="Run directory written by `nlgkit train` (or $NLGKIT_MODEL); "
                                                   "repeat it to search with an ensemble")],
    checkpoint: Checkpoint = "best",
    beam: Beam = None,
    nbest: Annotated[int | None, typer.Option(help="Hypotheses per input (Moses n-best format when > 1)")] = None,
    length_penalty: LengthPenalty = None,
    max_len_a: Annotated[float | None, typer.Option(help="Output length limit: a * source length + b")] = None,
    max_len_b: Annotated[int | None, typer.Option(help="Output length limit: a * source length + b")] = None,
    max_len: Annotated[int, typer.Option(help="Absolute cap on output tokens (0 = only the a/b limit)")] = 0,
    batch_size: Annotated[int | None, typer.Option(help="Sentences per search batch")] = None,
    min_len: MinLen = None,
    no_repeat_ngram_size: NoRepeatNgramSize = None,
    no_unk: NoUnk = None,
    sampling: SamplingSwitch = False,
    sampling_topk: SamplingTopk = None,
    sampling_topp: SamplingTopp = None,
    temperature: Temperature = None,
    seed: Seed = None,
    max_input_tokens: Annotated[int, typer.Option(help="Longer input lines are cut to this many tokens")] = 400,
    input: Annotated[Path | None, typer.Option("--input", "-i", help="Input file (default: stdin)")] = None,
    output: Output = None,
    pretokenized: Annotated[bool, typer.Option(help="Input is already in the data directory's token form")] = False,
    detokenize: Annotated[bool, typer.Option(help="Detokenise output to the form of the training text")] = True,
    device: Device = "auto",
    buffer_size: Annotated[int, typer.Option(help="Translate the input as a stream, N lines at a time, each group "
                                                  "written and flushed when done (0 = read all input first)")] = 0,
    images: Annotated[Path | None, typer.Option(help="Multimodal models: the image of each input line, as a file "
                                                     "naming one image per line or a directory (its files in name "
                                                     "order)")] = None,
    ensemble_mode: Annotated[str, typer.Option(help="Several --model: log_linear (mean log-probability) or linear "
                                                    "(log of the mean probability)")] = "log_linear",
    engine: Annotated[str, typer.Option(help="torch (nlgkit's search) or ct2: CTranslate2 with --model an export "
                                             "directory written by `nlgkit export ct2`")] = "torch",
    compute_type: Annotated[str, typer.Option(help="torch: float32 (default), bfloat16 or float16 autocast; ct2: "
                                                   "default (as exported), float32, int8, int8_float32, "
                                                   "bfloat16…")] = "default",
    score_reference: Annotated[Path | None, typer.Option(help="Score these references (one per input line) "
                                                              "instead of searching: LOG_PROB<TAB>TOKENS per "
                                                              "line, a summary on stderr")] = None,
    replace_unk: Annotated[bool, typer.Option(help="Replace each <unk> of an output by the source word its step "
                                                   "attended to most (the whole word with subwords; models with "
                                                   "source attention)")] = False,
    phrase_table: Annotated[Path | None, typer.Option(help="--replace-unk through this table of 'source|||target' "
                                                           "lines (a source token not in it is copied)")] = None,
    report_align: Annotated[bool, typer.Option(help="End each output line in ' ||| SRC-TGT …': the source token each "
                                                    "output token's step attended to most (with --no-detokenize or --json)")
                            ] = False,
    target_prefix: Annotated[Path | None, typer.Option(help="Start each output with the text of this file's line "
                                                            "(one per input line; an empty line: no prefix)")] = None,
    constraints: Annotated[Path | None, typer.Option(help="Make each output contain the phrases of this file's line "
                                                          "(one per input line, phrases separated by tabs, in any "
                                                          "order; an empty line: none): constrained beam search")
                           ] = None,
    token_scores: Annotated[bool, typer.Option(help="End each output line in ' ||| ' and each output token's "
                                                    "log-score (log-probability for softmax heads), the EOS's last "
                                                    "(with --no-detokenize or --json); with --score-reference, a "
                                                    "third column of them")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON record per input line (text, score, n-best, "
                                                             "and with --report-align / --token-scores the tokens, "
                                                             "alignment and token scores): nlgkit serve's answer")
                           ] = False,
    report_time: ReportTime = False,
) -> None:
    """Translate text with a trained run (stdin → stdout by default)."""
    started = time.perf_counter()
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.errors import ConfigError
    from nlgkit.core.io import check_output
    from nlgkit.generation.ensemble import load_ensemble
    from nlgkit.generation.output import (
        SearchOptions,
        read_text_input,
        score_lines,
        score_summary,
        write_lines,
    )
    from nlgkit.generation.streaming import PerLine, translate_input
    from nlgkit.generation.translate import Translator, read_image_list
    from nlgkit.generation.unknowns import phrase_table_option
    from nlgkit.runs.files import models_as_inputs

    if buffer_size < 0:
        raise ConfigError(f"--buffer-size {buffer_size}: must be 0 or positive")

    if engine not in ("torch", "ct2"):
        raise ConfigError(f"--engine {engine!r}: choose torch or ct2")
    if engine == "ct2" and sampling:
        raise ConfigError("--sampling: only with --engine torch (nlgkit's search)")
    if constraints is not None and engine == "ct2":
        raise ConfigError("--constraints: only with --engine torch (CTranslate2 has no lexically constrained search)")
    if constraints is not None and sampling:
        raise ConfigError("--constraints: a beam search (not with --sampling)")
    if score_reference is not None and (sampling or (nbest or 1) > 1 or buffer_size):
        raise ConfigError("--score-reference: scores one given output per line of the whole input; not with "
                          "--sampling, --nbest or --buffer-size")
    unknown_words = phrase_table_option(replace_unk, phrase_table)
    for flag, on in (("--replace-unk", replace_unk), ("--report-align", report_align),
                     ("--target-prefix", target_prefix is not None), ("--constraints", constraints is not None)):
        if on and score_reference is not None:
            raise ConfigError(f"{flag}: only when searching (not with --score-reference)")
    if json_output and score_reference is not None:
        raise ConfigError("--json: only when searching (not with --score-reference)")
    check_output(output, [("--input", input), ("--target-prefix", target_prefix), ("--constraints", constraints),
                          ("--score-reference", score_reference), ("--phrase-table", phrase_table),
                          ("--images", images), *models_as_inputs(model)])
    resolve = functools.partial(SearchOptions.resolve, beam=beam, nbest=nbest, length_penalty=length_penalty,
                                max_len_a=max_len_a, max_len_b=max_len_b, max_len=max_len, batch_size=batch_size,
                                min_len=min_len, no_repeat_ngram_size=no_repeat_ngram_size, no_unk=no_unk,
                                sampling=sampling, sampling_topk=sampling_topk,
                                sampling_topp=sampling_topp, temperature=temperature, seed=seed)
    translator: Translator | CT2Translator
    if engine == "ct2":
        # lazy: CTranslate2 is an optional extra, loaded only for this engine
        from nlgkit.generation.ct2 import CT2Translator, single_export

        export = single_export(model, checkpoint)
        translator = CT2Translator(export, resolve(export.config.search), compute_type=compute_type, device=device,
                                   pretokenized=pretokenized, detokenize=detokenize,
                                   max_input_tokens=max_input_tokens, warn=warn, phrase_table=unknown_words,
                                   report_alignment=report_align,
                                   report_token_scores=token_scores and score_reference is None, as_json=json_output)
    else:
        run = load_ensemble(model, checkpoint, device, ensemble_mode, compute_type)  # one --model: that run as it is
        if run.compute_note():
            warn(run.compute_note())
        translator = Translator(run, resolve(run.config.search), pretokenized=pretokenized, detokenize=detokenize,
                                max_input_tokens=max_input_tokens, warn=warn, phrase_table=unknown_words,
                                report_alignment=report_align,
                                report_token_scores=token_scores and score_reference is None, as_json=json_output)
    image_files = read_image_list(images) if images is not None else None
    loaded = time.perf_counter()
    if score_reference is not None:
        references, _ = read_text_input(score_reference, warn)
        lines, name = read_text_input(input, warn)
        scores = translator.reference_scores(lines, references, name, images=image_files,
                                             references_name=f"--score-reference {score_reference}")
        write_lines(score_lines(scores, token_scores), output)
        typer.echo(score_summary(scores, translator.probabilities), err=True)
        count, verb = len(lines), "scored"
    else:
        per_line = {key: PerLine(flag, path, read_text_input(path, warn)[0]) for key, flag, path in (
            ("prefixes", "--target-prefix", target_prefix), ("constraints", "--constraints", constraints))
            if path is not None}
        if image_files is not None:
            per_line["images"] = PerLine("--images", images or Path(), image_files, "images")
        # a bar while a whole input is searched by nlgkit: not for a stream (it answers its groups as they come), nor
        # over lines being typed at the terminal or beside the translations written to it
        on_terminal = (input is None and sys.stdin.isatty()) or writes_to_terminal(output)
        with progress_bar("translating", show=buffer_size == 0 and not on_terminal) as advance:
            translator.on_batch = advance
            count = translate_input(translator, input, output, warn, buffer_size=buffer_size, **per_line)
        verb = "translated"
    if report_time:
        typer.echo(time_report(verb, count, "lines", time.perf_counter() - loaded, loaded - started), err=True)

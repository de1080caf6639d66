"""``nlgkit caption``: one caption line per image, in order; a bad image is named, the others captioned.

A missing, empty, truncated or corrupt file, a non-image or a decompression bomb gets a one-line error on
stderr and an empty output line (a JSON error record with ``--json``); the exit code is 1 when any image
failed. ``--score-reference REF`` scores line i of REF as the caption of image i instead (``LOG_PROB<TAB>TOKENS``,
as ``translate --score-reference``). Standard output or a stream (a pipe, ``/dev/stdout``) gets each batch's
lines as soon as it is captioned; an output file is written whole, atomically, at the end. ``--buffer-size N``
reads the list as a stream, N lines at a time. The work is done in ``nlgkit.generation.caption`` and
``caption_stream``; this module parses and prints.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import (
    ReportTime,
    handle_errors,
    progress_bar,
    report_error,
    time_report,
    warn,
    writes_to_terminal,
)
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
def caption(
    images: Annotated[list[Path] | None, typer.Argument(help="Image files (JPEG, PNG, …)")] = None,
    model: Annotated[list[Path] | None, typer.Option("--model", "-m", envvar="NLGKIT_MODEL",
                                                     help="Run directory of a captioning model (or $NLGKIT_MODEL); "
                                                          "repeat it to search with an ensemble")] = None,
    listing: Annotated[Path | None, typer.Option("--list", help="File with one image path per line ('-': stdin; "
                                                                "blank lines are skipped)", allow_dash=True)] = None,
    checkpoint: Checkpoint = "best",
    beam: Beam = None,
    nbest: Annotated[int | None, typer.Option(help="Captions per image (Moses n-best format when > 1)")] = None,
    length_penalty: LengthPenalty = None,
    max_len: Annotated[int, typer.Option(help="Absolute cap on caption tokens (0 = the run's limit)")] = 0,
    batch_size: Annotated[int | None, typer.Option(help="Images per batch")] = None,
    min_len: MinLen = None,
    no_repeat_ngram_size: NoRepeatNgramSize = None,
    no_unk: NoUnk = None,
    sampling: SamplingSwitch = False,
    sampling_topk: SamplingTopk = None,
    sampling_topp: SamplingTopp = None,
    temperature: Temperature = None,
    seed: Seed = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON record per image")] = False,
    attention: Annotated[Path | None, typer.Option(help="Directory for per-image attention PNGs "
                                                        "(show_attend_tell)")] = None,
    output: Output = None,
    buffer_size: Annotated[int, typer.Option(help="Read the --list as a stream, N lines at a time, each group's "
                                                  "images captioned as soon as it is complete (0: the whole list "
                                                  "first); not with --score-reference")] = 0,
    device: Device = "auto",
    ensemble_mode: Annotated[str, typer.Option(help="Several --model: log_linear (mean log-probability) or linear "
                                                    "(log of the mean probability)")] = "log_linear",
    compute_type: Annotated[str, typer.Option(help="What the search computes in: float32 (default), bfloat16 or "
                                                   "float16 (autocast)")] = "default",
    score_reference: Annotated[Path | None, typer.Option(help="Score these captions (one per image) instead of "
                                                              "searching: LOG_PROB<TAB>TOKENS per image, a "
                                                              "summary on stderr")] = None,
    constraints: Annotated[Path | None, typer.Option(help="Make each caption contain the phrases of this file's "
                                                          "line (one per image, phrases separated by tabs, in any "
                                                          "order; an empty line: none): constrained beam search")
                           ] = None,
    target_prefix: Annotated[Path | None, typer.Option(help="Start each caption with this file's line (one per "
                                                            "image, tokenised as the training captions; an empty "
                                                            "line: none); the model completes it")] = None,
    token_scores: Annotated[bool, typer.Option(help="Each caption's tokens' log-scores (log-probabilities for "
                                                    "softmax heads), the EOS's last: a last ' ||| ' field, "
                                                    "'token_scores' with --json, a third column with "
                                                    "--score-reference")] = False,
    report_time: ReportTime = False,
) -> None:
    """Caption images with a trained run."""
    started = time.perf_counter()
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.errors import DataError
    from nlgkit.core.io import check_output, require_readable
    from nlgkit.generation.caption import (
        CaptionResult,
        caption_reference_scores,
        check_captioning_run,
        result_lines,
    )
    from nlgkit.generation.caption_stream import PerImage, caption_input, image_groups
    from nlgkit.generation.ensemble import load_ensemble
    from nlgkit.generation.output import (
        SearchOptions,
        read_text_input,
        score_lines,
        score_summary,
        write_lines,
    )
    from nlgkit.runs.files import models_as_inputs

    if not model:
        raise DataError("no model given (--model RUN_DIR or $NLGKIT_MODEL)")
    if buffer_size < 0:
        raise DataError(f"--buffer-size {buffer_size}: must be 0 or positive")
    if buffer_size and score_reference is not None:
        raise DataError("--score-reference: scores one given caption per image of the whole list; not with "
                        "--buffer-size")
    arguments = [str(path) for path in images or []]
    groups: Iterable[list[str]]
    if buffer_size == 0:  # the whole list, read now: its paths are checked before the model loads
        paths = next(image_groups(arguments, listing, 0, report_error))
        if not paths:
            raise DataError("no images given (arguments or --list FILE)")
        groups = [paths]
    else:  # read as it arrives
        if not arguments and listing is None:
            raise DataError("no images given (arguments or --list FILE)")
        if listing is not None and str(listing) != "-":
            require_readable(listing)  # (before the model loads, not when the list is reached)
        paths, groups = arguments, image_groups(arguments, listing, buffer_size, report_error)
    check_output(output, [("--list", listing), ("--score-reference", score_reference),
                          ("--constraints", constraints), ("--target-prefix", target_prefix),
                          *(("an image", path) for path in paths), *models_as_inputs(model)])
    run = load_ensemble(model, checkpoint, device, ensemble_mode, compute_type)  # one --model: that run as it is
    if run.compute_note():
        warn(run.compute_note())
    check_captioning_run(run)
    options = SearchOptions.resolve(run.config.search, beam=beam, nbest=nbest, length_penalty=length_penalty,
                                    max_len=max_len, batch_size=batch_size, min_len=min_len,
                                    no_repeat_ngram_size=no_repeat_ngram_size, no_unk=no_unk,
                                    sampling=sampling, sampling_topk=sampling_topk,
                                    sampling_topp=sampling_topp, temperature=temperature, seed=seed)
    loaded = time.perf_counter()

    def per_image(flag: str, path: Path | None) -> PerImage | None:
        return None if path is None else PerImage(f"{flag} {path}", read_text_input(path, warn)[0])

    if constraints is not None and sampling:
        raise DataError("--constraints: a beam search (not with --sampling)")
    if score_reference is not None:
        if (sampling or options.nbest > 1 or json_output or attention is not None or constraints is not None
                or target_prefix is not None):
            raise DataError("--score-reference: scores one given caption per image; not with --sampling, --nbest, "
                            "--json, --attention, --constraints or --target-prefix")
        references, _ = read_text_input(score_reference, warn)
        results, scores = caption_reference_scores(run, paths, references, options.batch_size, warn=report_error,
                                                   references_name=f"--score-reference {score_reference}")
        write_lines(score_lines(scores, token_scores), output)
        typer.echo(score_summary(scores, run.model.head.normalized), err=True)
    else:
        detokenize = run.detokenizer()

        def caption_lines(first: int, finished: Sequence[CaptionResult]) -> list[str]:
            return result_lines(finished, options.nbest, json_output,
                                lambda tokens: detokenize(run.tgt_vocab.decode(tokens)),
                                run.tgt_vocab.decode if token_scores else None, first_index=first)

        # a bar over a whole list, not beside captions written to a terminal (nor over a stream of unknown length)
        with progress_bar("captioning", show=buffer_size == 0 and not writes_to_terminal(output)) as advance:
            results = caption_input(
                run, groups, options, output, caption_lines, whole=buffer_size == 0,
                constraints=per_image("--constraints", constraints), prefixes=per_image("--target-prefix",
                                                                                         target_prefix),
                attention_dir=attention, warn=report_error, note=warn, on_batch=advance)
    if report_time:
        typer.echo(time_report("scored" if score_reference is not None else "captioned", len(results), "images",
                               time.perf_counter() - loaded, loaded - started), err=True)
    failed = sum(1 for r in results if r.error)
    if failed:
        typer.echo(f"error: {failed} of {len(results)} images could not be captioned", err=True)
        sys.stdout.flush()
        raise typer.Exit(1)

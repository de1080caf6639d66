"""``nlgkit bench``: training throughput, beam-search speed and peak memory, kept in BENCHMARKS.json and .md.

Only parsing and printing live here; the measuring is :mod:`nlgkit.experiments.bench.run` (imported inside the
command, so that ``nlgkit --help`` starts without torch). Each measurement runs in its own process, which is
this same command with the hidden ``--worker`` option, printing its figures as one JSON line.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from nlgkit.cli.common import handle_errors, writable_output


@handle_errors
def bench(
    output: Annotated[str, typer.Option(metavar="FILE.md", help="Markdown to write (the JSON goes beside it)",
                                        callback=writable_output)]
    = "BENCHMARKS.md",
    updates: Annotated[int, typer.Option(help="Timed training updates per recipe")] = 30,
    warmup: Annotated[int, typer.Option(help="Warm-up updates before timing")] = 3,
    translate_run: Annotated[str, typer.Option(help="Trained run used for the beam-search benchmark")]
    = "runs/multi30k_fixed",
    beam: Annotated[int, typer.Option(help="Beam size of the translation benchmark")] = 5,
    limit: Annotated[int, typer.Option(help="Translate only the first N test sentences (0: all)")] = 0,
    caption_run: Annotated[str, typer.Option(help="Trained captioning run used for the beam-10 captioning benchmark")]
    = "runs/flickr8k_attend_fixed",
    images: Annotated[str, typer.Option(help="Images for the feature-extraction benchmark")]
    = "../shared/data/flickr8k/images",
    caption_updates: Annotated[int, typer.Option(help="Timed training updates per captioning recipe")] = 20,
    multimodal_updates: Annotated[int, typer.Option(
        help="Timed training updates per multimodal-translation recipe (recipes/hirasawa/)")] = 30,
    ct2_run: Annotated[str, typer.Option(help="Trained Transformer run measured against its CTranslate2 export")]
    = "runs/ct2_transformer",
    only: Annotated[str, typer.Option(
        metavar="SECTION", help="Measure only this section (multimodal, gpu, serve, ct2, translation, debias, threads, "
                                "corpus, precision) and keep the other figures of the JSON")]
    = "",
    render: Annotated[bool, typer.Option("--render", help="Measure nothing: rewrite the Markdown from the JSON beside it")]
    = False,
    generate: Annotated[str | None, typer.Option(
        metavar="RUN_DIR", help="Measure only the beam search of this run over its test split (any task; --beam, "
                                "--limit, --device) and print the figures as JSON")] = None,
    device: Annotated[str, typer.Option(help="Device of --generate")] = "cpu",
    compute_type: Annotated[str, typer.Option(help="What --generate's search computes in: float32, bfloat16 or "
                                                   "float16 (as translate --compute-type)")] = "float32",
    worker: Annotated[str | None, typer.Option(hidden=True)] = None,
    recipe: Annotated[str | None, typer.Option(hidden=True)] = None,
    efficiency: Annotated[bool, typer.Option("--efficiency", hidden=True)] = False,
    run: Annotated[str | None, typer.Option(hidden=True)] = None,
    case: Annotated[str | None, typer.Option(hidden=True)] = None,
    threads: Annotated[int, typer.Option(hidden=True)] = 0,
    barrier: Annotated[str, typer.Option(hidden=True)] = "",
) -> None:
    """Measure training, decoding, feature extraction and start-up speed on this machine (`make bench`)."""
    from nlgkit.experiments.bench import run as measuring  # lazy: CLI start-up

    if worker:  # one measurement, in a process of its own spawned by the parent run
        typer.echo(json.dumps(measuring.worker(worker, recipe=recipe, run=run, updates=updates, warmup=warmup,
                                               efficiency=efficiency, images=images, limit=limit, beam=beam,
                                               device=device, case=case, threads=threads, barrier=barrier)))
    elif generate:
        typer.echo(json.dumps(measuring.measure_generation(generate, beam, limit, device, compute_type)))
    elif render:
        typer.echo(measuring.render_only(output))
    else:
        typer.echo(measuring.run_benchmarks(measuring.BenchSettings(
            output=output, updates=updates, warmup=warmup, translate_run=translate_run, beam=beam, limit=limit,
            caption_run=caption_run, images=images, caption_updates=caption_updates,
            multimodal_updates=multimodal_updates, ct2_run=ct2_run, only=only)))

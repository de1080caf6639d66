"""The flags ``translate`` and ``caption`` share (search, checkpoint, output, device), declared once (typer reads
them from the annotations)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import output_path

Checkpoint = Annotated[str, typer.Option(help="best, last, or a checkpoint directory")]
Beam = Annotated[int | None, typer.Option(help="Beam size (1 = greedy); default from the run's \\[search]")]
LengthPenalty = Annotated[float | None, typer.Option(help="Scores divided by length**this")]
Output = Annotated[Path | None, typer.Option("--output", "-o", parser=output_path, metavar="<path>",
                                             help="Output file (default: stdout)")]
Device = Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N")]
MinLen = Annotated[int | None, typer.Option(help="No end of output before this many tokens")]
NoRepeatNgramSize = Annotated[int | None, typer.Option(help="No n-gram of this many tokens twice in one output "
                                                            "(0 = off)")]
NoUnk = Annotated[bool | None, typer.Option("--no-unk/--allow-unk", help="Never output <unk> (default: the "
                                                                         "run's [search] no_unk, false)")]
SamplingSwitch = Annotated[bool, typer.Option("--sampling", help="Draw each output from the model's distribution "
                                                                 "instead of a beam (--nbest N: N samples)")]
SamplingTopk = Annotated[int | None, typer.Option(help="--sampling from the K likeliest words only")]
SamplingTopp = Annotated[float | None, typer.Option(help="--sampling from the smallest set of words whose "
                                                         "probability reaches P (nucleus)")]
Temperature = Annotated[float | None, typer.Option(help="--sampling at this temperature (< 1: sharper)")]
Seed = Annotated[int | None, typer.Option(help="--sampling's random seed (default 0)")]

"""``nlgkit export``: a trained run for another inference engine (``export ct2``: CTranslate2).

Only parsing and printing live here; the export is :mod:`nlgkit.export.ct2` (imported inside the command, so that
``nlgkit --help`` starts without torch or CTranslate2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import handle_errors, warn

app = typer.Typer(help="Export a trained run for another inference engine (CTranslate2).", no_args_is_help=True)


@app.command("ct2")
@handle_errors
def ct2_cmd(
    run: Annotated[Path, typer.Argument(help="Run directory written by `nlgkit train` (a Transformer with a "
                                             "learned, tied, fixed or Hadamard head)")],
    output: Annotated[Path, typer.Option("--output", "-o", help="CTranslate2 model directory to write")],
    checkpoint: Annotated[str, typer.Option(help="best, last, or a checkpoint directory")] = "best",
    quantization: Annotated[str, typer.Option(help="How the weights are stored: float32, int8, int8_float32, "
                                                   "int16, float16, bfloat16… (`translate --compute-type` can "
                                                   "still convert them when loading)")] = "float32",
    force: Annotated[bool, typer.Option("--force", help="Replace an earlier export at --output")] = False,
) -> None:
    """Write RUN's model as a CTranslate2 model directory, with its vocabularies and tokenizer files, for
    `nlgkit translate --engine ct2 --model DIR`."""
    # lazy: CLI start-up (torch and CTranslate2 load only when the command runs)
    from nlgkit.export.ct2 import export_ct2

    summary = export_ct2(run, output, checkpoint, quantization, force, warn=warn)
    typer.echo(f"wrote {summary.directory} (CTranslate2 {summary.ctranslate2_version}, {summary.quantization}, "
               f"{summary.size_bytes / 2**20:.1f} MiB)", err=True)

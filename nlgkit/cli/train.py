"""``nlgkit train RECIPE``: train a model from a TOML recipe (or print its parameter counts)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from nlgkit.cli.common import handle_errors, output_path
from nlgkit.core.recipes import load_recipe


@handle_errors
def train(
    recipe: Annotated[Path, typer.Argument(help="TOML recipe, e.g. recipes/multi30k_fixed.toml")],
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Override a key: section.key=value")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue run.dir from its last checkpoint")] = False,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda or cuda:N (train.device)")] = None,
    run_dir: Annotated[Path | None, typer.Option(parser=output_path, metavar="<path>",
                                               help="Where the run is written (run.dir)")] = None,
    tensorboard: Annotated[Path | None, typer.Option(help="Also write the logged metrics as TensorBoard events "
                                                          "here (train.tensorboard)")] = None,
    init_from: Annotated[Path | None, typer.Option(
        metavar="RUN_DIR", help="Start from this trained run's weights (its best checkpoint, or a checkpoint "
                                "directory) with a fresh optimizer and schedule: fine-tuning (train.init_from)")] = None,
    dry_run: Annotated[bool, typer.Option(help="Build the model and print parameter counts; no training")] = False,
    vocab_size: Annotated[int, typer.Option(min=0, help="With --dry-run: count for vocabularies of N entries "
                                                        "(no data needed), e.g. 9490 for the paper's COCO")] = 0,
) -> None:
    """Train a model; every option of the recipe can be overridden with --set."""
    extra = list(overrides or [])
    if device:
        extra.append(f"train.device={device!r}")
    if run_dir:
        extra.append(f"run.dir={str(run_dir)!r}")
    if tensorboard:
        extra.append(f"train.tensorboard={str(tensorboard)!r}")
    if init_from:
        extra.append(f"train.init_from={str(init_from)!r}")
    config = load_recipe(recipe, extra)
    console = Console(stderr=True, soft_wrap=True)  # one line per message: `2> train.log` stays grep-able
    if dry_run:
        _print_parameters(config, console, vocab_size)
        # lazy: CLI start-up (the library and torch load only when the command runs)
        return
    from nlgkit.train.distributed import Ranks
    from nlgkit.train.trainer import Trainer

    trainer = Trainer(config, resume=resume, console=console)
    trainer.run()
    Ranks.from_environment().end_process()
    if trainer.stopped_by_signal:  # resumable, not done: the shell's status for a process a signal ended
        raise typer.Exit(128 + trainer.stopped_by_signal)


def _print_parameters(config, console: Console, vocab_size: int) -> None:  # type: ignore[no-untyped-def]
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.runs.build import build_untrained, count_parameters

    _, vocabs, model = build_untrained(config, log=console.print, vocab_size=vocab_size)
    counts = count_parameters(model)
    sizes = ", ".join(f"|V_{lang}| = {len(vocab):,}" for lang, vocab in vocabs.items())
    table = Table(title=f"{config.task.type}, {config.model.type} model, {config.head.type} head ({sizes})")
    for column in ("component", "trainable", "frozen", "fixed buffers"):
        table.add_column(column, justify="left" if column == "component" else "right")
    for name, part in counts["components"].items():
        table.add_row(name, f"{part['trainable']:,}", f"{part['frozen']:,}", f"{part['buffers']:,}")
    table.add_row("[bold]total", f"[bold]{counts['trainable']:,}", f"{counts['frozen']:,}", f"{counts['buffers']:,}")
    Console().print(table)
    typer.echo(f"trainable parameters: {counts['trainable']}")

"""``nlgkit evaluate report RUN_DIR…``: runs beside a paper table, with seeds, significance and provenance.

Registered on the ``evaluate`` app by :func:`register` (``nlgkit evaluate report``). Inputs are all checked
before any hypothesis is translated: an unknown paper table or a run without a checkpoint is one line on
stderr and exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import handle_errors, log_line, writable_output
from nlgkit.core.errors import ConfigError
from nlgkit.metrics.names import METRICS


def report(
    run_dirs: Annotated[list[Path], typer.Argument(metavar="RUN_DIR...", help="Run directories to report")],
    paper: Annotated[
        str | None, typer.Option(help="Paper table to compare with, e.g. shalev2020_table2")
    ] = None,
    baseline: Annotated[
        list[Path] | None, typer.Option(metavar="RUN_DIR", help="Run every other run on its test set is tested "
                                                                "against (bootstrap); repeat it for more test sets, "
                                                                "or for the baseline's seeds (each run is then "
                                                                "paired with the baseline of its seed)")
    ] = None,
    metrics: Annotated[str, typer.Option(help="Comma-separated metrics, the first one primary")] = "bleu",
    samples: Annotated[int, typer.Option(help="Bootstrap samples for the significance test")] = 1000,
    output: Annotated[
        Path | None, typer.Option(metavar="FILE.md", help="Write the Markdown report here", callback=writable_output)
    ] = None,
    html: Annotated[Path | None, typer.Option(metavar="FILE.html", help="Write an HTML report here",
                                              callback=writable_output)] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON instead of Markdown")] = False,
    device: Annotated[str, typer.Option(help="Device for runs that must translate first")] = "auto",
) -> None:
    """Score each run's test hypotheses (translating with its best checkpoint only when needed) and report."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.io import atomic_write, check_output
    from nlgkit.evaluate.render import render_html, render_markdown
    from nlgkit.evaluate.report import build_report, collect_runs, report_to_dict
    from nlgkit.experiments.papers import load_table
    from nlgkit.runs.files import models_as_inputs
    from nlgkit.runs.records import best_meta

    names = [name.strip().lower() for name in metrics.split(",") if name.strip()]
    unknown = [name for name in names if name not in METRICS]
    if not names or unknown:
        raise ConfigError(f"--metrics {metrics!r}: choose from {', '.join(METRICS)}")
    if samples < 1:
        raise ConfigError(f"--samples {samples}: must be positive")
    table = load_table(paper) if paper else None
    dirs = list(run_dirs)
    baselines = baseline or []
    dirs += [base for base in baselines if all(d.resolve() != base.resolve() for d in dirs)]
    for written in (output, html):
        check_output(written, models_as_inputs(dirs, "RUN_DIR", records=True))
    for run_dir in dirs:
        best_meta(run_dir)
    results = collect_runs(dirs, metrics=names, device=device, log=log_line)
    built = build_report(results, table, baseline=baselines, samples=samples, metrics=names)
    markdown = render_markdown(built)
    if output:
        with atomic_write(output) as handle:
            handle.write(markdown)
    if html:
        with atomic_write(html) as handle:
            handle.write(render_html(built))
    typer.echo(json.dumps(report_to_dict(built), ensure_ascii=False) if json_output else markdown)


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app`` (the ``nlgkit evaluate`` group)."""
    app.command("report")(handle_errors(report))

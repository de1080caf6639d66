"""Shalev et al.'s Tables 1–4 (``nlgkit reproduce table1|table2|table3|table4``): nlgkit's figures beside the paper's.

Table 1 is built by :mod:`nlgkit.experiments.table1` (captioning runs), Table 2 by :mod:`nlgkit.evaluate.report`;
Table 3 (:mod:`nlgkit.experiments.table3`) counts the recipes' parameters (no data or weights needed) and Table 4
scores word similarity (:mod:`nlgkit.experiments.shalev_vectors`, with Fig. 2's norm–frequency ρ).
"""

from __future__ import annotations

from pathlib import Path

from nlgkit.core.errors import NlgkitError
from nlgkit.core.io import write_json
from nlgkit.evaluate.render import render_markdown
from nlgkit.evaluate.report import (
    build_report,
    collect_runs,
    first_group_of_each_test_set,
    report_from_dict,
    report_to_dict,
)
from nlgkit.experiments.common import log, trained_runs, write_output
from nlgkit.experiments.kept import kept_figures, unrecorded_labels, unrecorded_note
from nlgkit.experiments.papers import load_table
from nlgkit.experiments.shalev_claim import claim_section
from nlgkit.experiments.shalev_vectors import table4 as build_table4
from nlgkit.experiments.table3 import build_table3
from nlgkit.runs.records import best_meta

TABLE2_TITLE = "Shalev et al., Table 2: BLEU on Multi30K test2016"


def table1(run_dirs: list[str], output: str | None, dataset: str = "Flickr8k") -> str:
    """Shalev et al.'s Table 1 for the given captioning runs (see :mod:`nlgkit.experiments.table1`)."""
    # lazy: its caption scores load pycocoevalcap, which Tables 2–4 (translation) do not need
    from nlgkit.experiments.table1 import build_table1, render

    ready = []
    for run_dir in run_dirs:
        try:
            best_meta(Path(run_dir))
            ready.append(Path(run_dir))
        except NlgkitError:
            log(f"not trained yet: {run_dir}")
    kept = None if ready else kept_figures(output)
    if kept is not None:  # no run here or recorded: the figures kept from the original runs, marked so
        names = {Path(run_dir).name for run_dir in run_dirs}
        table = kept | {"rows": [row for row in kept["rows"] if Path(row["run"]).name in names]}
    else:
        table = build_table1(ready)
    text = render(table, dataset)
    write_output(text, output)
    if output:
        write_json(Path(output).with_suffix(".json"), {k: v for k, v in table.items() if k != "examples"}
                   | {"examples": table["examples"]})
    return text


def table4(run_dirs: list[str], output: str | None, wordsim_dir: str | None = None) -> str:
    """Shalev et al.'s Table 4 and Fig. 2's norm–frequency ρ, from weights or the analysis a record keeps
    (see :mod:`nlgkit.experiments.shalev_vectors`)."""
    return build_table4(run_dirs, output, wordsim_dir)


def table2(run_dirs: list[str], output: str | None) -> str:
    """Shalev et al.'s Table 2 beside the given runs (see :mod:`nlgkit.evaluate.report`)."""

    ready, waiting = trained_runs(run_dirs)  # runs not trained yet are listed, not an error
    intro = [
        "Written by `make reproduce-table2` (`nlgkit reproduce table2 RUN_DIR…`): each run's best",
        "checkpoint (by validation BLEU) translates test2016 with the recipe's beam; sacreBLEU on detokenised,",
        "lowercased output against the lowercased raw references.",
        *([""] + [f"Not run yet: `{Path(run_dir).name}`" for run_dir in waiting] if waiting else []),
    ]
    kept = None if ready else kept_figures(output)
    if kept is not None:  # no run here or recorded: the figures kept from the original runs, marked so
        write_json(Path(str(output)).with_suffix(".json"), kept)
        kept_names = {Path(run).name for row in kept["rows"] for run in row["runs"]}
        intro = intro[:3] + ["", *unrecorded_note(kept, "table2"), ""] + [
            f"Not run yet: `{Path(run_dir).name}`" for run_dir in waiting if Path(run_dir).name not in kept_names]
        report = report_from_dict(unrecorded_labels(kept), load_table(kept["paper"]["id"]))
        return write_output(render_markdown(report, title=TABLE2_TITLE, intro=intro), output)
    if not ready:
        text = "\n".join([f"# {TABLE2_TITLE}", "", *intro, ""])
        write_output(text, output)
        return text
    # each run against the learned head of its direction and seed (the first group on its test set, in the
    # Makefile's order; seed 1's where learned has no run of that seed)
    results = collect_runs(ready, log=log)
    report = build_report(results, load_table("shalev2020_table2"), baseline=first_group_of_each_test_set(results))
    text = render_markdown(report, title=TABLE2_TITLE, intro=intro, sections=claim_section(report))
    write_output(text, output)
    if output:
        write_json(Path(output).with_suffix(".json"), report_to_dict(report))
    return text


def table3(output: str | None) -> str:
    """Trainable parameters of every model of the paper's Table 3 (see :mod:`nlgkit.experiments.table3`)."""

    return write_output(build_table3(), output)

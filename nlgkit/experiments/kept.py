"""Rows of runs that have neither a run directory nor a record: the figures kept beside their table.

Shalev et al.'s Tables 1, 2 and 4 were written from runs whose directories are gone and that were never archived
(:mod:`nlgkit.runs.records`), so their configs, outputs and checkpoints cannot be recovered. What survives is
the JSON written beside each table from the original runs (``results/table1.json``, ``table2.json``; for
Table 4, ``table4.json``, made from the table itself). Its ``kept`` entry says where the figures come from; a
report over runs that are all missing re-emits them from that JSON, each row marked *unrecorded* in the table,
and writes the JSON back unchanged, so ``make table1-report`` / ``table2-report`` rewrite the committed files
from committed files alone. Once any of the runs is trained again or recorded, the table is written from those
runs and the kept figures are no longer shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nlgkit.core.io import read_json
from nlgkit.evaluate.markdown import md_table
from nlgkit.experiments.papers import load_table


def kept_figures(output: str | None) -> dict[str, Any] | None:
    """The kept JSON beside ``output`` (where the report writes its own), when it has a ``kept`` entry; the
    caller uses it only when none of ``run_dirs`` is trained or recorded (otherwise the report is written from
    those runs alone, and their JSON replaces the kept one)."""
    if not output or not Path(output).with_suffix(".json").is_file():
        return None
    kept = read_json(Path(output).with_suffix(".json"))
    return kept if isinstance(kept, dict) and "kept" in kept else None


def unrecorded_note(kept: dict[str, Any], table: str) -> list[str]:
    """The line under a table that says which of its rows come from kept figures, and what is lost."""
    return [(f"**Unrecorded rows** (marked so): {kept['kept']['note']} These figures are re-emitted from "
             f"`results/{table}.json`, not re-derived: no config, outputs or checkpoints of those runs are "
             "recoverable.")]


def table2_from_kept(kept: dict[str, Any], intro: list[str]) -> str:
    """Table 2 from the report JSON kept from its original runs (``report_to_dict`` of that report)."""
    body = []
    for row in kept["rows"]:
        significance = row["significance"]
        versus = "baseline" if row["baseline"] else (
            f"{significance['delta']:+.2f} [{significance['ci_low']:+.2f}, {significance['ci_high']:+.2f}], "
            f"p = {significance['p_value']:.3f}" if significance else "–")
        progress = row["progress"] or {}
        done = progress.get("epoch", 0) if progress.get("finished") else progress.get("epoch", 1) - 1
        body.append([row["label"], f"{row['values']['bleu']:.2f}", f"{row['paper']['bleu']:.2f}",
                     f"{row['delta']['bleu']:+.2f}", f"{row['group_size']} (seed {row['seed']})", versus,
                     f"{progress.get('best_epoch', '?')} / {done}",
                     f"{row['hardware']}, {row['wall_seconds'] / 3600:.2f} h", f"unrecorded; {row['status']}",
                     row["runs"][0]])
    paper = load_table(kept["paper"]["id"])
    lines = ["# Shalev et al., Table 2: BLEU on Multi30K test2016", "", *intro, "",
             f"Paper: {paper.citation} {paper.table}: “{paper.caption}” (source text: {paper.source})", "",
             *(f"- {note}" for note in paper.notes), *([""] if paper.notes else []),
             *md_table(["run", "bleu (nlgkit)", "BLEU ↑ (paper)", "Δ BLEU", "seeds (n, seed)",
                        "vs baseline (bleu: Δ [95% CI], p)", "best epoch / epochs", "hardware, wall time", "status",
                        "run directory"], body, [False, True, True, True] + [False] * 6),
             "", ("Δ = nlgkit − paper. Significance: paired bootstrap resampling "
                  f"({kept['samples']} samples) of each run against the baseline `{kept['baseline']}` on BLEU: "
                  "Δ = run − baseline with its 95% percentile interval; p = share of resamples where the run is "
                  "not better (one-sided)."), "", *unrecorded_note(kept, "table2"), "",
             "Paper rows without a run: " + "; ".join(
                 f"{u['keys']['dataset']} {u['keys']['pair']} {u['keys']['head']} {u['values']['bleu']:.2f}"
                 for u in kept["uncovered"]) + ".", "",
             "Signatures: " + ", ".join(f"{name} `{sig}`" for name, sig in kept["signatures"].items()), ""]
    return "\n".join(lines)


def table4_from_kept(kept: dict[str, Any], intro: list[str]) -> str:
    """Table 4 from the cells kept from the table its original runs wrote."""
    body = [[f"`{row['run']}`", row["head"], row["benchmark"], *row["cells"], "unrecorded"] for row in kept["rows"]]
    lines = [*intro, *md_table(["run", "head", "benchmark", "target ρ (nlgkit)", "target ρ (paper)",
                                "input ρ (nlgkit)", "input ρ (paper)", "pairs", "status"], body,
                               [False] * 3 + [True] * 5 + [False]),
             "", "A fixed head's target vectors are random by construction; the paper reports learned models only.",
             "", *unrecorded_note(kept, "table4"), ""]
    return "\n".join(lines)

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


def unrecorded_labels(kept: dict[str, Any]) -> dict[str, Any]:
    """The kept report data with every row's label marked *unrecorded*."""
    return kept | {"rows": [row | {"label": f"{row['label']} (unrecorded)"} for row in kept["rows"]]}

"""The one Markdown table writer of the reports under results/, so that every table escapes and aligns alike."""

from __future__ import annotations

from collections.abc import Sequence


def md_cell(text: object) -> str:
    """One cell: pipes escaped (they would split the cell) and whitespace collapsed (a newline ends the row)."""
    return " ".join(str(text).replace("|", "\\|").split())


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
             numeric: Sequence[bool] | None = None) -> list[str]:
    """A Markdown table whose numeric columns are right-aligned and text columns left-aligned.

    By default the first column is a label and every other column a number; pass ``numeric`` where a table has
    more text columns (a subword scheme, a status, a formula), so that text does not hug the right edge.
    """
    if numeric is None:
        numeric = [False] + [True] * (len(headers) - 1)
    if len(numeric) != len(headers):
        raise ValueError(f"{len(headers)} headers but {len(numeric)} alignments")
    return ["| " + " | ".join(md_cell(header) for header in headers) + " |",
            "|" + "|".join("---:" if number else "---" for number in numeric) + "|",
            *("| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in rows)]

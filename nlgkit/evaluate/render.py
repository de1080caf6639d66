"""Markdown and HTML views of a :class:`~nlgkit.evaluate.report.Report`, from one list of cells.

Both formats are built from the same header and cell strings, so a column can never mean one thing in the
Markdown and another in the HTML. The HTML is one self-contained page (inline style, no scripts), every text
escaped.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.report import Report, ReportRow, delta

if TYPE_CHECKING:
    from nlgkit.evaluate.published import Metric

COUNTS = {"params"}  # quantities printed as integers with thousands separators


def _num(value: float | None, name: str, signed: bool = False) -> str:
    if value is None:
        return "–"
    integer = name in COUNTS or isinstance(value, int)  # counts (parameters, vocabulary usage) stay exact
    spec = ("+" if signed else "") + (",.0f" if integer else ".2f")
    return format(value, spec)


def _paper_cell(row: ReportRow, metric: Metric) -> str:
    if row.paper is None:
        return "–"
    if metric.name in row.paper.unclear:
        return "unclear in source"
    return _num(row.paper.values.get(metric.name), metric.name)


def _seeds(row: ReportRow) -> str:
    if row.summary and row.spread:
        mean, sd = row.spread
        return f"n = {row.group_size}: {mean:.2f} ± {sd:.2f}"
    seed = row.runs[0].keys.get("seed")
    return f"seed {seed} of {row.group_size}" if row.group_size > 1 else f"1 (seed {seed})"


def _significance(row: ReportRow) -> str:
    if row.is_baseline:
        return "baseline"
    if row.seed_deltas is not None:
        mean, sd = row.seed_deltas
        return f"seeds' Δ {mean:+.2f} ± {sd:.2f}"
    result = row.significance
    if result is None:
        return "–" if row.summary else "n/a (other test set)"
    # no resample went against the run: p is below the test's resolution, not zero
    p = result.p_text()
    return f"{result.delta:+.2f} [{result.ci_low:+.2f}, {result.ci_high:+.2f}], {p}"


def _epochs(row: ReportRow) -> str:
    return "–" if row.summary else row.runs[0].epochs


def _hardware(row: ReportRow) -> str:
    wall = row.wall_seconds
    if wall is None:
        return row.hardware
    return f"{row.hardware}, {wall / 3600:.2f} h" + (" in all" if row.summary else "")


def table_cells(report: Report) -> tuple[list[str], list[list[str]], list[bool]]:
    """Headers, one list of cells per row, and which columns are numeric (right-aligned)."""
    arrows = {m.name: "↑" if m.higher_is_better else "↓" for m in report.compared}
    headers = ["run", *(f"{name} (nlgkit)" for name in report.metrics)]
    numeric = [False, *(True for _ in report.metrics)]
    for metric in report.compared:
        headers += [f"{metric.label} {arrows[metric.name]} (paper)", f"Δ {metric.label}"]
        numeric += [True, True]
    headers.append("seeds (n, mean ± sd)")
    if report.baselines:
        headers.append(f"vs baseline ({report.metrics[0]}: Δ [95% CI], p)")
    headers += ["best epoch / epochs", "hardware, wall time", "status", "run directory"]
    numeric += [False] * (len(headers) - len(numeric))
    body = []
    for row in report.rows:
        cells = [row.label, *(_num(row.values.get(name), name) for name in report.metrics)]
        for metric in report.compared:
            cells += [_paper_cell(row, metric), _num(delta(row, metric), metric.nlgkit or "", signed=True)]
        cells.append(_seeds(row))
        if report.baselines:
            cells.append(_significance(row))
        cells += [_epochs(row), _hardware(row), row.status, "" if row.summary else str(row.runs[0].run_dir)]
        body.append(cells)
    return headers, body, numeric


def _uncovered_cells(report: Report) -> tuple[list[str], list[list[str]]]:
    table = report.table
    if table is None or not report.uncovered:
        return [], []
    metrics = list(table.metrics.values())
    headers = [*table.keys, *(m.label for m in metrics), "note"]
    body = [
        [
            *(str(v) for v in row.keys.values()),
            *(
                "unclear in source" if m.name in row.unclear else _num(row.values.get(m.name), m.name)
                for m in metrics
            ),
            row.note,
        ]
        for row in report.uncovered
    ]
    return headers, body


def _texts(report: Report, title: str | None) -> dict[str, Any]:
    """Title, source lines and the legend, shared by both renderers."""
    table = report.table
    lines = []
    if table:
        lines.append(
            f"Paper: {table.citation} {table.table}: “{table.caption}” (source text: {table.source})"
        )
        lines += [""] + [f"- {note}" for note in table.notes] if table.notes else []
    legend = ["Δ = nlgkit − paper; ↑ higher is better, ↓ lower is better."] if report.compared else []
    if report.baselines:
        listed = ", ".join(str(base.run_dir) for base in report.baselines)
        seeds = {base.keys.get("seed") for base in report.baselines}
        against = (f"the baseline {report.baselines[0].run_dir}" if len(report.baselines) == 1 else
                   f"the baseline of its test set ({listed})" if len(seeds) == 1 else
                   f"the baseline of its test set and seed, or the first baseline of its test set where none has "
                   f"its seed ({listed})")
        legend.append(
            f"Significance: paired bootstrap resampling ({report.samples} samples) of each run against "
            f"{against} on {report.metrics[0]}: Δ = run − baseline with its 95% "
            "percentile interval; p = share of resamples where the run is not better (one-sided)."
        )
        if any(row.seed_deltas for row in report.rows):
            legend.append("A mean row's seeds' Δ: the mean ± sd of its averaged seeds' Δ, that is the difference of "
                          "the seed means from the baselines they were paired with.")
    default = f"{table.id}: {table.table}" if table else "nlgkit runs"
    return {"title": title or default, "lines": lines, "legend": legend}


def render_markdown(report: Report, title: str | None = None, intro: list[str] | None = None,
                    sections: list[str] | None = None) -> str:
    """The report as Markdown; ``intro`` lines go under the title (e.g. the command that wrote it), ``sections``
    (a paper's own reading of the table, say) after the legend."""
    texts = _texts(report, title)
    parts = [f"# {texts['title']}", "", *(intro or []), *([""] if intro else [])]
    parts += [*texts["lines"], *([""] if texts["lines"] else [])]
    headers, body, numeric = table_cells(report)
    parts += [*md_table(headers, body, numeric), ""]
    parts += [*texts["legend"], *([""] if texts["legend"] else [])]
    parts += sections or []
    uncovered_headers, uncovered = _uncovered_cells(report)
    if uncovered:
        parts += ["## Paper rows without a run", "", *md_table(uncovered_headers, uncovered, [False] * len(uncovered_headers)), ""]
    if report.signatures:
        parts += [
            "Signatures: " + "; ".join(f"{name} `{sig}`" for name, sig in report.signatures.items()),
            "",
        ]
    return "\n".join(parts)


def _html_table(headers: list[str], body: list[list[str]], numeric: list[bool] | None = None) -> list[str]:
    numeric = numeric or [False] * len(headers)
    out = [
        "<table>",
        "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr></thead>",
        "<tbody>",
    ]
    for cells in body:
        out.append(
            "<tr>"
            + "".join(
                f'<td class="{"num" if n else "text"}">{html.escape(c)}</td>' for c, n in zip(cells, numeric)
            )
            + "</tr>"
        )
    return [*out, "</tbody>", "</table>"]


STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
    "th,td{border:1px solid #bbb;padding:.25em .5em}td.num{text-align:right}th{background:#eee}"
)


def render_html(report: Report, title: str | None = None, intro: list[str] | None = None) -> str:
    """The report as one self-contained HTML page (inline CSS, no scripts, all text escaped)."""
    texts = _texts(report, title)
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(texts['title'])}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{e(texts['title'])}</h1>",
    ]
    parts += [f"<p>{e(line)}</p>" for line in [*(intro or []), *texts["lines"]] if line]
    parts += _html_table(*table_cells(report))
    parts += [f"<p>{e(line)}</p>" for line in texts["legend"]]
    uncovered_headers, uncovered = _uncovered_cells(report)
    if uncovered:
        parts += ["<h2>Paper rows without a run</h2>", *_html_table(uncovered_headers, uncovered)]
    if report.signatures:
        parts.append(
            "<ul>"
            + "".join(f"<li>{e(name)}: <code>{e(sig)}</code></li>" for name, sig in report.signatures.items())
            + "</ul>"
        )
    return "\n".join([*parts, "</body></html>", ""])

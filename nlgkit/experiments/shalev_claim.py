"""Shalev et al.'s claim, "fixed ≈ learned ≈ tied", tested on Table 2's report.

The paper's Table 2 puts every fixed and tied row within 0.5 BLEU of learned, and the paper reads that as a fixed
random output layer costing nothing. One seed cannot carry that: here each head's seeds are set against learned's,
per direction, from the paired bootstraps the report already ran (each seed against learned of the same seed where
learned has it, else learned's first), so the section is rebuilt from the same records as the table above it.
A head is "not told apart" where no seed's 95 % interval excludes 0, which is not proof of equality: the mean Δ
and the seed counts beside it say how much that absence of a difference is worth.
"""

from __future__ import annotations

from collections.abc import Sequence

from nlgkit.evaluate.collect import RunResult, counted_seeds
from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.report import Report, ReportRow, baseline_of
from nlgkit.evaluate.significance import mean_sd

HEADING = "## The claim: fixed ≈ learned ≈ tied"
INTRO = [
    "Shalev et al. find a fixed random output layer as good as a learned or a tied one (their Table 2 puts every",
    "fixed and tied row within 0.5 BLEU of learned). Each head here against learned, per direction: Δ = head −",
    "learned over its finished seeds (mean ± sd with two or more; one seed: its paired bootstrap's 95 % interval),",
    "each seed paired with learned of the same seed where learned has it, and how many seeds' intervals exclude 0.",
    "Not told apart at 95 % is not proof of equality: read it with the Δ and the number of seeds.",
]


def claim_section(report: Report) -> list[str]:
    """The claim's Markdown section (heading, table), or nothing where no head was compared with learned (a
    report rebuilt from kept figures has no run keys to group by)."""
    body = [_cells(report, rows) for rows in _compared_groups(report)]
    if not body:
        return []
    headers = ["direction", "head", "seeds", "against learned seed", "Δ BLEU (nlgkit)", "Δ BLEU (paper)",
               "seeds below learned", "seeds above learned", "verdict"]
    numeric = [False, False, False, False, True, True, True, True, False]
    return [HEADING, "", *INTRO, "", *md_table(headers, body, numeric), ""]


def _compared_groups(report: Report) -> list[list[ReportRow]]:
    """Per seed group of a head other than its baseline's (in the report's order), the rows of its counted seeds
    that were compared with a baseline."""
    baseline_heads = {base.keys.get("head") for base in report.baselines}
    groups: dict[str, list[ReportRow]] = {}
    for row in report.rows:
        run = row.runs[0]
        if not row.summary and row.significance is not None and run.keys.get("head") not in baseline_heads:
            groups.setdefault(run.group, []).append(row)
    compared = []
    for rows in groups.values():
        counted = {id(run) for run in counted_seeds([row.runs[0] for row in rows])}
        compared.append([row for row in rows if id(row.runs[0]) in counted])
    return compared


def _cells(report: Report, rows: Sequence[ReportRow]) -> list[str]:
    """One head's row: its seeds, the learned seed each met, Δ (ours and the paper's), seeds told apart."""
    keys = rows[0].runs[0].keys
    tests = [row.significance for row in rows if row.significance is not None]
    if len(tests) > 1:
        mean, sd = mean_sd([test.delta for test in tests])
        ours = f"{mean:+.2f} ± {sd:.2f}"
    else:
        ours = f"{tests[0].delta:+.2f} [{tests[0].ci_low:+.2f}, {tests[0].ci_high:+.2f}]"
    below = sum(test.ci_high < 0 for test in tests)
    above = sum(test.ci_low > 0 for test in tests)
    bases = [baseline_of(row.runs[0], report.baselines) for row in rows]
    direction = f"{keys.get('dataset', '?')} {str(keys.get('pair', '?')).upper()}"
    return [direction, str(keys.get("head")), _seeds([row.runs[0] for row in rows]),
            _seeds([base for base in bases if base is not None]), ours, _paper_delta(report, rows[0], bases[0]),
            str(below), str(above), _verdict(below, above, len(tests))]


def _seeds(runs: Sequence[RunResult]) -> str:
    return ", ".join(str(run.keys.get("seed")) for run in runs)


def _paper_delta(report: Report, row: ReportRow, base: RunResult | None) -> str:
    """The paper's own head − learned on the row's dataset and direction ("–" where it has no such rows)."""
    metric = next((m for m in report.compared if m.nlgkit == report.metrics[0]), None)
    learned = report.table.match(base.keys) if report.table and base else None
    if metric is None or row.paper is None or learned is None:
        return "–"
    theirs, reference = row.paper.values.get(metric.name), learned.values.get(metric.name)
    return "–" if theirs is None or reference is None else f"{theirs - reference:+.2f}"


def _verdict(below: int, above: int, seeds: int) -> str:
    if below == above == 0:
        return "not told apart"
    parts = [f"below on {below} of {seeds}" if below else "", f"above on {above} of {seeds}" if above else ""]
    return "; ".join(part for part in parts if part)

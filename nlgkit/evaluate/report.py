"""Reports: nlgkit's runs beside a paper's table, with seeds, significance and provenance.

``collect_runs`` reads (or produces) each run's test hypotheses and scores them; ``build_report`` groups seed
repetitions (mean ± sd), matches each run to its paper row by keys, and compares every run with the chosen baseline
run of its test set by paired bootstrap (Table 2's DE-EN rows against DE-EN learned, its EN-DE rows against EN-DE
learned). Where a test set's baseline has several seeds, each run is paired with the baseline of its own seed, and a
mean row gives its seeds' differences as mean ± sd: a difference of seed means, which is what a claim such as
"fixed ≈ learned" is about, with the seeds' spread beside it. ``render_markdown`` / ``render_html`` print it. A
number in a report therefore always comes with the runs, hardware and wall time behind it, and with how far it is
from the published one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nlgkit.core.errors import DataError
from nlgkit.evaluate.collect import RunResult, collect_runs, counted_seeds, group_runs
from nlgkit.evaluate.published import Metric, PaperRow, PaperTable
from nlgkit.evaluate.significance import BootstrapResult, mean_sd, paired_bootstrap
from nlgkit.metrics.corpus import METRICS

__all__ = [
    "Report",
    "ReportRow",
    "RunResult",
    "baseline_of",
    "build_report",
    "collect_runs",
    "first_group_of_each_test_set",
    "report_to_dict",
]


Baselines = RunResult | str | Path | Sequence[RunResult | str | Path] | None


@dataclass
class ReportRow:
    """One run, or (``summary``) the mean over a group of seed repetitions."""

    label: str
    runs: list[RunResult]  # the run itself, or every run of the group
    summary: bool
    values: dict[str, float]  # the run's values, or the group means
    group_size: int  # runs in this row's seed group
    spread: tuple[float, float] | None = None  # (mean, sd) of the primary metric over the group
    paper: PaperRow | None = None
    significance: BootstrapResult | None = None  # this run (B) against its baseline (A)
    is_baseline: bool = False
    seed_deltas: tuple[float, float] | None = None  # a mean row: (mean, sd) of its counted seeds' Δ against baselines

    @property
    def hardware(self) -> str:
        return ", ".join(dict.fromkeys(run.hardware for run in self.runs))

    @property
    def wall_seconds(self) -> float | None:
        walls = [run.wall_seconds for run in self.runs if run.wall_seconds is not None]
        return sum(walls) if walls else None

    @property
    def status(self) -> str:
        if not self.summary:
            return self.runs[0].status
        done = sum(1 for run in self.runs if run.finished)
        return f"{done}/{len(self.runs)} finished"


@dataclass
class Report:
    metrics: list[str]  # nlgkit quantities shown, primary first
    compared: list[Metric]  # paper metrics whose nlgkit counterpart every run has
    rows: list[ReportRow]
    table: PaperTable | None = None
    uncovered: list[PaperRow] = field(default_factory=list)  # paper rows no run matched
    baselines: list[RunResult] = field(default_factory=list)  # at most one per test set
    samples: int = 1000
    signatures: dict[str, str] = field(default_factory=dict)


def build_report(
    results: Sequence[RunResult],
    table: PaperTable | None = None,
    baseline: Baselines = None,
    samples: int = 1000,
    metrics: Sequence[str] | None = None,
) -> Report:
    """Group, match and compare ``results``; ``metrics`` defaults to the scores the first run carries. ``baseline``:
    one run, or several: on different test sets, or seeds of one baseline on a test set. Each run is compared with
    the baseline that shares its references and its seed, else with the first baseline on its references (none:
    no comparison)."""
    if not results:
        raise DataError("no runs to report")
    shown = list(metrics or [name for name in results[0].values if name != "params"])
    compared = [
        m for m in (table.metrics.values() if table else []) if m.nlgkit and _available(m.nlgkit, results)
    ]
    shown += [m.nlgkit for m in compared if m.nlgkit is not None and m.nlgkit not in shown]
    bases = _find_baselines(results, baseline)
    rows: list[ReportRow] = []
    groups = group_runs(results)
    settings = distinguishing_settings(groups)
    for group in groups:
        summary = _summary_row(group, shown, table, settings[group[0].group]) if len(group) > 1 else None
        seed_rows: list[ReportRow] = []
        for run in group:
            row = ReportRow(
                _run_label(run, len(group), settings[run.group]),
                [run],
                False,
                dict(run.values),
                len(group),
                spread=summary.spread if summary else None,
                paper=table.match(run.keys) if table else None,
                is_baseline=any(run is base for base in bases),
            )
            base = baseline_of(run, bases)
            if base is not None and run is not base and shown[0] in METRICS:
                # A = baseline, B = this run: delta = run − baseline, p = P(run not better)
                row.significance = paired_bootstrap(
                    base.hyps, run.hyps, run.ref_streams, metric=shown[0], samples=samples
                )
            seed_rows.append(row)
        rows += seed_rows
        if summary:
            _compare_mean_row(summary, seed_rows)
            rows.append(summary)
    matched = {id(row.paper) for row in rows if row.paper is not None}
    uncovered = [row for row in (table.rows if table else ()) if id(row) not in matched]
    signatures = {name: sig for run in results for name, sig in run.signatures.items()}
    return Report(shown, compared, rows, table, uncovered, bases, samples, signatures)


def _available(name: str, results: Sequence[RunResult]) -> bool:
    return all(name in run.values for run in results)


def baseline_of(run: RunResult, bases: Sequence[RunResult]) -> RunResult | None:
    """The baseline ``run`` is compared with: on its test set, of its seed where one is, else the first there."""
    same_test = [base for base in bases if base.ref_streams == run.ref_streams]
    return next((base for base in same_test if base.keys.get("seed") == run.keys.get("seed")),
                same_test[0] if same_test else None)


def _compare_mean_row(summary: ReportRow, seed_rows: Sequence[ReportRow]) -> None:
    """A mean row is the baseline where all its seeds are; else, where each seed it averages was compared, its
    seeds' Δ as mean ± sd (two seeds at least: one Δ has no spread to show)."""
    counted = {id(run) for run in counted_seeds(summary.runs)}
    summary.is_baseline = all(row.is_baseline for row in seed_rows)
    deltas = [row.significance.delta for row in seed_rows
              if id(row.runs[0]) in counted and row.significance is not None]
    if len(deltas) == len(counted) >= 2:
        summary.seed_deltas = mean_sd(deltas)


def _find_baselines(results: Sequence[RunResult], baseline: Baselines) -> list[RunResult]:
    """The baseline runs asked for, each one of ``results``; two on one test set and seed would leave a run two
    answers."""
    if baseline is None:
        return []
    found = []
    for wanted in [baseline] if isinstance(baseline, RunResult | str | Path) else baseline:
        found.append(wanted if isinstance(wanted, RunResult) else _reported_run(results, Path(wanted)))
    for i, run in enumerate(found):
        twin = next((other for other in found[:i] if other.ref_streams == run.ref_streams
                     and other.keys.get("seed") == run.keys.get("seed")), None)
        if twin is not None:
            raise DataError(f"{run.run_dir}: a second baseline on the test set and seed of {twin.run_dir}")
    return found


def first_group_of_each_test_set(results: Sequence[RunResult]) -> list[RunResult]:
    """Every seed of the first run's group on each test set (its references), in order: the baselines when each
    direction or dataset of a table lists its reference head first, each seed of another head then paired with
    the baseline of its seed."""
    firsts: list[RunResult] = []
    for run in results:
        if all(run.ref_streams != first.ref_streams for first in firsts):
            firsts.append(run)
    return [run for run in results if any(run.group == first.group and run.ref_streams == first.ref_streams
                                          for first in firsts)]


def _reported_run(results: Sequence[RunResult], run_dir: Path) -> RunResult:
    wanted = run_dir.resolve()
    for run in results:
        if run.run_dir.resolve() == wanted:
            return run
    raise DataError(f"{run_dir}: baseline is not one of the reported runs")


def distinguishing_settings(groups: Sequence[Sequence[RunResult]]) -> dict[str, str]:
    """Each group's settings that set it apart from other groups of the same run name ("" where none share it).

    Runs of one recipe trained with a setting since changed (train.amp) are not seeds of one experiment; their rows
    then say which settings differ, rather than repeating one name without a reason.
    """
    by_name: dict[str, list[str]] = {}
    for group in groups:
        by_name.setdefault(group[0].name, []).append(group[0].group)
    labels = {key: "" for keys in by_name.values() for key in keys}
    for keys in (keys for keys in by_name.values() if len(keys) > 1):
        flat = [_flatten(json.loads(key)) for key in keys]
        differing = sorted({name for one in flat for name in one if any(one.get(name) != o.get(name) for o in flat)})
        for key, one in zip(keys, flat):
            labels[key] = ", ".join(f"{name} = {json.dumps(one.get(name))}" for name in differing)
    return labels


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in data.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[prefix + name] = value
    return flat


def _run_label(run: RunResult, group_size: int, settings: str = "") -> str:
    details = [f"seed {run.keys['seed']}"] if group_size > 1 else []
    if settings:
        details.append(settings)
    return f"{run.name} ({'; '.join(details)})" if details else run.name


def _summary_row(group: list[RunResult], shown: list[str], table: PaperTable | None, settings: str = "") -> ReportRow:
    """The seeds' mean; where some seeds finished and others were stopped by a limit, of the finished ones alone."""
    counted = counted_seeds(group)
    name = f"{group[0].name} ({settings})" if settings else group[0].name
    label = (f"{name}: mean of {len(group)} seeds" if len(counted) == len(group) else
             f"{name}: mean of the {len(counted)} finished seed{'s' * (len(counted) > 1)} of {len(group)}")
    means = {
        name: mean_sd([run.values[name] for run in counted])[0] for name in shown if _available(name, counted)
    }
    primary = [run.values[shown[0]] for run in counted]
    return ReportRow(
        label,
        list(group),
        True,
        means,
        len(counted),
        spread=mean_sd(primary),
        paper=table.match(group[0].keys) if table else None,
    )


def report_to_dict(report: Report) -> dict[str, Any]:
    """Plain JSON-ready data: what ``--json`` prints and what sits beside a written table."""
    table = report.table
    rows = []
    for row in report.rows:
        rows.append(
            {
                "label": row.label,
                "summary": row.summary,
                "runs": [str(run.run_dir) for run in row.runs],
                "values": row.values,
                "group_size": row.group_size,
                "mean_sd": list(row.spread) if row.spread else None,
                "paper": row.paper.values if row.paper else None,
                "delta": {m.name: delta(row, m) for m in report.compared} if row.paper else None,
                "significance": asdict(row.significance) if row.significance is not None else None,
                "baseline": row.is_baseline,
                "seed": None if row.summary else row.runs[0].keys.get("seed"),
                "seed_deltas": list(row.seed_deltas) if row.seed_deltas else None,
                "hardware": row.hardware,
                "wall_seconds": row.wall_seconds,
                "status": row.status,
                "progress": row.runs[0].progress if not row.summary else None,
                "hypotheses": None if row.summary else str(row.runs[0].hyp_file),
            }
        )
    return {
        "paper": {"id": table.id, "table": table.table, "citation": table.citation} if table else None,
        "metrics": report.metrics,
        "signatures": report.signatures,
        "samples": report.samples,
        "baselines": [str(base.run_dir) for base in report.baselines],
        "rows": rows,
        "uncovered": [{"keys": row.keys, "values": row.values} for row in report.uncovered],
    }


def report_from_dict(data: dict[str, Any], table: PaperTable | None = None) -> Report:
    """A report back from :func:`report_to_dict`'s data: a table rendered again from the figures kept beside it
    after its runs are gone. The runs carry what the tables show (name, seed, progress, hardware), no outputs."""
    runs: dict[str, RunResult] = {}

    def run(run_dir: str, row: dict[str, Any]) -> RunResult:
        if run_dir not in runs:
            runs[run_dir] = RunResult(Path(run_dir).name, Path(run_dir), {"seed": row.get("seed")}, "", [], [],
                                      Path(row.get("hypotheses") or run_dir), True, values=dict(row["values"]),
                                      progress=dict(row.get("progress") or {}), hardware=row["hardware"])
        return runs[run_dir]

    rows = [ReportRow(row["label"], [run(run_dir, row) for run_dir in row["runs"]], row["summary"],
                      dict(row["values"]), row["group_size"],
                      spread=(row["mean_sd"][0], row["mean_sd"][1]) if row["mean_sd"] else None,
                      paper=PaperRow({}, dict(row["paper"])) if row["paper"] else None,
                      significance=BootstrapResult(**row["significance"]) if row["significance"] else None,
                      is_baseline=row["baseline"],
                      seed_deltas=(row["seed_deltas"][0], row["seed_deltas"][1]) if row.get("seed_deltas") else None)
            for row in data["rows"]]
    metrics = list(data["metrics"])
    compared = [m for m in table.metrics.values() if m.nlgkit in metrics] if table else []
    uncovered = [table.match(entry["keys"]) or PaperRow(entry["keys"], entry["values"])
                 for entry in data["uncovered"]] if table else []
    # (figures kept before several baselines name their one baseline as "baseline")
    named = data["baselines"] if "baselines" in data else [data["baseline"]] if data.get("baseline") else []
    baselines = [runs[name] for name in named if name in runs]
    return Report(metrics, compared, rows, table, [row for row in uncovered if row is not None], baselines,
                  data["samples"], dict(data["signatures"]))


def delta(row: ReportRow, metric: Metric) -> float | None:
    """nlgkit − paper for ``metric``; None where either side is missing."""
    paper = row.paper.values.get(metric.name) if row.paper else None
    ours = row.values.get(metric.nlgkit or "")
    return None if paper is None or ours is None else ours - paper

"""Reports for papers whose data is not here: nlgkit's rows beside the paper's, matched by configuration.

The papers of Pappas et al. and Tokarchuk & Niculae trained on WMT / IWSLT corpora that cannot be
downloaded here; their claims are about *differences between configurations* (joint ≥ tied ≥ learned;
random targets ≈ pre-trained ones). So nlgkit's runs on the data present are shown beside the paper's rows
with the same configuration keys (head, target embeddings, beam …), one paper column per language pair
of theirs, and every table says which data each side used. The shared machinery: scoring a run at any beam
(hypotheses cached in the run directory), BLEU against beam size, word F1 by training frequency, and
tables in Markdown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nlgkit.core.io import read_json
from nlgkit.data.word_counts import read_word_counts, training_word_counts, word_counts_name
from nlgkit.evaluate.collect import RunResult, collect_run, group_runs
from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.published import PaperTable
from nlgkit.evaluate.report import Report, ReportRow
from nlgkit.metrics.vocabulary import DEFAULT_EDGES, bin_labels, word_f1_by_bin

Log = Callable[[str], None]


def header(paper: str, command: str, data: str, runs: Sequence[RunResult] = ()) -> list[str]:
    """The opening of a report: its title, the command that writes it, which data each side used, what BLEU
    was computed against (lowercased references when ``runs`` were prepared lowercased) and how many seeds
    a row stands for."""
    references = ("the test split's raw references, lowercased as the data was prepared (`lowercase = true`, "
                  "so outputs are lowercase too)" if runs and all(references_lowercased(run) for run in runs)
                  else "the raw references of the test split")
    return [f"# {paper} on the data present", "",
            (f"Written by `make reproduce-{command}` (`nlgkit reproduce {command} RUN_DIR…`). "
             f"**Other data:** {data}"),
            (f"BLEU: sacreBLEU on detokenised output against {references}. {seed_note(runs)}Each run's "
             f"training settings and per-epoch validation: `results/{command}_runs.md` (written beside this file "
             "by the same target)."), ""]


def references_lowercased(run: RunResult) -> bool:
    """Whether the run's data was prepared lowercased (its manifest), so its references are lowercase."""
    for path in (run.run_dir / "manifest.json", run.run_dir / "data" / "manifest.json"):
        if path.is_file():
            return bool(read_json(path).get("lowercase", False))
    return False


def seed_note(runs: Sequence[RunResult]) -> str:
    """How many seeds the rows stand for: one each, unless a configuration was repeated with other seeds."""
    if not runs:
        return ""
    repeated = [group for group in group_runs(runs) if len(group) > 1]
    if not repeated:
        return "Every row is one training run (one seed): no seed-to-seed spread is measured. "
    return ("Every row is one training run (one seed) except the rows that name a seed or give a mean over seeds; "
            f"{len(repeated)} {'configuration' if len(repeated) == 1 else 'configurations'} ran with more than one "
            "seed. ")


def runs_table(runs: Sequence[RunResult], describe: Callable[[RunResult], str]) -> list[str]:
    """The runs behind a report: epochs trained, wall time, how each ended and on what hardware."""
    rows = [[describe(run), run.epochs, "–" if run.wall_seconds is None else f"{run.wall_seconds / 3600:.2f}",
             run.status, run.hardware] for run in runs]
    lines = md_table(["run", "best epoch / epochs", "training wall time (h)", "status", "hardware"], rows,
                     [False, True, True, False, False])
    improving = [describe(run) for run in runs if run.still_improving]
    if improving:
        lines += ["", (f"Still improving when last validated (best epoch = last completed epoch; stopped by a "
                       f"limit or not finished, not by early stopping): {', '.join(improving)}. Their scores are "
                       "not converged; differences between runs trained to the same limit compare equal budgets, "
                       "not final models.")]
    return lines


def paper_columns(table: PaperTable) -> list[str]:
    """The paper's language pairs (with their data), in the order its rows list them."""
    return list(dict.fromkeys(str(row.keys.get("pair", "")) for row in table.rows))


def paper_value(table: PaperTable, keys: dict[str, Any], pair: str, metric: str, match: Sequence[str]) -> str:
    """The paper's ``metric`` for the row of ``pair`` whose ``match`` keys equal the run's; "–" if none."""
    for row in table.rows:
        if str(row.keys.get("pair")) != pair:
            continue
        if all(str(row.keys.get(key)).lower() == str(keys.get(key)).lower() for key in match):
            value = row.values.get(metric)
            return "unclear" if value is None and metric in row.unclear else ("–" if value is None else f"{value:.2f}")
    return "–"


def ours(row: ReportRow, metric: str = "bleu") -> str:
    """The run's score, or the seed mean ± sd of a group."""
    if row.summary and row.spread:
        mean, sd = row.spread
        return f"{mean:.2f} ± {sd:.2f} (n = {row.group_size})"
    value = row.values.get(metric)
    return "–" if value is None else f"{value:.2f}"


def versus_baseline(row: ReportRow) -> str:
    """Paired bootstrap against the report's baseline: Δ [95% interval], p."""
    if row.is_baseline:
        return "baseline"
    result = row.significance
    if result is None:
        return "–"
    p = result.p_text()
    return f"{result.delta:+.2f} [{result.ci_low:+.2f}, {result.ci_high:+.2f}], {p}"


def beside_paper(report: Report, table: PaperTable, match: Sequence[str], describe: Callable[[RunResult], str],
                 ours_label: str) -> list[str]:
    """nlgkit's rows (one per run or seed group) beside the paper's cells of the same configuration."""
    pairs = paper_columns(table)
    headers = ["configuration", *match, ours_label, "Δ vs baseline (paired bootstrap)",
               *(f"paper {pair}" for pair in pairs)]
    body = []
    for row in report.rows:
        if row.group_size > 1 and not row.summary:
            continue  # a seed group is shown by its mean
        run = row.runs[0]
        body.append([describe(run), *(str(run.keys.get(key, "–")) for key in match), ours(row),
                     versus_baseline(row), *(paper_value(table, run.keys, pair, "bleu", match) for pair in pairs)])
    # a configuration key is text (a head, a kind of target table) unless every row gives it a number (a beam)
    numeric_keys = [all(cells[1 + i].isdigit() for cells in body) for i in range(len(match))]
    return md_table(headers, body, [False, *numeric_keys, *[True] * (len(headers) - 1 - len(match))])


def bleu_by_beam(run_dirs: Sequence[Path], beams: Sequence[int], describe: Callable[[RunResult], str],
                 device: str = "auto", log: Log | None = None) -> list[str]:
    """BLEU of each run's best checkpoint on the test split at each beam size (hypotheses cached per beam)."""
    body = []
    for run_dir in run_dirs:
        results = [collect_run(Path(run_dir), ("bleu",), device, log, beam=beam) for beam in beams]
        body.append([describe(results[0]), *(f"{r.values['bleu']:.2f}" for r in results)])
    return md_table(["run", *(f"beam {b}" for b in beams)], body)


def f1_by_frequency(results: Sequence[RunResult], describe: Callable[[RunResult], str],
                    edges: Sequence[int] = DEFAULT_EDGES) -> list[str]:
    """compare-mt's word F1 per training-frequency bin for each run (one column per bin)."""
    counts_by_data: dict[tuple[str, str], Counter[str]] = {}
    body = []
    for run in results:
        assert run.config is not None  # collected from a run directory
        key = (run.config.data.dir, str(run.keys["tgt"]))
        if key not in counts_by_data:
            kept = run.run_dir / "data" / word_counts_name(key[1])  # a record's copy: no corpus needed
            counts_by_data[key] = (read_word_counts(kept) if kept.is_file()
                                   else training_word_counts(Path(key[0]), key[1]))
        bins = word_f1_by_bin([h.lower() for h in run.hyps], [r.lower() for r in run.refs], counts_by_data[key], edges)
        body.append([describe(run), *(f"{b['f1']:.3f}" for b in bins)])
    return md_table(["run", *(f"F1, seen {label}" for label in bin_labels(edges))], body)

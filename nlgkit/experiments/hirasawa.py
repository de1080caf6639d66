"""Hirasawa & Komachi (2019) on the data present: their Tables 3–4 and Fig. 1 from run records.

- Tables 3–4: one table per data subset (all 29,000 Multi30K training pairs; only the 6,993 whose photograph is
  here), rows model × initial embeddings × debiasing, columns EN→DE and EN→FR test2016 BLEU and METEOR as
  mean ± sd over seeds with the seed count, the paper's cell beside each. A row with no run says "not run".
- Against random initialisation: each row with pre-trained embeddings against the random row of the same model,
  subset and pair by paired bootstrap on the test set, seed against the same seed.
- Against text-only NMT: each multimodal row against the text-only row of the same embeddings, subset and pair, the
  same way (what the image adds; on the covered subset, the comparison the issue asks for).
- Fig. 1: word F-score by training frequency (compare-mt's buckets) of random, GloVe and debiased GloVe
  initialisation, a table and a panel of ``<output>_fscore.png`` for each model and subset that has them
  (:mod:`nlgkit.experiments.hirasawa_fscore`).

Which row a run belongs to is read from its saved config and data manifest (:mod:`nlgkit.experiments.hirasawa_runs`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from nlgkit.core.errors import DataError
from nlgkit.evaluate.collect import counted_seeds
from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.published import PaperTable
from nlgkit.evaluate.significance import mean_sd, paired_bootstrap
from nlgkit.experiments.common import log, write_output
from nlgkit.experiments.hirasawa_fscore import fscore_lines
from nlgkit.experiments.hirasawa_runs import (
    CAPPED,
    DEBIASING_NAMES,
    EMBEDDING_NAMES,
    MODEL_NAMES,
    PAIR_NAMES,
    PAIRS,
    SUBSET_NAMES,
    SUBSETS,
    Cells,
    HirasawaRun,
    Log,
    Row,
    find_runs,
    finished,
    grid,
    load_run,
    planned_models,
    seed_count,
)
from nlgkit.experiments.other_data import runs_table
from nlgkit.experiments.papers import load_table
from nlgkit.metrics.meteor import MeteorSession

PAPER = "hirasawa"
NOT_RUN = "not run"
TEXT_ONLY = "rnn"  # the model every multimodal one is compared with
NO_PRETRAINED = "No run with pre-trained embeddings on these pairs yet."
NO_MULTIMODAL = "No multimodal run on these pairs yet."


def hirasawa_report(runs: Sequence[HirasawaRun], planned: Mapping[str, Sequence[str]] | None = None,
                    figure: Path | None = None, samples: int = 1000) -> str:
    """The Markdown of ``results/hirasawa.md`` (and the PNG of Fig. 1 at ``figure`` when given and drawable)."""
    table = load_table(PAPER)
    every, duplicates = _seeds(runs)
    _check_tables(every)
    cells, set_aside = _counted(every)
    planned = planned_models() if planned is None else planned
    rows = {subset: _rows(subset, planned.get(subset, ()), cells) for subset in SUBSETS}
    lines = _header(runs, table)
    for subset in SUBSETS:
        lines += [f"## Tables 3–4: {SUBSET_NAMES[subset]}", "", *_data_note(runs, subset),
                  *_score_table(rows[subset], cells, table), ""]
    lines += [_table6_line(table), ""]
    lines += ["## Against random initialisation (paired bootstrap, seed-matched, test2016)", "",
              (f"Each seed of a row against the same seed of the random row of its model, subset and pair: Δ BLEU "
               f"[95 % percentile interval], p = share of {samples:,} resamples of the test set in which the row is "
               f"not better (one-sided). Seed {CAPPED}: both runs stopped by a limit (Runs says which), so the difference "
               "compares training budgets, not final models; a run trained to the stopping rule is compared only "
               "with another such run."), ""]
    lines += _bootstrap_sections(rows, every, samples, _random_row, "random", NO_PRETRAINED)
    lines += ["## Against text-only NMT (paired bootstrap, seed-matched, test2016)", "",
              ("Each seed of a multimodal row against the same seed of the text-only row with the same initial "
               "embeddings, subset and pair (what the image adds), measured as above."), ""]
    lines += _bootstrap_sections(rows, every, samples, _text_row, "text-only", NO_MULTIMODAL)
    lines += fscore_lines(cells, figure, samples)
    other = [run for run in runs if run.place.pair not in PAIRS]
    if other:
        lines += ["## Other runs", "", "Runs of a language pair outside the paper's tables:", "",
                  *md_table(["run", "model", "pair", "embeddings", "BLEU"],
                            [[f"`{r.name}`", r.place.row.model, r.place.pair, _embedding_name(r.place.row),
                              f"{r.result.values['bleu']:.2f}"] for r in other],
                            [False, False, False, False, True]), ""]
    if duplicates:
        lines += [("Left out as repetitions of a run already in its cell (same row, pair and seed): "
                   + ", ".join(f"`{name}`" for name in duplicates) + "."), ""]
    if set_aside:
        lines += [("Left out of the means and the figure because their cell has finished seeds, which a run stopped "
                   "by a limit is not comparable with (the bootstrap still compares each with the capped run of its "
                   "seed): " + ", ".join(f"`{name}`" for name in set_aside) + "."), ""]
    described = {id(run.result): _describe(run) for run in runs}
    lines += ["## Runs", "", *(runs_table([run.result for run in runs], lambda result: described[id(result)])
                               if runs else ["None yet."]), ""]
    return "\n".join(lines)


def _seeds(runs: Sequence[HirasawaRun]) -> tuple[Cells, list[str]]:
    """Each cell's seeds and the repetitions left out."""
    cells: Cells = {}
    duplicates = []
    for run in runs:  # sorted by name: the first of two repetitions stays
        seeds = cells.setdefault((run.place.row, run.place.pair), {})
        if run.place.seed in seeds:
            duplicates.append(run.name)
        else:
            seeds[run.place.seed] = run
    return cells, duplicates


def _check_tables(every: Cells) -> None:
    """A cell's seeds must have started from the same tables: one label (``glove``) over vectors trained on other
    text would be a mean of two experiments. Two runs read the same table when they share a file or content digest,
    directly or through any other run of the report, in this cell or another (one that recorded both: the file
    another saved with its header in another order). Runs whose provenance predates the table digests are not
    checked."""
    same_table = _same_tables([use.digests() for seeds in every.values() for run in seeds.values()
                               for use in run.tables.values() if use.digests()])
    for (row, pair), seeds in every.items():
        for side in ("source", "target"):
            groups: dict[int, set[str]] = {}
            for run in seeds.values():
                digests = run.tables[side].digests() if side in run.tables else set()
                if digests:
                    groups.setdefault(same_table[min(digests)], set()).add(run.name)
            if len(groups) > 1:
                first, second = sorted(min(names) for names in groups.values())[:2]
                raise DataError(f"{first} and {second}: one cell ({row.model}, {row.embeddings}, {row.debiasing}, "
                                f"{pair}) but {side} embeddings from different tables (SHA-256 differs); give one a "
                                "label of its own ([embeddings] label)")


def _same_tables(uses: Sequence[set[str]]) -> dict[str, int]:
    """Digest → the number of its table: the digests of one use (a file and its content) name one table, and uses
    sharing a digest are merged, so a link recorded by one run serves every cell."""
    groups: list[set[str]] = []
    for digests in uses:
        merged = set(digests)
        for group in [group for group in groups if group & merged]:
            groups.remove(group)
            merged |= group
        groups.append(merged)
    return {digest: number for number, group in enumerate(groups) for digest in group}


def _counted(every: Cells) -> tuple[Cells, list[str]]:
    """The seeds each cell's mean counts, and the unfinished runs of cells that have finished seeds (set aside: a
    cell is the mean of runs trained to the stopping rule where it has any). The seed-matched bootstrap keeps them:
    a capped run is still comparable with a capped run of the same seed."""
    cells: Cells = {}
    set_aside = []
    for key, seeds in every.items():
        counted = {id(result) for result in counted_seeds([run.result for run in seeds.values()])}
        cells[key] = {seed: run for seed, run in seeds.items() if id(run.result) in counted}
        set_aside += [run.name for seed, run in sorted(seeds.items()) if id(run.result) not in counted]
    return cells, sorted(set_aside)


def _rows(subset: str, models: Sequence[str], cells: Cells) -> list[Row]:
    """The grid of the planned models, the models with runs, and any other row a run fills, in the paper's order."""
    present = [row for row, pair in cells if row.subset == subset and pair in PAIRS]
    rows = grid(subset, list(dict.fromkeys([*models, *(row.model for row in present)])))
    extra = [row for row in dict.fromkeys(present) if row not in rows]
    return sorted([*rows, *extra], key=Row.sort_key)


def _header(runs: Sequence[HirasawaRun], table: PaperTable) -> list[str]:
    meteor = sorted({run.meteor_note for run in runs}) or ["METEOR 1.5 (none computed yet)"]
    return [
        "# Hirasawa & Komachi (2019) on the data present", "",
        ("Written by `make reproduce-hirasawa` / `make hirasawa-report` (`nlgkit reproduce hirasawa --records "
         "results/runs/hirasawa`) from the runs' records. **Their setting** (the *paper* columns, their Tables 3 "
         "and 4): all 29,000 Multi30K training pairs with their Flickr30K images (ResNet-50 features), embeddings "
         "they trained on Wikipedia alone (300-d word2vec, GloVe and fastText), nmtpytorch, the mean of three "
         "seeds. **Here:** the photographs present are Flickr8k's, which cover 6,993 of the 29,000 training pairs "
         "(243 of test2016's 1,000), so models that read the image at test time train and test on those pairs "
         "only (second table); image features come from EfficientNet-Lite0; the word-vector tables are the ones "
         "each run's `[embeddings]` names (its label is the row). GloVe 6B (Stanford's, Wikipedia 2014 + "
         "Gigaword, English) initialises the source side only and has no paper cell. Compare differences between "
         "rows, not numbers across the two settings."),
        "",
        ("BLEU: sacreBLEU on detokenised output against test2016's raw references as the data was prepared "
         f"(lowercased with `lowercase = true`, the recipes' default). METEOR: {'; '.join(meteor)}. Cells: mean ± sample sd over the row's seeds (n); one seed shows "
         f"its score alone. A cell with seeds trained to the paper's stopping rule (10 validations without a better "
         f"BLEU) counts those alone; n marked {CAPPED}: none of its seeds finished, each stopped by a limit (see "
         f"Runs), so its figures are interim. Paper: " + " ".join(table.notes[-1:])),
        "",
    ]


def _data_note(runs: Sequence[HirasawaRun], subset: str) -> list[str]:
    """How many training and test pairs this subset's runs had (their manifests)."""
    sizes = set()
    for run in runs:
        if run.place.row.subset == subset and run.place.pair in PAIRS:
            lines = run.manifest.get("lines") or {}
            sizes.add((int(lines.get("train", 0)), int(lines.get("test", 0))))
    if not sizes:
        return []
    found = "; ".join(f"{train:,} training / {test:,} test pairs" for train, test in sorted(sizes))
    return [f"Data of the runs here (their manifests): {found}.", ""]


def _score_table(rows: Sequence[Row], cells: Cells, table: PaperTable) -> list[str]:
    headers = ["model", "embeddings", "debiasing"]
    for pair in PAIRS:
        name = PAIR_NAMES[pair]
        headers += [f"{name} n", f"{name} BLEU", "paper BLEU", f"{name} METEOR", "paper METEOR"]
    body = []
    for row in rows:
        cells_of_row: list[str] = []
        for pair in PAIRS:
            runs = [cells[(row, pair)][seed] for seed in sorted(cells.get((row, pair), {}))]
            paper = table.match(row.paper_keys(pair))
            cells_of_row += [seed_count(runs), _mean([run.result.values["bleu"] for run in runs]),
                             _paper(paper.values.get("bleu") if paper else None),
                             _mean([run.meteor for run in runs]),
                             _paper(paper.values.get("meteor") if paper else None)]
        body.append([MODEL_NAMES.get(row.model, f"`{row.model}`"), _embedding_name(row),
                     "–" if row.embeddings == "random" else DEBIASING_NAMES.get(row.debiasing, row.debiasing),
                     *cells_of_row])
    return md_table(headers, body, [False, False, False, *[True] * (len(headers) - 3)])


def _table6_line(table: PaperTable) -> str:
    """Their Table 6's cells that Tables 3–4 lack: VAG-NET with BPE, where a BPE run would get a row of its own."""
    cells = []
    for pair in PAIRS:
        row = table.match(Row("all", "vag_nmt", "random", "none", "bpe-joint:10000").paper_keys(pair))
        if row is not None:
            cells.append(f"{PAIR_NAMES[pair]} {_paper(row.values.get('bleu'))} BLEU / "
                         f"{_paper(row.values.get('meteor'))} METEOR")
    return ("Their Table 6 adds VAG-NET with random initialisation on 10k joint BPE merges: " + ", ".join(cells)
            + " (BLEU below its word-level random row in both pairs). A run on subwords, or with other initial "
            "scales (`train.weight_init`, `embeddings.normalize`, `embeddings.match_scale`), gets a row of its own, "
            "named in brackets.")


def _embedding_name(row: Row) -> str:
    name = EMBEDDING_NAMES.get(row.embeddings, f"`{row.embeddings}`")
    variants = [part for part in (row.subword, row.init, row.table_rows) if part not in ("none", "default")]
    return f"{name} ({'; '.join(variants)})" if variants else name


def _mean(values: Sequence[float | None]) -> str:
    """Mean ± sd of a row's seeds, the one score of a single seed, "not run" without any."""
    if not values:
        return NOT_RUN
    if any(value is None for value in values):
        return "n/a"
    mean, sd = mean_sd([float(value) for value in values if value is not None])
    return f"{mean:.2f}" if math.isnan(sd) else f"{mean:.2f} ± {sd:.2f}"


def _paper(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _random_row(row: Row) -> Row | None:
    """The random-initialisation row a pre-trained row is compared with: the same subset, model, subword and
    initial weights, no table (none for a random row)."""
    return None if row.embeddings == "random" else replace(row, embeddings="random", debiasing="none",
                                                           table_rows="default")


def _text_row(row: Row) -> Row | None:
    """The text-only row a multimodal row is compared with: the same subset, embeddings, subword and scales."""
    return None if row.model == TEXT_ONLY else replace(row, model=TEXT_ONLY)


def _bootstrap_sections(rows: Mapping[str, Sequence[Row]], cells: Cells, samples: int,
                        baseline: Callable[[Row], Row | None], versus: str, empty: str) -> list[str]:
    """One bootstrap table per data subset under its own heading (``empty`` where a subset has none)."""
    lines = []
    for subset in SUBSETS:
        table = _bootstrap_table(rows[subset], cells, samples, baseline, versus)
        lines += [f"### {SUBSET_NAMES[subset]}", "", *(table or [empty]), ""]
    return lines


def _bootstrap_table(rows: Sequence[Row], cells: Cells, samples: int, baseline: Callable[[Row], Row | None],
                     versus: str) -> list[str]:
    """Each row that has runs and a baseline row against that baseline, pair by pair (empty: no such row)."""
    body = []
    for row in rows:
        base = baseline(row)
        if base is None or not any((row, pair) in cells for pair in PAIRS):
            continue
        body.append([MODEL_NAMES.get(row.model, f"`{row.model}`"), _embedding_name(row),
                     "–" if row.embeddings == "random" else DEBIASING_NAMES.get(row.debiasing, row.debiasing),
                     *(_versus(cells.get((base, pair), {}), cells.get((row, pair), {}), samples, versus)
                       for pair in PAIRS)])
    if not body:
        return []
    return md_table(["model", "embeddings", "debiasing", *(f"{PAIR_NAMES[p]} vs {versus}" for p in PAIRS)], body,
                    [False] * (3 + len(PAIRS)))


def _versus(baseline: Mapping[int, HirasawaRun], runs: Mapping[int, HirasawaRun], samples: int, versus: str) -> str:
    if not runs:
        return NOT_RUN
    parts = []
    for seed in sorted(runs):
        base, run = baseline.get(seed), runs[seed]
        if base is None:
            parts.append(f"seed {seed}: no {versus} run of this seed")
        elif finished(base) != finished(run):
            parts.append(f"seed {seed}: not compared (one of the two finished, the other stopped by a limit)")
        elif base.result.refs != run.result.refs:
            parts.append(f"seed {seed}: another test set than the {versus} run's")
        else:
            result = paired_bootstrap(base.result.hyps, run.result.hyps, run.result.ref_streams, samples=samples)
            mark = "" if finished(run) else f" {CAPPED}"
            parts.append(f"seed {seed}{mark}: {result.delta:+.2f} [{result.ci_low:+.2f}, {result.ci_high:+.2f}], "
                         f"{result.p_text()}")
    return "; ".join(parts)


def _describe(run: HirasawaRun) -> str:
    """A run's name, the cell it fills and, where its provenance has them, its tables (the first digits of their
    SHA-256) and how many vocabulary rows each supplied: a pre-trained row is only as good as its coverage."""
    row = run.place.row
    label = row.embeddings + ("" if row.debiasing == "none" else f"+{row.debiasing}")
    tables = "".join(f", {side} table {use.sha256[:8] if use.sha256 else '(package)'}: {use.found:,} of "
                     f"{use.rows:,} words" for side, use in run.tables.items())
    return f"`{run.name}`: {row.model}, {run.place.pair}, {label}, seed {run.place.seed}, {row.subset}{tables}"


def hirasawa(run_dirs: list[str], records: str | None, output: str | None, device: str = "auto",
             report_log: Log | None = log) -> str:
    """``nlgkit reproduce hirasawa``: every record under ``records`` and every trained run of ``run_dirs`` in the
    paper's layout; given directories not trained yet are listed. The figure goes beside ``output``."""
    found, waiting = find_runs(run_dirs, records, report_log)
    with MeteorSession() as meteor:
        runs = [load_run(path, device, report_log, meteor) for path in found]
    figure = Path(output).with_name(f"{Path(output).stem}_fscore.png") if output else None
    text = hirasawa_report(runs, figure=figure)
    if waiting:
        text += "\nNot trained yet: " + ", ".join(f"`{name}`" for name in waiting) + ".\n"
    return write_output(text, output)

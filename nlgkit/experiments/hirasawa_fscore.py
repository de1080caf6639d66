"""Hirasawa & Komachi's Fig. 1 from run records: word F-score by training frequency of random, GloVe and debiased
GloVe initialisation, a table and a figure panel for each model and subset that has them, and a paired bootstrap of
the rare words' pooled F-score against random initialisation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING

from nlgkit.core.figures import save_png
from nlgkit.evaluate.analysis.word_fscore import (
    RARE_NAME,
    bucket_scores,
    fscore_figure,
    fscore_table,
    mean_fscores,
    pooled_fscore,
    rare_bootstrap,
)
from nlgkit.experiments.hirasawa_runs import (
    CAPPED,
    MODEL_NAMES,
    PAIR_NAMES,
    PAIRS,
    SUBSET_NAMES,
    SUBSETS,
    Cells,
    HirasawaRun,
    Row,
    finished,
    run_word_matches,
    seed_count,
)

if TYPE_CHECKING:
    import numpy as np

FIGURE_MODELS = ("vag_nmt", "imagination", "doubly_attentive", "rnn")  # the paper's Fig. 1 is VAG-NET's
FIGURE_SYSTEMS = {("random", "none"): "random", ("glove", "none"): "GloVe", ("glove", "lc"): "GloVe + LC",
                  ("glove", "abtt"): "GloVe + ABTT"}


def fscore_lines(cells: Cells, figure: Path | None, samples: int) -> list[str]:
    """Their Fig. 1 per pair and model: every model and subset with a random and a GloVe row run gets a table and a
    panel (VAG-NMT first, as theirs), so the rare-word claim is read off each model the runs cover, not one."""
    lines = ["## Word F-score by training frequency (their Fig. 1)", "",
             ("compare-mt's measure on test2016: outputs and references re-tokenised as the data was prepared, each "
              "word bucketed by its count in the run's training target vocabulary (every training word: the "
              "recipes keep min_freq = 1); matches clipped per sentence, precision and recall pooled over the "
              "bucket's words. F is the mean over the system's seeds; reference tokens: how many test tokens a "
              f"bucket holds; {RARE_NAME}: the words seen one to four times taken as one bucket (a steadier "
              "figure for the claim that pre-trained vectors help rare words most). The paper shows VAG-NET's "
              "(random, GloVe, GloVe + LC, GloVe + ABTT) as a figure without numbers."), ""]
    panels: dict[str, dict[str, list[float]]] = {}
    for pair in PAIRS:
        chosen = _figure_systems(cells, pair)
        if not chosen:
            lines += [f"{PAIR_NAMES[pair]}: needs a random and a GloVe run of one model and subset.", ""]
        for subset, model, systems in chosen:
            matches = {name: [m for m in map(run_word_matches, runs) if m is not None]
                       for name, runs in systems.items()}
            seeds = {f"{name} (n = {seed_count(systems[name])})": [bucket_scores(m) for m in runs]
                     for name, runs in matches.items()}
            reference = next(iter(seeds.values()))[0]  # word-level rows only: a random run is there
            means = {name: mean_fscores(runs) for name, runs in seeds.items()}
            rare = {name: fmean(pooled_fscore(run) for run in runs) for name, runs in seeds.items()}
            title = f"{PAIR_NAMES[pair]}, {MODEL_NAMES.get(model, model)}, {SUBSET_NAMES[subset].split(' (')[0]}"
            panels[title.replace("`", "")] = means
            lines += [f"### {title}", "", *fscore_table([bucket.ref_tokens for bucket in reference], means, rare), "",
                      *_rare_bootstrap_line(matches, samples), ""]
            budgets = {any(finished(run) for run in runs) for runs in systems.values()}
            if len(budgets) > 1:
                lines += [(f"Columns marked {CAPPED} are interim (every seed stopped by a limit); beside a column "
                           "trained to the stopping rule they compare training budgets, not initialisations."), ""]
    if panels and figure is not None:
        save_png(fscore_figure(panels), figure)
        lines += [f"![Word F-score by training frequency]({figure.name})", ""]
    elif figure is not None:
        figure.unlink(missing_ok=True)  # a figure of earlier runs beside a report that has none would mislead
    return lines


def _rare_bootstrap_line(matches: Mapping[str, Sequence[np.ndarray]], samples: int) -> list[str]:
    """Each pre-trained system's pooled rare-word F against random's by paired bootstrap over test sentences (seed
    means on each draw): the rare buckets hold a few hundred tokens, so a gap of a hundredth may be luck."""
    random = matches.get("random")
    parts = []
    for name, runs in matches.items():
        if name == "random" or not random or not runs:
            continue
        result = rare_bootstrap(random, runs, samples)
        parts.append(f"{name} {result.delta:+.3f} [{result.ci_low:+.3f}, {result.ci_high:+.3f}], {result.p_text()}")
    if not parts:
        return []
    return [f"{RARE_NAME} against random, paired bootstrap over test sentences ({samples} resamples; each system the "
            "mean of its seeds, so the interval is the test set's sampling error, not the spread between seeds): "
            + "; ".join(parts) + "."]


def _figure_systems(cells: Cells, pair: str) -> list[tuple[str, str, dict[str, list[HirasawaRun]]]]:
    """Each (subset, model) of ``pair`` with a random row and at least one GloVe row, its systems' runs on the random
    row's test references."""
    chosen = []
    for model in FIGURE_MODELS:
        for subset in SUBSETS:
            systems = {}
            for (embeddings, debiasing), name in FIGURE_SYSTEMS.items():
                seeds = cells.get((Row(subset, model, embeddings, debiasing), pair), {})
                if seeds:
                    systems[name] = [seeds[seed] for seed in sorted(seeds)]
            if "random" in systems and len(systems) > 1:
                refs = systems["random"][0].result.refs
                chosen.append((subset, model, {name: [run for run in runs if run.result.refs == refs]
                                               for name, runs in systems.items()}))
    return chosen

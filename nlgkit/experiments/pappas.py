"""Pappas et al. (2018) on the data present: their Table 2, ablations and sampling speed from trained runs.

- Table 2: learned, tied and joint heads (d_j 512 and 2048) at each subword vocabulary size, BLEU and
  parameters, each head against the learned head of the same vocabulary by paired bootstrap; runs that differ
  only in their seed add a row with their mean ± sd; then the paper's own cells as differences to its NMT
  baseline (their WMT pairs), and the claim joint ≥ tied ≥ learned.
- Ablations: the joint head's structures (full, output only, context only, bilinear).
- Sampling: trained runs with sampled softmax shares against the full softmax, BLEU and training target tokens/s.
- Their Table 4 (training speed by sampling share) is measured apart, on synthetic batches:
  :mod:`nlgkit.experiments.pappas_speed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from statistics import fmean
from typing import Any

from nlgkit.core.config import RunConfig
from nlgkit.data.vocab import Vocabulary
from nlgkit.evaluate.collect import RunResult, collect_runs, group_runs
from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.significance import mean_sd, paired_bootstrap
from nlgkit.experiments.common import log, research_report
from nlgkit.experiments.other_data import Log, header, runs_table
from nlgkit.experiments.papers import load_table
from nlgkit.runs.metrics_log import MetricsLog

PAPER = "pappas2018_table2"
ABLATION_PAPER = "pappas2018_table3"
ABLATION_ORDER = ("learned", "tied", "bilinear", "output", "context", "full")  # their Table 3's rows


def run_config(run: RunResult) -> RunConfig:
    assert run.config is not None  # collected from a run directory
    return run.config


def head_label(config: RunConfig) -> str:
    """learned / tied / joint (d_j 512) / joint output-only / joint bilinear / … with the sampling share if any."""
    head: Any = config.head
    label = head.type
    if head.type == "joint":  # only the full form has a free d_j: the ablations' is the decoder's or E's size
        label = (f"joint (d_j {head.joint_dim})" if head.structure == "full" else
                 f"joint {head.structure}" + ("" if head.structure == "bilinear" else "-only"))
    share = head.sampling.share
    return label + (f", sampled {share:.0%}" if share < 1.0 else "")


def target_vocabulary(run: RunResult) -> int:
    return len(Vocabulary.load(run.run_dir / "data" / f"vocab.{run_config(run).data.tgt_lang}.txt"))


def training_speed(run: RunResult) -> float | None:
    """Mean training target tokens/s over the run's logged windows."""
    speeds = [e["tokens_per_s"] for e in MetricsLog(run.run_dir / "metrics.jsonl").read() if e["event"] == "train"]
    return fmean(speeds) if speeds else None


def overflow_share(run: RunResult) -> float | None:
    """The share of a sampled run's updates whose batch held more distinct target words than the sampling
    budget, so that they trained on those words alone, with no negatives (None: not a sampled run).

    The head counts such batches from the start of each training process; each process's last ``train``
    event pairs that count with the updates it made since it started or resumed.
    """
    overflowed = updates = 0
    segment_start, last = 0, None
    for event in [*MetricsLog(run.run_dir / "metrics.jsonl").read(), {"event": "resume", "update": 0}]:
        if event["event"] in ("start", "resume"):
            if last is not None:
                overflowed += last["sampling_overflows"]
                updates += last["update"] - segment_start
            segment_start, last = event.get("update", 0), None
        elif event["event"] == "train" and "sampling_overflows" in event:
            last = event
    return overflowed / updates if updates else None


def versus(base: RunResult, run: RunResult, samples: int = 1000) -> str:
    """Paired bootstrap of ``run`` against ``base`` (same test set): Δ BLEU [95% interval], p."""
    if run is base:
        return "baseline"
    result = paired_bootstrap(base.hyps, run.hyps, [run.refs], samples=samples)
    p = result.p_text()
    return f"{result.delta:+.2f} [{result.ci_low:+.2f}, {result.ci_high:+.2f}], {p}"


def pappas_report(run_dirs: Sequence[Path], device: str = "auto", log: Log | None = None) -> str:
    """The Markdown of ``results/pappas.md``."""
    runs = collect_runs(run_dirs, device=device, log=log)
    by_subword: dict[str, list[RunResult]] = {}
    for run in runs:
        by_subword.setdefault(str(run.keys["subword"]), []).append(run)
    data = sorted({f"{r.keys['dataset']} {r.keys['pair']}" for r in runs})
    lines = [
        *header("Pappas et al. (2018)", "pappas",
                f"nlgkit's runs use {', '.join(data)} with joint BPE vocabularies of several sizes and Pappas et "
                "al.'s 2-layer LSTM with Luong attention (`lstm_luong`); the paper used WMT'17 En↔Fi and En↔De with "
                "32K-128K BPE merges. Compare directions of differences, not numbers across datasets. Δ is a paired "
                "bootstrap (1,000 resamples) against the learned head of the same vocabulary: Δ BLEU [95 % percentile "
                "interval], p = share of resamples in which the head is not better (one-sided: p < 0.025 goes with "
                "an interval that excludes 0).", runs),
        "## Table 2: output layers by vocabulary size",
        "",
    ]
    body, claims, seeded = [], [], False
    for subword, group in sorted(by_subword.items(), key=lambda item: target_vocabulary(item[1][0])):
        seed_groups = group_runs([r for r in group if _is_main(run_config(r))])
        learned = _first_seed(seed_groups, "learned")
        for seeds in seed_groups:
            for run in seeds:
                seed = f", seed {run.keys['seed']}" if len(seeds) > 1 else ""
                body.append([f"{head_label(run_config(run))} (`{run.run_dir.name}`{seed})", subword,
                             f"{target_vocabulary(run):,}", f"{run.values.get('params', 0) / 1e6:.1f}",
                             f"{run.values['bleu']:.2f}", versus(learned, run) if learned else "–"])
            if len(seeds) > 1:
                seeded = True
                body.append([f"{head_label(run_config(seeds[0]))}: mean of {len(seeds)} seeds", subword,
                             f"{target_vocabulary(seeds[0]):,}", f"{seeds[0].values.get('params', 0) / 1e6:.1f}",
                             _mean_sd(seeds), "–"])
        claims += _claim(subword, seed_groups)
    lines += md_table(["head", "subword", "|V_tgt|", "|Θ| (M)", "BLEU", "Δ vs learned"], body,
                      [False, False, True, True, True, True])
    if seeded:
        lines += ["", ("Where a head ran with several seeds, each seed is compared with the learned head's "
                       "first seed, and the mean ± sd (sample sd) row summarises them.")]
    lines += ["", "## The paper's Table 2 (their data: WMT'17, multi-bleu on tokenised text)", "",
              *_paper_lines(), "", "## The claim: joint ≥ tied ≥ learned", "", *claims]
    lines += _ablation_lines(runs) + _sampling_lines(runs)
    lines += ["", "## Training speed by sampling share (their Table 4)", "",
              ("Measured apart from these runs, at the paper's |V| ≈ 128K on synthetic batches (Multi30K's "
               "vocabularies are far smaller): `results/pappas_speed.md`, written by "
               "`nlgkit reproduce pappas-speed`.")]
    lines += ["", "## Runs", "", *runs_table(runs, lambda run: f"`{run.run_dir.name}`"), ""]
    return "\n".join(lines)


def _is_main(config: RunConfig) -> bool:
    head: Any = config.head
    return head.sampling.share == 1.0 and (head.type != "joint" or head.structure == "full")


def _first_seed(seed_groups: list[list[RunResult]], kind: str) -> RunResult | None:
    """The lowest-seed run of the group with this head type that paired bootstraps compare: the first, or for
    the joint head the one of the smallest d_j (the paper's default 512; larger ones are rows of their own)."""
    groups = [seeds for seeds in seed_groups if run_config(seeds[0]).head.type == kind]
    if kind == "joint":
        groups.sort(key=lambda seeds: run_config(seeds[0]).head.joint_dim)
    return groups[0][0] if groups else None


def _mean_sd(seeds: list[RunResult]) -> str:
    """BLEU over a seed group: mean ± sample sd, or the one score (a single run has no spread to show)."""
    mean, sd = mean_sd([run.values["bleu"] for run in seeds])
    return f"{mean:.2f} ± {sd:.2f} (n = {len(seeds)})" if len(seeds) > 1 else f"{mean:.2f} (n = 1)"


def _claim(subword: str, seed_groups: list[list[RunResult]]) -> list[str]:
    """Paired bootstraps between the heads' first seeds, each against the next head down the claimed order (so
    the part of the order that the runs present can test is reported while a head is still missing); with
    several seeds, every head's mean ± sd too."""
    order = [(kind, _first_seed(seed_groups, kind)) for kind in ("joint", "tied", "learned")]
    present = [(kind, run) for kind, run in order if run is not None]
    missing = [kind for kind, run in order if run is None]
    if len(present) < 2:
        return [f"- {subword}: needs at least two of the learned, tied and joint heads."]
    steps = "; ".join(f"{upper} − {lower} {versus(lower_run, upper_run)}"
                      for (upper, upper_run), (lower, lower_run) in pairwise(present))
    line = f"- {subword}: {steps}" + (f" ({' and '.join(missing)} not run: the order is tested in part)."
                                      if missing else ".")
    if any(len(seeds) > 1 for seeds in seed_groups):
        means = "; ".join(f"{head_label(run_config(seeds[0]))} {_mean_sd(seeds)}" for seeds in seed_groups)
        line += f" Over seeds: {means}."
    return [line]


def _paper_lines() -> list[str]:
    """The paper's BLEU per (pair, subword) and head, with each head's difference to its NMT baseline."""
    table = load_table(PAPER)
    columns = list(dict.fromkeys((str(r.keys["pair"]), str(r.keys["subword"])) for r in table.rows))
    heads = list(dict.fromkeys(str(r.keys["head"]) for r in table.rows))
    body = []
    for head in heads:
        cells = []
        for pair, subword in columns:
            row = table.match({"dataset": "wmt17", "pair": pair, "subword": subword, "head": head})
            base = table.match({"dataset": "wmt17", "pair": pair, "subword": subword, "head": "learned"})
            value = row.values.get("bleu") if row else None
            reference = base.values.get("bleu") if base else None
            if value is None:
                cells.append("–")
            elif head == "learned" or reference is None:
                cells.append(f"{value:.2f}")
            else:
                cells.append(f"{value:.2f} ({value - reference:+.2f})")
        body.append([head, *cells])
    return md_table(["head", *(f"{pair} {subword}" for pair, subword in columns)], body)


def _ablation_lines(runs: list[RunResult]) -> list[str]:
    """Their Table 3 on each vocabulary with an ablation of the joint head or several d_j: learned, tied and
    every full-softmax joint run, each against the learned head, beside the paper's row of the same form."""
    paper = load_table(ABLATION_PAPER)
    full = [r for r in runs if run_config(r).head.sampling.share == 1.0]
    forms: dict[str, set[tuple[str, int]]] = {}
    for run in full:
        if run_config(run).head.type == "joint":
            keys = _ablation_keys(run_config(run).head)
            forms.setdefault(str(run.keys["subword"]), set()).add((keys["structure"], keys["joint_dim"]))
    ablated = sorted(subword for subword, found in forms.items() if len(found) > 1)
    if not ablated:
        return []
    body = []
    for subword in ablated:
        group = [r for r in full if r.keys["subword"] == subword
                 and run_config(r).head.type in ("learned", "tied", "joint")]
        base = next((r for r in group if run_config(r).head.type == "learned"), None)
        baseline = paper.match({"head": "learned", "structure": "", "joint_dim": 0})
        for run in sorted(group, key=_ablation_key):
            head: Any = run_config(run).head
            row = paper.match(_ablation_keys(head))
            bleu = None if row is None else row.values["bleu"]
            paper_base = None if baseline is None else baseline.values["bleu"]
            theirs = "–" if bleu is None else f"{bleu:.2f}" + (
                "" if head.type == "learned" or paper_base is None else f" ({bleu - paper_base:+.2f})")
            body.append([f"{head_label(run_config(run))} (`{run.run_dir.name}`)", row.note if row else "–", subword,
                         f"{run.values.get('params', 0) / 1e6:.1f}", f"{run.values['bleu']:.2f}",
                         versus(base, run) if base else "–", theirs])
    return ["", "## Their Table 3: ablations of the joint head", "",
            "The paper's column: WMT'17 De→En with |V| ≈ 32K, BLEU (difference to their learned NMT).", "",
            *md_table(["head", "layer form", "subword", "|Θ| (M)", "BLEU", "Δ vs learned", "paper BLEU"],
                      body, [False, False, False, True, True, True, True])]


def _ablation_keys(head: Any) -> dict[str, Any]:
    """The paper table's keys of a head: (type, structure, d_j), d_j only for the full joint form."""
    if head.type != "joint":
        return {"head": head.type, "structure": "", "joint_dim": 0}
    return {"head": "joint", "structure": head.structure,
            "joint_dim": head.joint_dim if head.structure == "full" else 0}


def _ablation_key(run: RunResult) -> tuple[int, int]:
    keys = _ablation_keys(run_config(run).head)
    return ABLATION_ORDER.index(keys["structure"] or keys["head"]), keys["joint_dim"]


def _sampling_lines(runs: list[RunResult]) -> list[str]:
    """Each sampled run after the full-softmax run of the same head and vocabulary (shown once)."""
    sampled = [r for r in runs if run_config(r).head.sampling.share < 1.0]
    if not sampled:
        return []

    def full_softmax(run: RunResult) -> RunResult | None:
        label = head_label(run_config(run)).split(", sampled")[0]
        return next((r for r in runs if r.keys["subword"] == run.keys["subword"] and _is_main(run_config(r))
                     and head_label(run_config(r)) == label), None)

    body, shown = [], set()
    for run in sampled:
        full = full_softmax(run)
        full_speed = training_speed(full) if full else None
        for row_run in ([full] if full is not None and id(full) not in shown else []) + [run]:
            shown.add(id(row_run))
            speed, overflow = training_speed(row_run), overflow_share(row_run)
            body.append([f"{head_label(run_config(row_run))} (`{row_run.run_dir.name}`)",
                         str(row_run.keys["subword"]), f"{row_run.values['bleu']:.2f}",
                         versus(full, row_run) if full else "–", "–" if speed is None else f"{speed:,.0f}",
                         "–" if speed is None or not full_speed else f"{speed / full_speed:.2f}×",
                         "–" if overflow is None else f"{100 * overflow:.1f} %"])
    return ["", "## Sampled softmax: BLEU and training speed of the trained runs", "",
            ("Training target tokens/s: the mean over each run's logged windows, on the hardware listed under Runs. "
             "Updates over budget: the share of training updates whose batch alone held more distinct target "
             "words than share × |V_tgt|; those kept all of them and drew no negatives."),
            "", *md_table(["head", "subword", "BLEU", "Δ vs full softmax", "target tokens/s", "speed vs full",
                           "updates over budget"], body, [False, False, True, True, True, True, True])]


def pappas(run_dirs: list[str], output: str | None) -> str:
    """``nlgkit reproduce pappas``: the report of the runs trained so far; the runs not trained yet are listed."""
    return research_report("Pappas et al. (2018)", lambda ready: pappas_report(ready, log=log), run_dirs, output)

"""Tokarchuk & Niculae (2024) on the data present: their Table 1, Fig. 1 and Fig. 3 from trained runs.

- Table 1: every run at the recipe's beam (5) and greedy, beside the paper's cells of the same head,
  target embeddings and beam (their WMT pairs), with a paired bootstrap against the softmax baseline.
- Fig. 1: test BLEU against beam size.
- Fig. 3: word F1 by training frequency (compare-mt's bins).
- The claim: random (uniform sphere) targets ≈ pre-trained ones, tested by a paired bootstrap between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nlgkit.evaluate.collect import RunResult, collect_runs
from nlgkit.evaluate.report import build_report
from nlgkit.evaluate.significance import paired_bootstrap
from nlgkit.experiments.common import log, research_report
from nlgkit.experiments.other_data import Log, beside_paper, bleu_by_beam, f1_by_frequency, header, runs_table
from nlgkit.experiments.papers import load_table

PAPER = "tokarchuk2024_table1"
MATCH = ("head", "target_embeddings", "beam")


def describe(run: RunResult) -> str:
    """``softmax`` or ``continuous, <targets> targets``, and the run directory's name."""
    kind = "softmax" if run.keys["head"] != "continuous" else f"continuous, {run.keys['target_embeddings']} targets"
    return f"{kind} (`{run.run_dir.name}`)"


def claim_lines(results: Sequence[RunResult], samples: int = 1000) -> list[str]:
    """Random sphere vs pre-trained targets at the recipe's beam: the paper's claim is that they are close."""
    by_targets = {run.keys["target_embeddings"]: run for run in results if run.keys["head"] == "continuous"}
    if "uniform" not in by_targets or "pretrained" not in by_targets:
        return ["The claim (random ≈ pre-trained targets) needs both a `uniform` and a `pretrained` run."]
    pre, uni = by_targets["pretrained"], by_targets["uniform"]
    result = paired_bootstrap(pre.hyps, uni.hyps, [uni.refs], samples=samples)
    p = result.p_text()
    return [(f"Random sphere targets − pre-trained targets (beam {uni.keys['beam']}): {result.delta:+.2f} BLEU "
            f"[{result.ci_low:+.2f}, {result.ci_high:+.2f}] by paired bootstrap ({samples} resamples), {p} that "
            "random targets are not better. The paper finds them within about a BLEU of each other, and better "
            "with more data.")]


def tokarchuk_report(run_dirs: Sequence[Path], beams: Sequence[int] = tuple(range(1, 11)), device: str = "auto",
                     log: Log | None = None) -> str:
    """The Markdown of ``results/tokarchuk.md``; the first run is the softmax baseline."""
    table = load_table(PAPER)
    at_recipe_beam = collect_runs(run_dirs, device=device, log=log)
    greedy = collect_runs(run_dirs, device=device, log=log, beam=1)
    report = build_report(at_recipe_beam + greedy, table, baseline=run_dirs[0])
    data = sorted({f"{r.keys['dataset']} {r.keys['pair']} ({r.keys['subword']})" for r in at_recipe_beam})
    lines = [
        *header("Tokarchuk & Niculae (2024)", "tokarchuk",
                f"nlgkit's runs use {', '.join(data)}; the paper's columns are its WMT pairs (newstest, mBART "
                "SentencePiece, base Transformers). Compare differences between rows, not numbers across columns.",
                at_recipe_beam),
        "## Table 1: BLEU by output layer and target embeddings",
        "",
        *beside_paper(report, table, MATCH, describe, "nlgkit BLEU"),
        "",
        "## The claim",
        "",
        *claim_lines(at_recipe_beam),
        "",
        "## BLEU against beam size (their Fig. 1)",
        "",
        *bleu_by_beam(run_dirs, beams, describe, device, log),
        "",
        f"## Word F1 by training frequency (their Fig. 3; beam {at_recipe_beam[0].keys['beam']})",
        "",
        *f1_by_frequency(at_recipe_beam, describe),
        "",
        "## Runs",
        "",
        *runs_table(at_recipe_beam, describe),
        "",
    ]
    return "\n".join(lines)


def tokarchuk(run_dirs: list[str], output: str | None, beams: tuple[int, ...] = tuple(range(1, 11))) -> str:
    """``nlgkit reproduce tokarchuk``: the report of the runs trained so far, softmax baseline first; the runs not
    trained yet are listed."""
    return research_report("Tokarchuk & Niculae (2024)", lambda ready: tokarchuk_report(ready, beams, log=log),
                           run_dirs, output)

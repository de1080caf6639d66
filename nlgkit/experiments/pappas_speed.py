"""Pappas et al.'s Table 4 (``nlgkit reproduce pappas-speed``): training target tokens/s of each output layer at
each sampling share, measured on synthetic batches at the paper's vocabulary size, beside the paper's figures.

Multi30K cannot give |V| = 128K (its joint BPE 8k vocabulary has 4,322 English entries, the Shalev recipes'
word vocabulary 5,893), hence synthetic batches; each cell runs in its own process
(:func:`nlgkit.experiments.bench.research.spawn_model_training`), so its peak memory is its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.recipes import load_recipe
from nlgkit.evaluate.markdown import md_table
from nlgkit.experiments.bench.research import spawn_model_training
from nlgkit.experiments.common import RECIPES, log, write_output
from nlgkit.experiments.papers import load_table
from nlgkit.runs.provenance import cpu_name, git_revision, thread_count

SPEED_PAPER = "pappas2018_table4"
SPEED_HEADS = (("learned", 0), ("tied", 0), ("joint", 512), ("joint", 2048), ("joint", 4096))  # (type, d_j)
SPEED_SHARES = (1.0, 0.5, 0.25, 0.05)


PAPER_VOCAB = 128_000  # Pappas et al.'s joint BPE vocabulary (En→De, Table 4)


def speed_overrides(kind: str, joint_dim: int, share: float) -> list[str]:
    """The ``--set`` options of one cell of the speed table."""
    options = [f"head.type='{kind}'", f"head.sampling.share={share}"]
    return options + ([f"head.joint_dim={joint_dim}"] if kind == "joint" else [])


def _speed_label(kind: str, joint_dim: int) -> str:
    return f"joint (d_j {joint_dim})" if kind == "joint" else kind


def speed_report(results: Sequence[dict[str, Any]], setting: str) -> str:
    """The Markdown of ``results/pappas_speed.md``: whole-update training speed of each output layer at each
    sampling share beside the paper's Table 4, each as a ratio to the learned head at the same share (absolute
    speeds differ by machine; the ratios are what the paper's claims are about)."""
    ours = {(r["head"], r["joint_dim"], r["share"]): r for r in results}
    paper = load_table(SPEED_PAPER)

    def theirs(kind: str, joint_dim: int, share: float) -> float | None:
        row = paper.match({"head": kind, "joint_dim": joint_dim, "share": share})
        return row.values.get("tokens_per_s") if row else None

    def cell(speed: float | None, base: float | None) -> str:
        if speed is None:
            return "–"
        return f"{speed:,.0f}" + (f" ({speed / base:.2f}×)" if base else "")

    def speed(kind: str, joint_dim: int, share: float) -> float | None:
        found = ours.get((kind, joint_dim, share))
        return found["tokens_per_s"] if found else None

    columns = ["full softmax" if share == 1.0 else f"sampled {share:.0%}" for share in SPEED_SHARES]
    nlgkit_rows = [[_speed_label(kind, dj), *(cell(speed(kind, dj, s), speed("learned", 0, s)) for s in SPEED_SHARES)]
                   for kind, dj in SPEED_HEADS]
    paper_rows = [[_speed_label(kind, dj), *(cell(theirs(kind, dj, s), theirs("learned", 0, s))
                                             for s in SPEED_SHARES[1:])] for kind, dj in SPEED_HEADS]
    on_gpu = any(r.get("peak_gpu_mib") is not None for r in results)
    memory, memory_title = (("peak_gpu_mib", "Peak GPU memory (MiB, torch's max allocated)") if on_gpu
                            else ("peak_rss_mib", "Peak memory (MiB, the process's max RSS)"))
    memory_rows = [[_speed_label(kind, dj), *(f"{ours[kind, dj, s][memory]:,.0f}" if (kind, dj, s) in ours
                                              else "–" for s in SPEED_SHARES)] for kind, dj in SPEED_HEADS]
    gains = []
    for kind, dj in SPEED_HEADS:
        mine, low, high = speed(kind, dj, 0.05), theirs(kind, dj, 0.05), theirs(kind, dj, 0.5)
        base = speed(kind, dj, 0.5)
        if mine and base and low and high:
            gains.append(f"{_speed_label(kind, dj)} {mine / base:.2f}× (paper {low / high:.2f}×)")
    return "\n".join([
        "# Pappas et al. (2018), Table 4: training speed with sampled softmax", "",
        "Written by `make reproduce-pappas` (`nlgkit reproduce pappas-speed`). " + setting, "",
        ("Each cell: training target tokens/s of whole updates (forward, backward, gradient clipping and the Adam "
         "step over every parameter), and in brackets the ratio to the learned head at the same share. Each cell "
         "ran in its own process."), "",
        "## nlgkit", "", *md_table(["head", *columns], nlgkit_rows), "",
        "## The paper's Table 4 (their GPUs, En→De, |V| ≈ 128K; no full-softmax column: it ran out of memory)", "",
        *md_table(["head", *columns[1:]], paper_rows), "",
        "## Speed-up of 5 % over 50 % sampling", "",
        ("; ".join(gains) + ".") if gains else "Not measured.", "",
        f"## {memory_title}", "", *md_table(["head", *columns], memory_rows), "",
    ])


def pappas_speed(recipe: str, overrides: list[str], vocab_size: int, sentences: int, updates: int, warmup: int,
                 output: str | None, device: str = "cpu") -> str:
    """Pappas et al.'s Table 4: training target tokens/s of each output layer at each sampling share, measured
    on synthetic batches at the paper's vocabulary size (Multi30K cannot give |V| = 128K: its joint BPE 8k
    vocabulary has 4,322 English entries, and the Shalev recipes' word vocabulary 5,893)."""
    config = load_recipe(recipe, overrides)  # a bad recipe or option fails here, before any measurement
    results = []
    for kind, joint_dim in SPEED_HEADS:
        for share in SPEED_SHARES:
            cell = speed_overrides(kind, joint_dim, share)
            log(f"measuring {' '.join(cell)}")
            result = spawn_model_training(recipe, [*overrides, *cell], vocab_size, sentences, updates, warmup,
                                          device)
            results.append({**result, "head": kind, "joint_dim": joint_dim, "share": share})
    git = git_revision()
    m = config.model
    shown = Path(recipe).resolve()
    shown = shown.relative_to(RECIPES.parent) if shown.is_relative_to(RECIPES.parent) else shown
    setting = (f"Model: `{shown}` ({m.type}, {m.layers} layers, {m.hidden_dim} wide"
               + (f"; options {', '.join(f'`{o}`' for o in overrides)}" if overrides else "")
               + f"), synthetic vocabulary of {vocab_size:,} words on each side ({_vocab_note(vocab_size)}), "
               f"batches of {sentences} sentence pairs of 8–20 Zipf-distributed tokens, {updates} timed "
               f"updates after {warmup} warm-up. Measured on {_speed_machine(device, results[0]['threads'])}, torch "
               f"{torch.__version__}, nlgkit {str(git['commit'])[:7]}{' (dirty)' if git['dirty'] else ''}.")
    return write_output(speed_report(results, setting), output)


def _vocab_note(vocab_size: int) -> str:
    """How the measured vocabulary relates to the paper's: its size, or far smaller (e.g. Multi30K's)."""
    if vocab_size == PAPER_VOCAB:
        return "the paper's joint BPE |V| ≈ 128K"
    return f"{vocab_size / PAPER_VOCAB:.0%} of the paper's joint BPE |V| ≈ 128K"


def _speed_machine(device: str, threads: int) -> str:
    """Where a speed table was measured: the GPU's name (float32) or the CPU's with its thread count."""
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(torch.device(device))} (float32)"
    return f"{cpu_name()}, {thread_count(threads)}"

"""``make bench``: training on the CPU in float32 against bf16 autocast (``train.cpu_amp``).

Where the CPU multiplies bf16 in hardware (Intel AMX, AVX512-BF16) autocast can speed up the long CPU runs
(Table 2's GRUs, Hirasawa's seeds); where bf16 is emulated it slows them down. This section measures by how much on
this machine, recipe by recipe, as a ratio of two processes of one thread each on the same batches, so it moves
less with the machine than tokens/s do. Each row also gives the mean training loss per token over the timed
updates in both precisions (same initial weights, same batches): how closely bf16 follows float32 in those first
updates. Whether it reaches the same BLEU is a training run's question, not a benchmark's.

Every figure is the training benchmark's own measurement (:func:`nlgkit.experiments.bench.measure.measure_training`)
in a process of its own. A recipe whose data directory is not prepared is skipped (training it would prepare the
data first: minutes), and so is a multimodal recipe without its cached image features.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nlgkit.core.recipes import load_recipe
from nlgkit.evaluate.markdown import md_table

# Table 2's GRU with its learned and fixed heads, Pappas et al.'s LSTM, Tokarchuk's Transformer, IMAGINATION
RECIPES = ("recipes/multi30k_learned.toml", "recipes/multi30k_fixed.toml", "recipes/multi30k_luong.toml",
           "recipes/multi30k_transformer.toml", "recipes/hirasawa/imagination_en-de.toml")
# both cases on the CPU (a recipe's "auto" device would take a GPU, where cpu_amp does not apply)
CASES = {"float32": ["train.device='cpu'"], "bf16": ["train.device='cpu'", "train.cpu_amp=true"]}


def precision_benchmarks(root: Path, updates: int, warmup: int, spawn: Callable[..., dict[str, Any]],
                         bf16_instructions: list[str]) -> dict[str, Any]:
    """Each recipe of :data:`RECIPES` whose data is here, trained on one thread in float32 and then with bf16
    autocast (``spawn`` runs one ``nlgkit bench`` worker process); the others are listed with the reason."""
    rows, skipped = [], []
    for recipe in RECIPES:
        missing = _missing(root, recipe)
        if missing:
            skipped.append({"recipe": recipe, "note": missing})
            continue
        figures = {}
        for label, overrides in CASES.items():
            figures[label] = spawn("--worker", "train", "--recipe", recipe, "--updates", str(updates), "--warmup",
                                   str(warmup), "--threads", "1", "--case", json.dumps({"overrides": overrides}))
        rows.append({"recipe": recipe, "head": figures["float32"]["head"],
                     **{f"{label}_{key}": value[key] for label, value in figures.items()
                        for key in ("tokens_per_s", "loss", "peak_rss_mib")}})
    return {"updates": updates, "warmup": warmup, "threads": 1, "bf16_instructions": bf16_instructions,
            "rows": rows, "skipped": skipped}


def _missing(root: Path, recipe: str) -> str:
    """Why ``recipe`` cannot be measured without preparing data or extracting features first ("" if it can)."""
    config = load_recipe(root / recipe)
    if config.task.type == "multimodal_translation":
        # lazy: it reads torch, which rendering the Markdown must not need
        from nlgkit.experiments.bench.multimodal import describe_recipe

        return describe_recipe(root, recipe).get("missing", "")
    if not (root / config.data.dir / "manifest.json").is_file():
        return f"data directory `{config.data.dir}` not prepared (`nlgkit train {recipe} --dry-run` prepares it)"
    return ""


def precision_lines(section: dict[str, Any] | None) -> list[str]:
    """The section of BENCHMARKS.md; nothing if it was never measured (JSON written before it existed)."""
    if not section:
        return []
    lines = ["", (f"## CPU precision: float32 against bf16 autocast (`train.cpu_amp`), one thread, real batches of "
                  f"epoch 1 after {section['warmup']} warm-up updates)"), ""]
    instructions = ", ".join(section["bf16_instructions"]) or "none (bf16 is emulated)"
    dirty = " (dirty)" if section.get("dirty") else ""
    lines += [(f"Measured on {section.get('cpu', 'this CPU')} (bf16 instructions: {instructions}) on "
               f"{section.get('date', '?')}, commit {str(section.get('commit', '?'))[:10]}{dirty}; "
               f"{section['updates']} timed updates per row. *loss*: mean training loss per target token over the "
               "timed updates, from the same initial weights and batches in both precisions."), ""]
    rows = section["rows"]
    if rows:
        lines += md_table(
            ["recipe", "head", "float32 tokens/s", "bf16 tokens/s", "bf16 / float32", "float32 loss", "bf16 loss",
             "peak RSS float32 / bf16 (MiB)"],
            [[f"`{Path(r['recipe']).stem}`", r["head"], f"{r['float32_tokens_per_s']:,.0f}",
              f"{r['bf16_tokens_per_s']:,.0f}", f"{r['bf16_tokens_per_s'] / r['float32_tokens_per_s']:.2f}×",
              f"{r['float32_loss']:.4f}", f"{r['bf16_loss']:.4f}",
              f"{r['float32_peak_rss_mib']:,.0f} / {r['bf16_peak_rss_mib']:,.0f}"] for r in rows],
            numeric=[False, False, True, True, True, True, True, True])
    for s in section["skipped"]:
        lines += ["", f"Not measured: `{s['recipe']}`: {s['note']}."]
    for note in section.get("notes", []):  # measured remarks kept with the figures (a whole run in each precision)
        lines += ["", note]
    return lines

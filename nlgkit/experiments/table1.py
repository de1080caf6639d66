"""Shalev et al.'s Table 1 for the caption data at hand: each run's test scores beside the paper's COCO rows.

For every run: its best checkpoint (by the validation metric) captions the test images with the recipe's
beam (10); BLEU-3/4, METEOR, ROUGE-L and CIDEr-D come from pycocoevalcap, VU is the number of distinct words
in the output. CIDEr is compared with the learned run of the same model by paired bootstrap over images. A
nearest-neighbour baseline (the caption of the most similar training image) shows what retrieval alone
reaches; examples list images where the fixed head's caption uses a word the learned head's does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nlgkit.data.vocab import Vocabulary
from nlgkit.evaluate.markdown import md_table
from nlgkit.evaluate.significance import paired_bootstrap_means
from nlgkit.experiments.captioning import (
    SplitCaptions,
    caption_split,
    differing_examples,
    nearest_neighbour_captions,
)
from nlgkit.experiments.papers import load_table
from nlgkit.metrics.captions import caption_scores
from nlgkit.metrics.meteor import MeteorSession
from nlgkit.metrics.vocabulary import vocabulary_usage
from nlgkit.runs.progress import read_progress

MODEL_NAMES = {"show_tell": "tell", "show_attend_tell": "attend"}
COLUMNS = ("BLEU-4", "BLEU-3", "VU", "ROUGE-L", "METEOR", "CIDEr")
PAPER_COLUMNS = {"BLEU-4": "bleu4", "BLEU-3": "bleu3", "VU": "vocab_usage", "ROUGE-L": "rouge_l", "METEOR": "meteor"}


def run_status(run_dir: Path) -> str:
    progress = read_progress(run_dir)
    state = "finished" if progress.finished else "not finished"
    return f"{state}, best epoch {progress.best_epoch} of {progress.epochs_done}"


def score(captions: SplitCaptions, meteor: MeteorSession | None = None) -> dict[str, Any]:
    """A row's values (METEOR in ``meteor``'s jar when given) and the per-image CIDEr its bootstrap resamples."""
    result = caption_scores(captions.texts, captions.refs, session=meteor)
    values = {name: result["scores"][name].get("score") for name in COLUMNS if name != "VU"}
    values["VU"] = vocabulary_usage(captions.texts)["score"]
    unk = sum("<unk>" in text.split() for text in captions.texts)  # a fixed head's way of saying "rare word"
    return {"values": values, "unk_captions": unk, "per_image_cider": result["per_image_cider"], "tokenizer": result["tokenizer"]}


def _data_dir(run_dir: Path) -> Path:
    return Path(json.loads((run_dir / "config.json").read_text(encoding="utf-8"))["data"]["dir"])


def build_table1(run_dirs: list[Path], device: str = "cpu") -> dict[str, Any]:
    """Scores, statuses, significance, baseline and examples of ``run_dirs`` (data only; see :func:`render`)."""
    with MeteorSession() as meteor:  # one English jar (8 s to load its paraphrase table) for every row
        return _build_table1(run_dirs, device, meteor)


def _build_table1(run_dirs: list[Path], device: str, meteor: MeteorSession) -> dict[str, Any]:
    paper = load_table("shalev2020_table1")
    rows, outputs = [], {}
    for run_dir in run_dirs:
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        model, head = MODEL_NAMES.get(config["model"]["type"], config["model"]["type"]), config["head"]["type"]
        captions = caption_split(run_dir, "test", device)
        outputs[model, head] = captions
        scored = score(captions, meteor)
        paper_row = paper.match({"dataset": "mscoco", "model": model, "head": head})
        rows.append({"run": str(run_dir), "model": model, "head": head, "status": run_status(run_dir),
                     "images": len(captions.texts), **scored,
                     "paper": {c: paper_row.values.get(k) for c, k in PAPER_COLUMNS.items()} if paper_row else {}})
    for row in rows:
        learned = next((r for r in rows if r["model"] == row["model"] and r["head"] == "learned"), None)
        if learned is not None and learned is not row:
            test = paired_bootstrap_means(learned["per_image_cider"], row["per_image_cider"], "CIDEr")
            row["vs_learned"] = {"delta": test.delta, "ci": [test.ci_low, test.ci_high], "p": test.p_value}
    # the baseline needs the prepared features, which a run record does not keep
    prepared = [r for r in run_dirs if (_data_dir(r) / "manifest.json").is_file()]
    baseline = score(nearest_neighbour_captions(prepared[0]), meteor) if prepared else None
    examples = {}
    if run_dirs:
        vocab = Vocabulary.load(run_dirs[0] / "data" / "vocab.en.txt")  # the run's copy of its vocabulary
        counts = dict(zip(vocab.tokens, vocab.counts))
        for model in ("tell", "attend"):
            if (model, "learned") in outputs and (model, "fixed") in outputs:
                examples[model] = differing_examples(outputs[model, "learned"], outputs[model, "fixed"], counts)
    return {"rows": rows, "baseline": baseline, "examples": examples}


def render(table: dict[str, Any], dataset: str) -> str:
    def cell(value: Any) -> str:
        return "–" if value is None else (f"{value:,}" if isinstance(value, int) else f"{value:.2f}")

    lines = [f"# Shalev et al., Table 1 on {dataset}: captioning with learned, tied and fixed output layers", "",
             "Written by `make reproduce-table1` (`nlgkit reproduce table1 RUN_DIR…`). " + __doc__.split(
                 "\n\n", 1)[1].replace("\n", " "), "",
             "The paper's numbers are MSCOCO (Karpathy test split, ResNet-101); these runs use other data and another",
             "encoder, so compare the heads with each other, not the absolute values with the paper's.", ""]
    body = []
    for row in table["rows"]:
        paper = " / ".join(cell(row["paper"].get(c)) for c in PAPER_COLUMNS) if row["paper"] else "–"
        test = row.get("vs_learned")
        versus = (f"{test['delta']:+.2f} [{test['ci'][0]:+.2f}, {test['ci'][1]:+.2f}], p = {test['p']:.3f}"
                  if test else "–")
        status = f"unrecorded; {row['status']}" if "kept" in table else row["status"]
        body.append([row["model"], row["head"], status, *(cell(row["values"][c]) for c in COLUMNS), paper,
                     versus])
    if table["baseline"]:
        values = table["baseline"]["values"]
        body.append(["nearest neighbour", "–", "(no training)", *(cell(values[c]) for c in COLUMNS), "–", "–"])
    lines += md_table(["model", "head", "status", *COLUMNS, "paper B4 / B3 / VU / R-L / ME",
                       "ΔCIDEr vs learned (95% CI, p)"], body, [False] * 3 + [True] * len(COLUMNS) + [False] * 2)
    if table["rows"]:
        lines += ["", f"{table['rows'][0]['images']:,} test images; tokenizer: {table['rows'][0]['tokenizer']}. "
                  "VU counts `<unk>` as one word; captions that contain it: " + ", ".join(
                      f"{row['model']} {row['head']} {row['unk_captions']}" for row in table["rows"]) + "."]
        lines += ["", ("Each row is one training run (one seed): the differences between heads carry no "
                       "seed-to-seed spread, only the paired bootstrap over test images.")]
    if "kept" in table:
        lines += ["", (f"**Unrecorded rows** (marked so): {table['kept']['note']} No config, outputs or "
                       "checkpoints of these runs are recoverable, so their scores cannot be re-derived.")]
    lines += vocabulary_usage_lines(table["rows"]) + per_image_lines(table["rows"])
    for model, examples in table["examples"].items():
        lines += ["", (f"## {model}: where the fixed head's caption uses a word the learned head's does not "
                  "(rarest first; training count of the word)"), ""]
        lines += md_table(["image", "learned", "fixed", "word (count)"],
                          [[e["image"], e["a"], e["b"], f"{e['word']} ({e['word_count']})"] for e in examples],
                          [False] * 4)
    return "\n".join(lines) + "\n"


def _pair(rows: list[dict[str, Any]], model: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    by_head = {row["head"]: row for row in rows if row["model"] == model}
    return (by_head["learned"], by_head["fixed"]) if "learned" in by_head and "fixed" in by_head else None


def vocabulary_usage_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Whether each model's fixed head uses more distinct words than its learned head, as the paper finds
    (its claim that a fixed head spreads probability over more of the vocabulary), or fewer."""
    lines = []
    for model in dict.fromkeys(row["model"] for row in rows):
        pair = _pair(rows, model)
        if pair is None or not pair[0]["paper"].get("VU") or not pair[1]["paper"].get("VU"):
            continue
        learned, fixed = pair
        ours, theirs = (fixed["values"]["VU"], learned["values"]["VU"]), (fixed["paper"]["VU"], learned["paper"]["VU"])
        agrees = (ours[0] > ours[1]) == (theirs[0] > theirs[1])
        lines.append(f"{model}: the fixed head's captions use {ours[0]:,} distinct words, the learned head's "
                     f"{ours[1]:,} ({'more' if ours[0] > ours[1] else 'fewer'}; the paper: {theirs[0]:,} vs "
                     f"{theirs[1]:,}, {'the same direction' if agrees else 'the reverse'}).")
    reversed_models = [line.split(":")[0] for line in lines if "the reverse" in line]
    if reversed_models:
        lines.append(f"So here the paper's finding that a fixed head uses more of the vocabulary does not hold for "
                     f"{', '.join(reversed_models)}: its fixed run's captions draw on fewer distinct words (and "
                     "score lower CIDEr), and one run per head cannot tell whether that is the head or the seed.")
    return ["", "**Vocabulary usage (VU).** " + " ".join(lines)] if lines else []


def per_image_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per-image CIDEr of the fixed head against the learned head, both ways: on how many test images each
    wins, and the largest win of each."""
    lines = []
    for model in dict.fromkeys(row["model"] for row in rows):
        pair = _pair(rows, model)
        if pair is None:
            continue
        diffs = [f - a for a, f in zip(pair[0]["per_image_cider"], pair[1]["per_image_cider"])]
        fixed_wins, learned_wins = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
        lines.append(f"{model}: the fixed head's caption scores higher on {fixed_wins:,} images, the learned "
                     f"head's on {learned_wins:,}, equal on {len(diffs) - fixed_wins - learned_wins:,}; the largest "
                     f"per-image differences are {max(diffs):+.1f} for the fixed head and {min(diffs):+.1f} against "
                     "it.")
    if not lines:
        return []
    return ["", "**Per-image CIDEr, learned against fixed** (the examples' rule would be the images with the largest "
            "difference each way; `results/table1.json` keeps every run's per-image CIDEr in test-split order but "
            "neither the image names in that order nor the captions outside the examples below, so those images "
            "cannot be shown from it). " + " ".join(lines),
            "", ("The examples below follow another rule, which the kept captions allow: images where the fixed "
                 "head's caption uses a word the learned head's does not (rarest word first). They show what the "
                 "fixed head can say, not which head is better on those images.")]

"""`make bench`'s multimodal-translation section: which recipes it measures, what it skips and why, and how the
report renders rows and ratios from given figures (no timing is asserted)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import nlgkit_command

from nlgkit.experiments.bench.multimodal import CASES, RECIPES, multimodal_benchmarks
from nlgkit.experiments.bench.report import multimodal_lines, render_benchmarks

ROOT = Path(__file__).resolve().parents[1]
META = {"cpu": "Test CPU", "threads": 2, "torch": "2.x", "commit": "abcdef0123456789", "dirty": False,
        "date": "2026-01-02", "warmup": 3, "translate_run": "runs/x"}


def row(name: str, model: str, baseline: str | None, tokens_per_s: float, pairs: int, grid: int) -> dict[str, Any]:
    return {"recipe": f"{RECIPES}/{name}.toml", "model": model, "pairs": pairs, "image_grid": grid, "updates": 8,
            "tokens_per_s": tokens_per_s, "trainable_parameters": 1_000_000, "peak_rss_mib": 1500.4, "threads": 2,
            "baseline": f"{RECIPES}/{baseline}.toml" if baseline else None}


def section(**changes: Any) -> dict[str, Any]:
    rows = [row("text-covered_en-de", "rnn", None, 400.0, 6993, 7),
            row("doubly_attentive_en-de", "doubly_attentive", "text-covered_en-de", 100.0, 6993, 7),
            row("vag_nmt_en-de", "vag_nmt", "text-covered_en-de", 200.0, 6993, 7),
            row("text_en-de", "rnn", None, 500.0, 29000, 1),
            row("imagination_en-de", "imagination", "text_en-de", 400.0, 29000, 1)]
    return {"updates": 8, "warmup": 3, "rows": rows, "skipped": [], "commit": META["commit"], "dirty": False,
            "date": META["date"], "threads": 2, **changes}


def test_rows_render_with_their_ratio_to_the_text_only_model_of_the_same_run() -> None:
    lines = multimodal_lines(section(), META)
    start = lines.index("| model | recipe | training pairs | image features | updates | target tokens/s | "
                        "× text-only | trainable params | peak RSS (MiB) |")
    assert lines[start + 1] == "|---|---|---:|---|---:|---:|---:|---:|---:|"
    assert lines[start + 2:] == [
        "| rnn (text-only) | `text-covered_en-de` | 6,993 | 7×7 (unread) | 8 | 400 | 1.00× | 1,000,000 | 1,500 |",
        "| doubly_attentive | `doubly_attentive_en-de` | 6,993 | 7×7 | 8 | 100 | 0.25× | 1,000,000 | 1,500 |",
        "| vag_nmt | `vag_nmt_en-de` | 6,993 | 7×7 | 8 | 200 | 0.50× | 1,000,000 | 1,500 |",
        "| rnn (text-only) | `text_en-de` | 29,000 | 1×1 (unread) | 8 | 500 | 1.00× | 1,000,000 | 1,500 |",
        "| imagination | `imagination_en-de` | 29,000 | 1×1 | 8 | 400 | 0.80× | 1,000,000 | 1,500 |"]
    assert not any(line.startswith("Measured on its own") for line in lines)  # same commit and date as the rest


def test_a_skipped_baseline_leaves_no_ratio_and_the_note_says_why() -> None:
    rows = [r for r in section()["rows"] if r["model"] != "rnn" or r["pairs"] != 6993]
    skipped = [{"recipe": f"{RECIPES}/text-covered_en-de.toml", "model": "rnn",
                "note": "data directory `d` not prepared"}]
    lines = multimodal_lines(section(rows=rows, skipped=skipped, date="2026-02-03"), META)
    assert "| doubly_attentive | `doubly_attentive_en-de` | 6,993 | 7×7 | 8 | 100 | – | 1,000,000 | 1,500 |" in lines
    assert "| imagination | `imagination_en-de` | 29,000 | 1×1 | 8 | 400 | 0.80× | 1,000,000 | 1,500 |" in lines
    assert lines[-1] == ("Not measured: `recipes/hirasawa/text-covered_en-de.toml` (rnn): data directory `d` "
                         "not prepared.")
    assert ("Measured on its own (`nlgkit bench --only multimodal`) on 2026-02-03, commit abcdef0123, 2 threads."
            in lines)


def test_the_whole_report_places_the_section_after_captioning_and_only_when_measured() -> None:
    results = json.loads((ROOT / "BENCHMARKS.json").read_text())
    results.pop("multimodal", None)
    assert "## Multimodal translation training" not in render_benchmarks(results)
    results["multimodal"] = section()
    text = render_benchmarks(results)
    assert text.index("## Captioning") < text.index("## Multimodal translation training") < text.index("## Research")


def copy_recipes(root: Path) -> None:
    (root / RECIPES).mkdir(parents=True)
    for name in CASES:
        shutil.copy(ROOT / RECIPES / f"{name}.toml", root / RECIPES / f"{name}.toml")


def never(*argv: str) -> dict[str, Any]:
    raise AssertionError(f"nothing may be measured without its data: {argv}")


def test_a_missing_data_directory_skips_the_row_with_a_note(tmp_path: Path) -> None:
    copy_recipes(tmp_path)
    measured = multimodal_benchmarks(tmp_path, updates=2, warmup=1, spawn=never)
    assert measured["rows"] == [] and [s["model"] for s in measured["skipped"]] == [
        "rnn", "doubly_attentive", "vag_nmt", "rnn", "imagination"]
    assert measured["skipped"][1] == {
        "recipe": "recipes/hirasawa/doubly_attentive_en-de.toml", "model": "doubly_attentive",
        "note": "data directory `data/multi30k_images_en-de_covered` not prepared (training the recipe once "
                "prepares it and extracts the image features: minutes)"}
    assert not (tmp_path / "data").exists()  # nothing was prepared
    text = "\n".join(multimodal_lines(measured, META))
    assert ("Not measured: `recipes/hirasawa/imagination_en-de.toml` (imagination): data directory "
            "`data/multi30k_images_en-de` not prepared") in text
    assert "| model |" not in text


def prepared(root: Path, directory: str, images: list[str]) -> None:
    data = root / directory
    data.mkdir(parents=True)
    (data / "manifest.json").write_text(json.dumps({"lines": {"train": len(images)}}))
    for split in ("train", "valid", "test"):
        (data / f"{split}.images").write_text("".join(f"{name}\n" for name in images))


def cached(root: Path, key: str, images: list[str]) -> None:
    cache = root / "data/multi30k_images_features" / key
    cache.mkdir(parents=True)
    (cache / "manifest.json").write_text(json.dumps({"images": images}))
    (cache / "features.safetensors").write_bytes(b"")


def test_missing_features_skip_the_row_and_cached_ones_are_measured(tmp_path: Path) -> None:
    copy_recipes(tmp_path)
    prepared(tmp_path, "data/multi30k_images_en-de_covered", ["a.jpg", "b.jpg"])
    prepared(tmp_path, "data/multi30k_images_en-de", ["a.jpg", "", "c.jpg"])  # a pair without its image
    cached(tmp_path, "efficientnet_lite0-head-7x7-000000000000", ["a.jpg"])  # b.jpg is not cached
    cached(tmp_path, "efficientnet_lite0-head-1x1-000000000000", ["a.jpg", "c.jpg"])
    spawned: list[tuple[str, ...]] = []

    def spawn(*argv: str) -> dict[str, Any]:
        spawned.append(argv)
        return {"recipe": argv[3], "tokens_per_s": 10.0 * len(spawned)}

    measured = multimodal_benchmarks(tmp_path, updates=2, warmup=1, spawn=spawn)
    assert spawned == [("--worker", "train", "--recipe", f"{RECIPES}/{name}.toml", "--updates", "2", "--warmup", "1")
                       for name in ("text_en-de", "imagination_en-de")]
    assert [s["recipe"] for s in measured["skipped"]] == [f"{RECIPES}/{name}.toml" for name in list(CASES)[:3]]
    assert measured["skipped"][0]["note"] == ("no cached efficientnet_lite0 7×7 features of its 2 images in "
                                              "`data/multi30k_images_features` (training the recipe once extracts "
                                              "them: minutes)")
    assert measured["rows"][1] == {"recipe": f"{RECIPES}/imagination_en-de.toml", "tokens_per_s": 20.0,
                                   "model": "imagination", "pairs": 3, "image_grid": 1,
                                   "baseline": f"{RECIPES}/text_en-de.toml"}


def test_only_multimodal_replaces_that_section_and_keeps_the_rest(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from nlgkit.experiments.bench import run as bench

    old = json.loads((ROOT / "BENCHMARKS.json").read_text())
    monkeypatch.setattr(bench, "multimodal_benchmarks", lambda root, updates, warmup, spawn: section(updates=updates))
    output = tmp_path / "BENCH.md"
    with pytest.raises(SystemExit):  # nothing to add a section to
        nlgkit_command(["bench", "--only", "multimodal", "--output", str(output)])
    (tmp_path / "BENCH.json").write_text(json.dumps(old))
    with pytest.raises(SystemExit):
        nlgkit_command(["bench", "--only", "captioning", "--output", str(output)])
    nlgkit_command(["bench", "--only", "multimodal", "--multimodal-updates", "5", "--output", str(output)])
    new = json.loads((tmp_path / "BENCH.json").read_text())
    assert {key: value for key, value in new.items() if key != "multimodal"} == {
        key: value for key, value in old.items() if key != "multimodal"}
    assert new["multimodal"]["updates"] == 5 and new["multimodal"]["rows"] == section()["rows"]
    assert output.read_text() == render_benchmarks(new)

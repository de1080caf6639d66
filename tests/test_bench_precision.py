"""The CPU-precision benchmark: each recipe trained on one thread in float32 and with bf16 autocast."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import tiny_recipe

from nlgkit.experiments.bench import precision
from nlgkit.experiments.bench.precision import precision_benchmarks, precision_lines
from nlgkit.experiments.bench.report import render_benchmarks
from nlgkit.experiments.bench.run import worker

ROOT = Path(__file__).resolve().parents[1]


def _recipe_dir(tmp_path: Path, data_dir: Path) -> tuple[Path, list[str]]:
    """A repository-like root with a recipe on prepared data and one whose data is missing."""
    (tmp_path / "recipes").mkdir()
    ready = tiny_recipe(tmp_path / "recipes", data_dir, tmp_path / "run")
    missing = tiny_recipe(tmp_path / "recipes", tmp_path / "nowhere", tmp_path / "other")
    return tmp_path, [str(ready.relative_to(tmp_path)), str(missing.relative_to(tmp_path))]


def test_each_recipe_is_measured_in_both_precisions_on_one_thread(tmp_path: Path, paper: tuple[Path, dict],
                                                                   monkeypatch: Any) -> None:
    root, recipes = _recipe_dir(tmp_path, paper[0])
    monkeypatch.setattr(precision, "RECIPES", tuple(recipes))
    asked: list[list[str]] = []

    def spawn(*argv: str) -> dict[str, Any]:
        asked.append(list(argv))
        bf16 = "train.cpu_amp=true" in json.loads(argv[argv.index("--case") + 1])["overrides"]
        return {"head": "fixed", "tokens_per_s": 1700.0 if bf16 else 1000.0, "loss": 5.01 if bf16 else 5.0,
                "peak_rss_mib": 900.0}

    section = precision_benchmarks(root, 30, 3, spawn, ["amx_bf16", "avx512_bf16"])
    assert len(asked) == 2 and all(argv[argv.index("--threads") + 1] == "1" for argv in asked)
    assert [json.loads(argv[argv.index("--case") + 1]) for argv in asked] == [  # on the CPU, where a GPU is too
        {"overrides": ["train.device='cpu'"]}, {"overrides": ["train.device='cpu'", "train.cpu_amp=true"]}]
    assert [s["recipe"] for s in section["skipped"]] == [recipes[1]]
    assert "not prepared" in section["skipped"][0]["note"]
    text = "\n".join(precision_lines({**section, "cpu": "Intel Xeon", "commit": "0123456789abc", "dirty": False,
                                      "date": "2026-12-02"}))
    assert "| fixed | 1,000 | 1,700 | 1.70× | 5.0000 | 5.0100 | 900 / 900 |" in text
    assert "Intel Xeon (bf16 instructions: amx_bf16, avx512_bf16) on 2026-12-02, commit 0123456789" in text
    assert f"Not measured: `{recipes[1]}`" in text
    assert "bf16 is emulated" in "\n".join(precision_lines({**section, "bf16_instructions": []}))
    assert precision_lines({**section, "notes": ["A whole run in each precision: …"]})[-1] == \
        "A whole run in each precision: …"


def test_the_section_is_rendered_only_once_measured() -> None:
    results = json.loads((ROOT / "BENCHMARKS.json").read_text())
    results.pop("precision", None)
    assert "## CPU precision" not in render_benchmarks(results)
    results["precision"] = {"updates": 2, "warmup": 1, "threads": 1, "bf16_instructions": [], "rows": [],
                            "skipped": []}
    assert "## CPU precision: float32 against bf16 autocast" in render_benchmarks(results)


def test_a_worker_trains_with_the_settings_of_its_case(tmp_path: Path, paper: tuple[Path, dict]) -> None:
    """A training worker (here in this process, as `nlgkit bench --worker train` runs it) applies the case's
    overrides: the same batches and initial weights give a different mean loss under bf16 autocast, close to
    float32's."""
    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "run")
    figures = [worker("train", recipe=str(recipe), updates=2, warmup=1, threads=1,
                      case=json.dumps({"overrides": overrides})) for overrides in ([], ["train.cpu_amp=true"])]
    fp32, bf16 = (f["loss"] for f in figures)
    assert all(f["updates"] == 2 and f["tokens_per_s"] > 0 for f in figures)
    assert fp32 != bf16 and abs(bf16 - fp32) < 0.02 * fp32

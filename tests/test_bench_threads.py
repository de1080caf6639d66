"""The cores benchmark: one training run on every core against a one-thread run per core, side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import tiny_recipe

from nlgkit.core.errors import NlgkitError
from nlgkit.experiments.bench.process import spawn_json_together
from nlgkit.experiments.bench.report import render_benchmarks
from nlgkit.experiments.bench.threads import thread_benchmarks, thread_cases, thread_lines, wait_for_all

ROOT = Path(__file__).resolve().parents[1]


def test_cases_compare_one_thread_every_core_and_a_process_per_core() -> None:
    assert thread_cases(4) == [{"processes": 1, "threads": 1}, {"processes": 1, "threads": 4},
                               {"processes": 4, "threads": 1}]
    assert thread_cases(1) == []


def test_each_case_sums_its_processes_and_the_section_gives_ratios_to_one_thread() -> None:
    asked: list[list[list[str]]] = []
    speeds = {"1": 800.0, "2": 1250.0}

    def spawn_together(argvs: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
        asked.append([list(argv) for argv in argvs])
        threads = argvs[0][argvs[0].index("--threads") + 1]
        return [{"tokens_per_s": speeds[threads] + i, "peak_rss_mib": 1700.0 + i} for i in range(len(argvs))]

    section = thread_benchmarks(30, 3, spawn_together, cores=2)
    assert [len(argvs) for argvs in asked] == [1, 1, 2]
    assert [r["tokens_per_s"] for r in section["rows"]] == [800.0, 1250.0, 1601.0]
    text = "\n".join(thread_lines({**section, "cpu": "AMD EPYC", "commit": "0123456789abc", "dirty": False,
                                   "date": "2026-12-01"}))
    assert "| 2 | 1 | 1,601 | 800 + 801 | 2.00× | 1,701 |" in text
    assert "| 1 | 2 | 1,250 | – | 1.56× | 1,700 |" in text
    assert "2 one-thread runs side by side train 1.28× the tokens of one run on 2 threads" in text
    assert "AMD EPYC, 2 usable cores, on 2026-12-01, commit 0123456789." in text
    assert "give many runs one thread each (`make -j2 reproduce-table2" in text
    slower = {**section, "rows": [*section["rows"][:2], {**section["rows"][2], "tokens_per_s": 1200.0}]}
    assert thread_lines(slower)[-1].endswith("0.96× the tokens of one run on 2 threads: on this machine, train one run "
                                             "at a time on every core.")
    assert thread_lines({**section, "rows": []})[-1] == "Not measured: one usable core, nothing to compare."


def test_the_section_is_rendered_only_once_measured() -> None:
    results = json.loads((ROOT / "BENCHMARKS.json").read_text())
    results.pop("threads", None)
    assert "## Training runs on a CPU's cores" not in render_benchmarks(results)
    results["threads"] = {"recipe": "recipes/multi30k_learned.toml", "cores": 2, "updates": 30, "warmup": 3,
                          "rows": [{"processes": 1, "threads": 1, "tokens_per_s": 10.0, "per_process": [10.0],
                                    "peak_rss_mib": 1.0},
                                   {"processes": 1, "threads": 2, "tokens_per_s": 15.0, "per_process": [15.0],
                                    "peak_rss_mib": 1.0},
                                   {"processes": 2, "threads": 1, "tokens_per_s": 20.0, "per_process": [10.0, 10.0],
                                    "peak_rss_mib": 1.0}]}
    assert "## Training runs on a CPU's cores (`multi30k_learned`" in render_benchmarks(results)


def test_a_process_waits_for_the_others_and_gives_up_with_a_named_error(tmp_path: Path) -> None:
    with pytest.raises(NlgkitError, match="were not ready after 0.2 s"):
        wait_for_all(f"{tmp_path}:2", timeout=0.2)  # alone of two
    with pytest.raises(NlgkitError, match="expected DIR:N"):
        wait_for_all(str(tmp_path))
    (tmp_path / "both").mkdir()
    other = subprocess.Popen([sys.executable, "-c", ("import sys; from nlgkit.experiments.bench.threads import "
                              "wait_for_all; wait_for_all(sys.argv[1], timeout=60)"), f"{tmp_path}/both:2"])
    wait_for_all(f"{tmp_path}/both:2", timeout=60)
    assert other.wait(timeout=60) == 0 and len(list((tmp_path / "both").glob("ready.*"))) == 2


def test_training_workers_side_by_side_each_train_on_the_threads_asked(paper: tuple[Path, dict],
                                                                      tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, paper[0], tmp_path / "run")
    argv = ["--worker", "train", "--recipe", str(recipe), "--updates", "2", "--warmup", "1", "--threads", "1"]
    figures = spawn_json_together([argv, argv])
    assert [f["threads"] for f in figures] == [1, 1]
    assert all(f["updates"] == 2 and f["target_tokens"] > 0 and f["tokens_per_s"] > 0 for f in figures)

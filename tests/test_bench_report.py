"""BENCHMARKS.md is written from the figures in BENCHMARKS.json alone, so it can be checked without rerunning."""

from __future__ import annotations

import copy
import json
import re
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import nlgkit_command

from nlgkit.cli.bench import bench
from nlgkit.experiments.bench.precision import RECIPES as PRECISION_RECIPES
from nlgkit.experiments.bench.report import render_benchmarks
from nlgkit.experiments.bench.run import SECTIONS
from nlgkit.experiments.bench.threads import thread_cases, usable_cores

ROOT = Path(__file__).resolve().parents[1]


def committed() -> dict:
    return json.loads((ROOT / "BENCHMARKS.json").read_text())


def test_committed_benchmarks_are_what_their_figures_render() -> None:
    assert render_benchmarks(committed()) == (ROOT / "BENCHMARKS.md").read_text()


def test_unmeasured_sections_say_so_and_carry_the_previous_figures() -> None:
    results = copy.deepcopy(committed())
    results["previous_translation"] = results.pop("translation")
    results["translation"] = None
    results["meta"]["translate_run"] = "runs/nowhere"
    results["heads"] = [r for r in results["heads"] if not (r["head"] == "continuous" and r["vocab"] == 128_000)]
    results["gpu"] = {"epochs": [], "translation": None}
    text = render_benchmarks(results)
    assert "Not measured: no trained run at `runs/nowhere` (train it first)." in text
    previous = results["previous_translation"]
    assert f"measured `{previous['run']}` at beam 5: {previous['sentences_per_s']:.1f} sentences/s" in text
    assert "| continuous | 172,538 (577) | 217,399 (637) | – |" in text
    assert "continuous head: 128k / 8k" not in text  # no ratio from a missing cell
    assert text.endswith("Not measured: no CUDA device on this machine (run `make bench` where there is one).\n")


def test_gpu_rows_render_as_a_table() -> None:
    results = copy.deepcopy(committed())
    row = {"case": "multi30k_learned, bf16", "device": "NVIDIA H100", "batches": 100, "epoch_s": 41.25,
           "tokens_per_s": 98765.4, "valid_s": 3.04, "trainable_parameters": 60_000_000, "peak_gpu_mib": 5120.0}
    results["gpu"] = {"epochs": [row, {**row, "case": "multi30k_learned, float32", "tokens_per_s": 49382.7},
                                 {**row, "case": "multi30k_learned, float16 + loss scale", "tokens_per_s": 74074.05},
                                 {"case": "multi30k_learned, bf16 + torch.compile", "error": "no C compiler"}],
                      "translation": {"run": "runs/multi30k_fixed", "sentences_per_s": 512.34}}
    lines = render_benchmarks(results).splitlines()
    start = lines.index("## GPU (NVIDIA H100, fused Adam; bf16 autocast unless the case says otherwise)")
    table = lines.index("|---|---:|---:|---:|---:|---:|---:|", start)
    assert lines[table + 1] == "| multi30k_learned, bf16 | 100 | 41.2 | 98,765 | 3.0 | 60,000,000 | 5,120 |"
    assert lines[table + 4] == "| multi30k_learned, bf16 + torch.compile | – | – | – | – | – | failed: no C compiler |"
    assert "float32 against bf16: 0.50× the target tokens/s" in lines
    assert "float16 with a loss scale against bf16: 0.75× the target tokens/s" in lines
    assert not any(line.startswith("torch.compile against eager") for line in lines)  # its case failed
    assert lines[-1] == "Beam-5 translation of test2016 on the GPU with `runs/multi30k_fixed`: 512.3 sentences/s."
    results["gpu"]["translation_bfloat16"] = {"run": "runs/multi30k_fixed", "sentences_per_s": 768.51}
    assert render_benchmarks(results).splitlines()[-1] == (
        "Beam-5 translation of test2016 on the GPU with `runs/multi30k_fixed`: 512.3 sentences/s (float32); "
        "768.5 with `--compute-type bfloat16` (1.50×).")


def test_profiled_gpu_cases_get_a_table_of_where_their_time_goes() -> None:
    results = copy.deepcopy(committed())
    row = {"case": "transformer base, learned head", "device": "NVIDIA H100", "batches": 100, "epoch_s": 33.2,
           "tokens_per_s": 12203.0, "valid_s": None, "trainable_parameters": 53_851_495, "peak_gpu_mib": 3089.0}
    profile = {"updates": 5, "wall_s": 1.6, "kernels_per_update": 4321.0, "waits_per_update": 2.0,
               "device_busy": 0.234, "top_operators": [["aten::mm", 0.41], ["aten::bmm", 0.12]]}
    results["gpu"] = {"epochs": [row], "translation": None}
    assert "Where an update's time goes" not in render_benchmarks(results)  # figures from before the profiles
    results["gpu"]["epochs"] = [{**row, "profile": profile}, {**row, "case": "ConvS2S", "profile": None},
                                {**row, "case": "compiled", "profile": {"error": "CUPTI_ERROR_NOT_INITIALIZED"}}]
    lines = render_benchmarks(results).splitlines()
    assert lines[-1] == "| compiled | – | – | – | failed: CUPTI_ERROR_NOT_INITIALIZED |"
    assert lines[-2] == "| transformer base, learned head | 4,321 | 2.0 | 23% | `aten::mm` 41%, `aten::bmm` 12% |"
    assert lines[-3] == "|---|---:|---:|---:|---|"
    assert lines[-6].startswith("Where an update's time goes (`torch.profiler` over 5 more updates of each case")


def test_render_command_rewrites_the_markdown_from_the_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    output = tmp_path / "BENCH.md"
    with pytest.raises(SystemExit) as exit_info:
        nlgkit_command(["bench", "--render", "--output", str(output)])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err and "BENCH.json: no benchmark figures to render" in err
    assert not output.exists()
    (tmp_path / "BENCH.json").write_text(json.dumps(committed()))
    nlgkit_command(["bench", "--render", "--output", str(output)])
    assert output.read_text() == (ROOT / "BENCHMARKS.md").read_text()
    assert "wrote" in capsys.readouterr().out


DEBIAS_ROW = {"method": "lc", "words": 400_000, "dim": 300, "k": 10, "components": 3, "device": "cpu",
              "seconds": 600.0, "words_per_s": 666.7, "table_mib": 457.8, "threads": 2, "peak_rss_mib": 2048.0,
              "finite": True, "search_gflop": 96_000.0, "square_matmul_gflops": 320.0}


def debias_answer(*argv: str) -> dict:
    """A debias worker's row for the case in ``argv`` (only localized centering has a neighbour search)."""
    case = json.loads(argv[3])
    row = {**DEBIAS_ROW, **case}
    if case["method"] != "lc":
        del row["search_gflop"], row["square_matmul_gflops"]
    return row


def measure_only(section: str, answer: Callable[..., dict], tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> tuple[dict, str]:
    """``nlgkit bench --only SECTION`` over a copy of the committed figures, each worker answered by ``answer``:
    the new JSON (checked to keep every other section as it was) and the Markdown written."""
    from nlgkit.experiments.bench import run as bench

    monkeypatch.setattr(bench, "_spawn", answer)
    (tmp_path / "BENCH.json").write_text(json.dumps(committed()))
    output = tmp_path / "BENCH.md"
    nlgkit_command(["bench", "--only", section, "--output", str(output)])
    new = json.loads((tmp_path / "BENCH.json").read_text())
    others = {key: value for key, value in committed().items() if key != section}
    assert {key: value for key, value in new.items() if key != section} == others
    return new, output.read_text()


def test_debias_section_measured_alone_keeps_the_rest_and_gives_the_share_of_matmul_peak(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new, text = measure_only("debias", debias_answer, tmp_path, monkeypatch)
    assert new["debias"]["measured"]["commit"] and len(new["debias"]["cases"]) >= 2
    assert "Measured on its own (`nlgkit bench --only debias`)" in text
    # 96,000 GFLOP in 600 s = 160 GFLOP/s, half of the 320 GFLOP/s matmul rate
    assert "| localized centering (k = 10) | 400,000 × 300 | cpu | 2 | 600.0 | 667 | 160.0 GFLOP/s = 50% of 320.0 |" in text
    assert "| All-but-the-Top (D = 3) | 400,000 × 300 | cpu | 2 | 600.0 | 667 | – |" in text


def test_debias_worker_measures_a_real_table() -> None:
    from nlgkit.experiments.bench.debias import measure_debias

    row = measure_debias("lc", words=3000, dim=50)
    assert row["finite"] and row["seconds"] > 0 and row["search_gflop"] == 2 * 3000 * 3000 * 50 / 1e9
    assert row["square_matmul_gflops"] > 0
    assert "search_gflop" not in measure_debias("abtt", words=3000, dim=50)


CORPUS_ROW = {"pairs": 200_000, "tokens": 12_000_000, "vocabulary": 32_000, "load_s": 6.0, "tokens_per_s": 2_000_000.0,
              "bytes_per_token": 4.2, "peak_bytes_per_token": 6.0, "list_bytes_per_token": 10.5, "order_s": 0.25,
              "batches": 1_500, "batch_tokens": 4000, "collate_ms": 1.5, "threads": 2, "shortest": 5, "longest": 55,
              "binarise_s": 7.5, "mapped_load_s": 0.2, "mapped_bytes_per_token": 0.0105,
              "mapped_collate_ms": 1.625, "mapped_mib": 48.8,
              "two_processes": [{"Rss": 50.0, "Pss": 26.0, "Anonymous": 1.5}, {"Rss": 50.0, "Pss": 25.0, "Anonymous": 1.5}]}


def test_corpus_section_measured_alone_gives_memory_a_million_tokens(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _, text = measure_only("corpus", lambda *argv: {**CORPUS_ROW} if argv == ("--worker", "corpus") else {},
                           tmp_path, monkeypatch)
    lines = text.splitlines()
    start = lines.index("## A training corpus in memory (synthetic, WMT-14's shape: 32,000 words, sentences of 5–55 "
                        "tokens)")
    assert lines[start + 2].startswith("Measured on its own (`nlgkit bench --only corpus`)")
    # 4.2 bytes a token = 4.0 MiB a million tokens; 10.5 bytes = 10.0 MiB, 2.5× as much
    assert lines[start + 6] == "| 200,000 | 12,000,000 | 4.0 | 5.7 | 10.0 | 2,000,000 | 0.25 | 1.50 |"
    assert "2.5× less memory than the same ids as a Python list per sentence" in lines[start + 8]
    # read in 6.0 s as text, 0.2 s mapped; 0.0105 bytes a token × 12 M tokens = 126,000 bytes = 123 KiB
    assert "read as text once (7.5 s, writing the cache included) and memory-mapped after: 0.20 s a read, 30× faster" \
        in lines[start + 10] and "the process allocates 123 KiB for its 12,000,000 tokens" in lines[start + 10]
    assert "of a machine. Collating a batch from the mapped ids takes 1.62 ms. Two processes mapping it at once (two " \
        "ranks of one machine) each add 50.0 and 50.0 MiB to their RSS but 26.0 and 25.0 MiB to their PSS" in lines[start + 10]
    assert lines[start + 10].endswith("the 48.8 MiB of mapped ids are held once between them.")


def test_corpus_worker_reads_a_real_corpus_into_less_memory_than_lists() -> None:
    from nlgkit.experiments.bench.corpus import measure_corpus

    row = measure_corpus(pairs=2000)
    assert 2 * 2000 * 5 <= row["tokens"] <= 2 * 2000 * 55 and row["batches"] > 0
    assert 4 <= row["bytes_per_token"] < row["list_bytes_per_token"] / 2  # int32 ids, plus offsets
    assert row["load_s"] > 0 and row["order_s"] > 0 and row["collate_ms"] > 0
    assert row["binarise_s"] > 0 and row["mapped_load_s"] > 0 and row["mapped_bytes_per_token"] < 1  # not the ids
    assert row["mapped_collate_ms"] > 0
    if row["two_processes"] is not None:  # Linux: each process's PSS counts the shared ids half
        assert all(added["Pss"] < added["Rss"] for added in row["two_processes"])


def test_bench_keeps_its_figures_and_carries_what_it_could_not_measure(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``make bench``'s assembly, with each measuring process answered by the committed figures."""
    from nlgkit.experiments.bench import run as bench

    old = committed()
    rows = {"train": old["training"] + old["captioning"]["training"] + old.get("multimodal", {}).get("rows", []),
            "head": old["heads"], "decode": old["decoding"]}

    def answer(*argv: str) -> dict:
        if argv[1] == "corpus":
            return CORPUS_ROW
        worker, recipe = argv[1], argv[3]
        if worker == "head":
            return next(r for r in rows["head"] if r["head"] == recipe and r["vocab"] == int(argv[5]))
        if worker == "decode":
            return next(r for r in rows["decode"] if r["model"] == recipe)
        if worker == "debias":
            return debias_answer(*argv)
        assert worker == "train", argv  # no trained run or images here: nothing else may be measured
        if "--case" in argv:  # the precision section's float32 / bf16 rows (the committed figures have no loss)
            return {"loss": 5.0, "head": "learned", "tokens_per_s": 1.0, "peak_rss_mib": 1.0}
        return next(r for r in rows["train"] if r["recipe"] == recipe)

    monkeypatch.setattr(bench, "_spawn", answer)
    monkeypatch.setattr(bench, "_spawn_together", lambda argvs: [answer(*argv) for argv in argvs])
    startup = {key: old["startup"][key] for key in ("help_s", "import_torch_s")}  # no run to translate with
    monkeypatch.setattr(bench, "measure_startup", lambda run_dir: startup if run_dir is None else {})
    (tmp_path / "BENCH.json").write_text(json.dumps(old))
    output = tmp_path / "BENCH.md"
    nlgkit_command(["bench", "--output", str(output), "--translate-run", str(tmp_path / "none"), "--caption-run",
                str(tmp_path / "none"), "--images", str(tmp_path / "none"), "--ct2-run", str(tmp_path / "none")])
    new = json.loads((tmp_path / "BENCH.json").read_text())
    assert new["translation"] is None and new["previous_translation"] == old["translation"]
    assert new["captioning"]["previous_captioning"] == old["captioning"]["previous_captioning"]
    assert new["training"] == old["training"] and new["heads"] == old["heads"]
    assert new["meta"]["warmup"] == 3 and new["meta"]["threads"] == old["training"][0]["threads"]
    assert [(case["method"], case["words"]) for case in new["debias"]["cases"]] == [("abtt", 400_000), ("lc", 400_000)]
    assert new["corpus"] == CORPUS_ROW
    assert [(r["processes"], r["threads"]) for r in new["threads"]["rows"]] == \
        [(c["processes"], c["threads"]) for c in thread_cases(usable_cores())]
    measured = [r["recipe"] for r in new["precision"]["rows"]] + [r["recipe"] for r in new["precision"]["skipped"]]
    assert sorted(measured) == sorted(PRECISION_RECIPES)  # each measured where its data is prepared, else skipped
    assert new["precision"]["notes"] == old["precision"]["notes"]  # whole runs' remarks outlive a re-measurement
    text = output.read_text()
    assert text == render_benchmarks(new)
    assert f"Not measured: no trained run at `{tmp_path / 'none'}`" in text
    assert f"The previous `make bench` (same file) measured `{old['translation']['run']}` at beam 5" in text
    assert "nlgkit translate --model" not in text


def test_bench_help_names_every_section_that_only_accepts() -> None:
    """``--only``'s help lists its sections by hand (the CLI starts without the measuring module's torch): it must
    name every one the measuring accepts (it once left ``corpus`` out)."""
    help_text = typing.get_type_hints(bench, include_extras=True)["only"].__metadata__[0].help
    listed = re.search(r"\(([^)]*)\)", help_text)
    assert listed is not None, help_text
    assert sorted(listed.group(1).split(", ")) == sorted(SECTIONS)

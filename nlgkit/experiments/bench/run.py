"""``make bench``: training throughput, beam-search speed and peak memory, kept in BENCHMARKS.json.

Reached as ``nlgkit bench`` (:mod:`nlgkit.cli.bench`). Each measurement runs in its own process
(``nlgkit bench --worker …``, :mod:`nlgkit.experiments.bench.process`), so peak memory (max RSS) belongs to that
measurement alone. Figures are measured on this machine when the command runs; no test asserts a figure.
BENCHMARKS.md is written from the JSON (:mod:`nlgkit.experiments.bench.report`; ``--render`` rewrites it without
measuring).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.devices import cpu_bf16_instructions
from nlgkit.core.errors import NlgkitError
from nlgkit.core.io import atomic_write
from nlgkit.experiments.bench.corpus import measure_corpus
from nlgkit.experiments.bench.ct2 import ct2_benchmarks, measure_ct2
from nlgkit.experiments.bench.debias import benchmark_debias, measure_debias
from nlgkit.experiments.bench.gpu import GPU_CASES, measure_epoch
from nlgkit.experiments.bench.measure import (
    measure_extraction,
    measure_generation,
    measure_startup,
    measure_training,
)
from nlgkit.experiments.bench.multimodal import multimodal_benchmarks
from nlgkit.experiments.bench.precision import precision_benchmarks
from nlgkit.experiments.bench.process import ROOT, spawn_json, spawn_json_together
from nlgkit.experiments.bench.report import render_benchmarks
from nlgkit.experiments.bench.research import (
    DECODERS,
    HEAD_CASES,
    VOCABS,
    measure_decoding,
    measure_head,
    measure_model_training,
)
from nlgkit.experiments.bench.serve import serve_benchmarks
from nlgkit.experiments.bench.threads import thread_benchmarks
from nlgkit.runs.provenance import cpu_name, git_revision

WORKERS = ("train", "generate", "extract", "head", "decode", "gpu-epoch", "debias", "ct2", "corpus")
GPU_CASE_SECONDS = 100  # a GPU case still running then (a compiler stuck recompiling) is reported as stopped


@dataclass(frozen=True)
class BenchSettings:
    """What ``nlgkit bench`` measures with (its options; paths relative to the repository root)."""

    output: str = "BENCHMARKS.md"
    updates: int = 30
    warmup: int = 3
    translate_run: str = "runs/multi30k_fixed"
    beam: int = 5
    limit: int = 0
    caption_run: str = "runs/flickr8k_attend_fixed"
    images: str = "../shared/data/flickr8k/images"
    caption_updates: int = 20
    multimodal_updates: int = 30
    ct2_run: str = "runs/ct2_transformer"  # a Transformer run for the CTranslate2 rows (nlgkit.experiments.bench.ct2)
    only: str = ""  # one of SECTIONS: measure that section alone, keep the rest of the JSON as it is


def worker(kind: str, recipe: str | None = None, run: str | None = None, updates: int = 30, warmup: int = 3,
           efficiency: bool = False, images: str = "", limit: int = 0, beam: int = 5, device: str = "cpu",
           case: str | None = None, threads: int = 0, barrier: str = "") -> dict[str, Any]:
    """One measurement, in the process of ``nlgkit bench --worker KIND`` (spawned by :func:`_spawn`)."""
    if kind not in (*WORKERS, "model-training"):
        raise NlgkitError(f"--worker {kind!r}: choose from {', '.join(WORKERS)}")
    if kind == "model-training":  # Pappas et al.'s Table 4 (nlgkit reproduce pappas-speed), one cell
        return measure_model_training(**json.loads(case or "{}"))
    if kind == "debias":  # one case of nlgkit.experiments.bench.debias
        return measure_debias(**json.loads(case or "{}"))
    if kind == "corpus":  # nlgkit.experiments.bench.corpus
        return measure_corpus(**json.loads(case or "{}"))
    if kind == "ct2":  # one row of nlgkit.experiments.bench.ct2
        return measure_ct2(run or "", beam, limit, **json.loads(case or "{}"))
    if kind == "extract":
        return measure_extraction(images, limit or 256)
    if kind == "generate":
        if not run:
            raise NlgkitError("--worker generate needs --run")
        return measure_generation(run, beam, limit, device, **json.loads(case or "{}"))  # {"compute_type": …}
    if not recipe:
        raise NlgkitError(f"--worker {kind} needs --recipe")
    if kind == "train":  # --case {"overrides": [...]}: settings changed for this measurement (--set lines)
        overrides = json.loads(case or "{}").get("overrides", [])
        return measure_training(recipe, updates, warmup, efficiency, threads, barrier, overrides)
    if kind == "head":
        return measure_head(recipe, limit)
    if kind == "gpu-epoch":
        return measure_epoch(recipe, device, limit)
    return measure_decoding(recipe, beam)


def _spawn(*argv: str) -> dict[str, Any]:
    return spawn_json(*argv)


def _spawn_together(argvs: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    return spawn_json_together(argvs)


def render_only(output: str) -> str:
    """``nlgkit bench --render``: rewrite ``output`` from the JSON figures beside it, measuring nothing."""
    _write_markdown(ROOT / output)
    return f"wrote {output} from {Path(output).with_suffix('.json')}"


def run_benchmarks(settings: BenchSettings) -> str:
    """``make bench``: measure everything this machine can, keep the figures in the JSON beside ``output``
    (carrying those it could not measure this time), and write the Markdown; returns the Markdown."""
    if settings.only:
        return _run_section(settings)
    training = [_spawn("--worker", "train", "--recipe", f"recipes/{name}.toml", "--updates", str(settings.updates),
                       "--warmup", str(settings.warmup), "--efficiency")
                for name in ("multi30k_learned", "multi30k_fixed")]
    translation = None
    if (ROOT / settings.translate_run / "checkpoints" / "best").exists():
        translation = _spawn("--worker", "generate", "--run", settings.translate_run, "--beam", str(settings.beam),
                             "--limit", str(settings.limit))
    last = _previous(ROOT / settings.output)  # figures a rerun could not measure are carried until measured again
    previous_translation = None if translation else last.get("translation") or last.get("previous_translation")
    startup = measure_startup(settings.translate_run if translation else None)
    captioning = _captioning_benchmarks(settings)
    if "captioning" not in captioning:
        last_captioning = last.get("captioning") or {}
        previous = last_captioning.get("captioning") or last_captioning.get("previous_captioning")
        if previous:
            captioning["previous_captioning"] = previous
    heads = [_spawn("--worker", "head", "--recipe", case, "--limit", str(v)) for case in HEAD_CASES for v in VOCABS]
    decoding = [_spawn("--worker", "decode", "--recipe", name, "--beam", "5") for name in DECODERS]
    debiasing = {"cases": benchmark_debias(_spawn)}
    corpus = _spawn("--worker", "corpus")
    multimodal = _multimodal(settings)
    threads = _threads(settings)
    precision = _precision(settings, last)
    serving = _serve(settings)
    ct2 = _ct2(settings)
    gpu = _gpu(settings, translation is not None and translation.get("run") == settings.translate_run)
    git = git_revision()
    meta = {"cpu": cpu_name(), "threads": training[0]["threads"], "torch": torch.__version__,
            "commit": git["commit"], "dirty": git["dirty"], "date": time.strftime("%Y-%m-%d"),
            "warmup": settings.warmup, "translate_run": settings.translate_run}
    results = {"meta": meta, "training": training, "translation": translation, "startup": startup,
               "captioning": captioning, "heads": heads, "decoding": decoding, "gpu": gpu, "debias": debiasing,
               "corpus": corpus,
               "multimodal": multimodal, "threads": threads, "precision": precision, "serve": serving, "ct2": ct2}
    if previous_translation:
        results["previous_translation"] = previous_translation
    output = ROOT / settings.output
    with atomic_write(output.with_suffix(".json")) as handle:
        json.dump(results, handle, indent=2)
    return _write_markdown(output)


def _run_section(settings: BenchSettings) -> str:
    """``nlgkit bench --only SECTION``: measure one section, replace it in the JSON beside ``output`` (the other
    sections keep their figures) and rewrite the Markdown. The section carries its own commit and date."""
    if settings.only not in SECTIONS:
        raise NlgkitError(f"--only {settings.only!r}: choose from {', '.join(SECTIONS)}")
    output = ROOT / settings.output
    results = _previous(output)
    if not results:
        raise NlgkitError(f"{output.with_suffix('.json')}: no benchmark figures to add a section to "
                          "(run `make bench` first)")
    results.update(SECTION_MEASURES[settings.only](settings, results))
    with atomic_write(output.with_suffix(".json")) as handle:
        json.dump(results, handle, indent=2)
    return _write_markdown(output)


def _translation_alone(settings: BenchSettings) -> dict[str, Any]:
    """Beam search over test2016 and the CLI start-up with ``translate_run``, stamped with their own commit and date
    (the rest of the file keeps the stamp of the ``make bench`` that measured it)."""
    if not (ROOT / settings.translate_run / "checkpoints" / "best").exists():
        raise NlgkitError(f"--translate-run {settings.translate_run}: no trained run there (train it first)")
    translation = _spawn("--worker", "generate", "--run", settings.translate_run, "--beam", str(settings.beam),
                         "--limit", str(settings.limit))
    stamp = _stamp()
    return {"translation": {**translation, "measured": stamp},
            "startup": {**measure_startup(settings.translate_run), "measured": stamp}}


def _stamp() -> dict[str, Any]:
    """The commit and date of a section measured on its own (the rest of the file keeps its own stamp)."""
    git = git_revision()
    return {"commit": git["commit"], "dirty": git["dirty"], "date": time.strftime("%Y-%m-%d")}


def _gpu(settings: BenchSettings, translate: bool) -> dict[str, Any]:
    """Each GPU case's epoch (:mod:`nlgkit.experiments.bench.gpu`) and, with a trained ``translate_run``, beam
    search on the GPU; empty without CUDA. A case that fails (``torch.compile`` where the compiler is missing)
    is kept as its one-line error, so one case never costs the others' figures."""
    gpu: dict[str, Any] = {"epochs": [], "translation": None}
    if not torch.cuda.is_available():
        return gpu
    for case in GPU_CASES:
        try:
            gpu["epochs"].append(spawn_json("--worker", "gpu-epoch", "--recipe", case, "--device", "cuda",
                                            timeout=GPU_CASE_SECONDS))
        except NlgkitError as exc:
            gpu["epochs"].append({"case": case, "error": str(exc)})
    if translate:  # float32, then bfloat16 (translate --compute-type)
        for key, compute_type in (("translation", "float32"), ("translation_bfloat16", "bfloat16")):
            gpu[key] = _spawn("--worker", "generate", "--run", settings.translate_run, "--beam", str(settings.beam),
                              "--limit", str(settings.limit), "--device", "cuda",
                              "--case", json.dumps({"compute_type": compute_type}))
    return {**gpu, **_stamp()}


def _threads(settings: BenchSettings) -> dict[str, Any]:
    """One training run on every core against a one-thread run per core (:mod:`nlgkit.experiments.bench.threads`),
    stamped with the machine, commit and date it was measured on."""
    return {**thread_benchmarks(settings.updates, settings.warmup, _spawn_together), "cpu": cpu_name(),
            **_stamp()}


def _precision(settings: BenchSettings, last: dict[str, Any]) -> dict[str, Any]:
    """One-thread training in float32 against bf16 autocast on this CPU (:mod:`nlgkit.experiments.bench.precision`),
    stamped with the machine, commit and date it was measured on; the notes of ``last`` (whole runs in each
    precision, which a benchmark does not repeat) are kept."""
    notes = (last.get("precision") or {}).get("notes", [])
    return {**precision_benchmarks(ROOT, settings.updates, settings.warmup, _spawn, cpu_bf16_instructions()),
            "cpu": cpu_name(), **_stamp(), **({"notes": notes} if notes else {})}


def _serve(settings: BenchSettings) -> dict[str, Any]:
    """The load test of ``nlgkit serve`` with ``translate_run`` (:mod:`nlgkit.experiments.bench.serve`), stamped
    with the commit and date it was measured on."""
    stamp = _stamp()
    return {**serve_benchmarks(ROOT, settings.translate_run), **stamp}


def _ct2(settings: BenchSettings) -> dict[str, Any]:
    """nlgkit's beam search against its CTranslate2 export, float32 and int8 (:mod:`nlgkit.experiments.bench.ct2`),
    stamped with the commit and date it was measured on."""
    stamp = _stamp()
    return {**ct2_benchmarks(ROOT, settings.ct2_run, settings.beam, settings.limit, _spawn), **stamp}


def _multimodal(settings: BenchSettings) -> dict[str, Any]:
    """Multimodal translation training against text-only NMT (:mod:`nlgkit.experiments.bench.multimodal`),
    stamped with the commit, date and threads it was measured with."""
    section = multimodal_benchmarks(ROOT, settings.multimodal_updates, settings.warmup, _spawn)
    return {**section, **_stamp(),
            "threads": section["rows"][0]["threads"] if section["rows"] else torch.get_num_threads()}


# ``nlgkit bench --only SECTION``: what each section measures, as the keys of the JSON it replaces (given the
# settings and the JSON so far)
SECTION_MEASURES: dict[str, Callable[[BenchSettings, dict[str, Any]], dict[str, Any]]] = {
    "multimodal": lambda settings, last: {"multimodal": _multimodal(settings)},
    "gpu": lambda settings, last: {"gpu": _gpu(settings, (ROOT / settings.translate_run / "checkpoints" /
                                                           "best").exists())},
    "serve": lambda settings, last: {"serve": _serve(settings)},
    "ct2": lambda settings, last: {"ct2": _ct2(settings)},
    "translation": lambda settings, last: _translation_alone(settings),
    "debias": lambda settings, last: {"debias": {"cases": benchmark_debias(_spawn), "measured": _stamp()}},
    "threads": lambda settings, last: {"threads": _threads(settings)},
    "corpus": lambda settings, last: {"corpus": {**_spawn("--worker", "corpus"), "measured": _stamp()}},
    "precision": lambda settings, last: {"precision": _precision(settings, last)},
}
SECTIONS = tuple(SECTION_MEASURES)  # what ``nlgkit bench --only`` can measure on its own


def _write_markdown(output: Path) -> str:
    """Write ``output`` (BENCHMARKS.md) from the JSON beside it; returns the text written."""
    source = output.with_suffix(".json")
    if not source.is_file():
        raise NlgkitError(f"{source}: no benchmark figures to render (run `make bench` first)")
    text = render_benchmarks(json.loads(source.read_text()))
    with atomic_write(output) as handle:
        handle.write(text)
    return text


def _previous(output: Path) -> dict[str, Any]:
    """The benchmark JSON written last time (empty when there is none)."""
    path = output.with_suffix(".json")
    return json.loads(path.read_text()) if path.is_file() else {}


def _captioning_benchmarks(args: BenchSettings) -> dict[str, Any]:
    """Feature extraction, training on cached features (learned vs fixed head), beam-10 captioning."""
    results: dict[str, Any] = {}
    if Path(args.images).is_dir():
        results["extraction"] = _spawn("--worker", "extract", "--images", args.images, "--limit", "256")
    results["training"] = [
        _spawn("--worker", "train", "--recipe", f"recipes/{name}.toml", "--updates", str(args.caption_updates),
               "--warmup", str(args.warmup))
        for name in ("flickr8k_attend_learned", "flickr8k_attend_fixed", "flickr8k_tell_learned", "flickr8k_tell_fixed")
    ]
    if (ROOT / args.caption_run / "checkpoints" / "best").exists():
        results["captioning"] = _spawn("--worker", "generate", "--run", args.caption_run, "--beam", "10",
                                       "--limit", "200")
    return results

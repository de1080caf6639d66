"""The measurements of ``nlgkit bench`` that its worker processes run, one each
(:func:`nlgkit.experiments.bench.run.worker`): training throughput of a recipe's real batches, beam search over a
run's test split, CNN feature extraction, and the command line's start-up. Each returns its figures with the
process's peak memory; none is asserted by a test.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.recipes import load_recipe
from nlgkit.data.batching import bucketed_batches
from nlgkit.experiments.bench.efficiency import MatmulRecorder
from nlgkit.experiments.bench.efficiency import efficiency as matmul_efficiency
from nlgkit.experiments.bench.process import ROOT, peak_rss_mib
from nlgkit.experiments.bench.threads import wait_for_all
from nlgkit.generation.decode import generate
from nlgkit.runs.loading import load_trained
from nlgkit.train.trainer import Trainer
from nlgkit.vision.encoders import EncoderConfig, build_encoder
from nlgkit.vision.images import load_image


def measure_training(recipe: str, updates: int, warmup: int, efficiency: bool = False, threads: int = 0,
                     barrier: str = "", overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Target tokens/s and the mean loss per target token over ``updates`` real batches of the recipe's first
    epoch (after ``warmup``).

    With ``efficiency``, the same batches are stepped again while their matrix products are recorded, and
    the step time is compared with this machine's matmul rate at those shapes (:mod:`nlgkit.experiments.bench.efficiency`).
    ``threads`` replaces the recipe's ``train.num_threads`` and ``overrides`` (``--set`` lines) other settings; with
    ``barrier`` (``DIR:N``) the timed updates start once N processes have warmed up
    (:func:`~nlgkit.experiments.bench.threads.wait_for_all`).
    """
    config = load_recipe(ROOT / recipe, [*overrides, *([f"train.num_threads={threads}"] if threads else [])])
    trainer = Trainer(config, show_progress=False)
    session = trainer.set_up()
    model, data, optimizer, device = session.model, session.data, session.optimizer, session.device
    model.train()
    batches = bucketed_batches(data.train, config.train.batch_size, config.train.batch_unit, config.train.seed, 1)
    tokens, seconds, loss = 0, 0.0, 0.0
    for i, indices in enumerate(batches[: warmup + updates]):
        if barrier and i == warmup:
            wait_for_all(barrier)
        batch = session.task.collate(data.train, indices, session.tgt_vocab).to(device)
        start = time.perf_counter()
        loss_sum, _ = trainer.train_step(session, batch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            seconds += time.perf_counter() - start
            tokens += batch.num_target_tokens
            loss += float(loss_sum)  # after the clock: reading it waits for the device
    head_grads = sum(p.grad.numel() for p in model.head.parameters() if p.grad is not None)
    optimizer_bytes = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values()
                          if torch.is_tensor(t))
    examples = sum(len(indices) for indices in batches[warmup : warmup + updates])
    figures = _efficiency(trainer, session, batches[warmup : warmup + updates], seconds, tokens) if efficiency else {}
    return {**figures, "recipe": recipe, "head": config.head.type, "updates": updates, "target_tokens": tokens,
            "seconds": seconds, "tokens_per_s": tokens / seconds, "examples_per_s": examples / seconds,
            "loss": loss / max(tokens, 1),
            "threads": torch.get_num_threads(),
            "trainable_parameters": session.params["trainable"], "head_gradient_elements": head_grads,
            "optimizer_state_mib": optimizer_bytes / 2**20, "peak_rss_mib": peak_rss_mib()}


def _efficiency(trainer: Any, session: Any, batches: list[list[int]], seconds: float, tokens: int) -> dict[str, Any]:
    recorder = MatmulRecorder()
    with recorder:
        for indices in batches:
            trainer.train_step(session, session.task.collate(session.data.train, indices, session.tgt_vocab))
    return matmul_efficiency(seconds, recorder.products, tokens)


def measure_generation(run_dir: str, beam: int, limit: int, device: str = "cpu",
                       compute_type: str = "float32") -> dict[str, Any]:
    """Beam search over the test split (the first ``limit`` items) with a trained run's best checkpoint and its
    recipe's length limits, for any task: the task reads the split's sources (token ids, cached image
    features) and names its items (sentences, images), which name the figures. ``compute_type``: as
    ``translate --compute-type``."""
    run = load_trained(Path(run_dir), "best", device).computing_in(compute_type)
    search = run.config.search
    sources = run.task.split_sources(Path(run.config.data.dir), "test", run.vocabs, run.device)[: limit or None]
    start = time.perf_counter()
    with run.computing():
        hyps = generate(run.model, run.task, sources, run.tgt_vocab, beam=beam, max_len_a=search.max_len_a,
                        max_len_b=search.max_len_b, batch_size=search.batch_size, device=run.device)
    if run.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    items = f"{run.task.item_name}s"
    out_tokens = sum(len(h[0].tokens) for h in hyps if h)
    return {"run": run_dir, "task": run.config.task.type, "beam": beam, "compute_type": run.compute_type,
            items: len(sources), "seconds": seconds,
            f"{items}_per_s": len(sources) / seconds, "output_tokens_per_s": out_tokens / seconds,
            "threads": torch.get_num_threads(), "peak_rss_mib": peak_rss_mib()}


def measure_extraction(images_dir: str, limit: int, batch_size: int = 32) -> dict[str, Any]:
    """EfficientNet-Lite0 feature extraction (decode, resize, CNN) over the first ``limit`` images."""
    encoder = build_encoder(EncoderConfig())
    paths = sorted(Path(images_dir).glob("*.jpg"))[:limit]
    start = time.perf_counter()
    with torch.inference_mode():
        for first in range(0, len(paths), batch_size):
            encoder(torch.stack([encoder.preprocess(load_image(p)) for p in paths[first : first + batch_size]]))
    seconds = time.perf_counter() - start
    return {"encoder": "efficientnet_lite0", "images": len(paths), "seconds": seconds,
            "images_per_s": len(paths) / seconds, "threads": torch.get_num_threads(), "peak_rss_mib": peak_rss_mib()}


def measure_startup(run_dir: str | None, repeats: int = 3) -> dict[str, Any]:
    """Wall seconds (median of ``repeats``) of ``nlgkit --help`` and, with a trained run, of translating one
    line end to end (process start, imports, model load, search, output), as a user runs them."""
    def wall(argv: list[str], stdin: str = "") -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "nlgkit", *argv], input=stdin, capture_output=True, text=True,
                           check=True, cwd=ROOT)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    result: dict[str, Any] = {"help_s": wall(["--help"])}
    if run_dir:
        result["translate_one_line_s"] = wall(["translate", "--model", run_dir, "--device", "cpu"],
                                              "Ein Mann fährt mit dem Fahrrad durch die Stadt .\n")
        result["run"] = run_dir
    result["import_torch_s"] = statistics.median(
        _timed([sys.executable, "-c", "import torch"]) for _ in range(repeats))
    return result


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True)
    return time.perf_counter() - start

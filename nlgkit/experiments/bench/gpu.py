"""GPU figures for ``make bench``, measured when the machine has a CUDA device (skipped otherwise).

For each case: seconds of one training epoch of Multi30K (every batch of epoch 1 after three warm-up updates, or
the first ``limit`` batches where the case names a limit), with the trainer's own update (bf16 autocast unless the
case turns it off, fused Adam, ``torch.compile`` where the case turns it on), target tokens/s, seconds of the
per-epoch validation, peak GPU memory, and where the time of five more updates goes (kernels, the host's waits,
the GPU's busy share: :mod:`nlgkit.experiments.bench.profiling`); then beam-5 translation of test2016 on the GPU
with a trained run.
Cases that differ in one setting (float32 against bf16, compiled against eager) run on the same batches, so
their tokens/s compare directly.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.recipes import load_recipe
from nlgkit.data.batching import bucketed_batches
from nlgkit.experiments.bench.process import ROOT
from nlgkit.experiments.bench.profiling import profile_updates
from nlgkit.runs.data import copy_model_assets
from nlgkit.train.trainer import Trainer

# name → (recipe, overrides, batches: 0 = the whole epoch): the paper's recipe whole, then one setting changed at a
# time on the first SAMPLE batches, the fixed head, the Transformer base and ConvS2S (on the same sentences, their
# SentencePiece vocabulary); compiling goes last
# (the slowest to start)
SAMPLE = 100
PROFILED = 5  # updates profiled after the timed ones (and the validation), on the case's first batches
LEARNED = "recipes/multi30k_learned.toml"
GPU_CASES: dict[str, tuple[str, list[str], int]] = {
    "multi30k_learned (paper recipe)": (LEARNED, [], 0),
    "multi30k_learned, bf16": (LEARNED, ["train.amp=true"], SAMPLE),
    "multi30k_learned, float32": (LEARNED, ["train.amp=false"], SAMPLE),
    "multi30k_learned, float16 + loss scale": (LEARNED, ["train.amp=true", "train.amp_dtype='float16'"], SAMPLE),
    "multi30k_fixed, bf16": ("recipes/multi30k_fixed.toml", ["train.amp=true"], SAMPLE),
    "transformer base, learned head": ("recipes/multi30k_transformer.toml",
                                       ["model.preset='base'", "model.output_dim=0"], SAMPLE),
    "ConvS2S (WMT-14 recipe's model), learned head": ("recipes/wmt14_en_de_learned.toml", [
        "data.dir='data/multi30k_de-en_spm'", "data.src_lang='de'", "data.tgt_lang='en'"], SAMPLE),
    "multi30k_learned, bf16 + torch.compile": (LEARNED, ["train.amp=true", "train.compile=true"], SAMPLE),
}


def measure_epoch(case: str, device: str = "cuda", limit: int = 0, profiled: int = PROFILED) -> dict[str, Any]:
    """One training epoch of ``case`` on ``device`` (the first ``limit`` batches when limit > 0), then where the
    time of ``profiled`` more updates goes (:func:`~nlgkit.experiments.bench.profiling.profile_updates`)."""

    recipe, overrides, case_limit = GPU_CASES[case]
    limit = limit or case_limit
    run_dir = Path(tempfile.mkdtemp(prefix="nlgkit-bench-"))  # validation reads the run's copied assets
    config = load_recipe(ROOT / recipe, [*overrides, f"train.device='{device}'", f"run.dir='{run_dir}'"])
    trainer = Trainer(config, show_progress=False)
    session = trainer.set_up()
    copy_model_assets(session.data.data_dir, run_dir / "data")
    session.model.train()
    t = config.train
    batches = bucketed_batches(session.data.train, t.batch_size, t.batch_unit, t.seed, 1)[: limit or None]
    on_gpu = session.device.type == "cuda"

    def step(indices: list[int]) -> int:
        batch = session.task.collate(session.data.train, indices, session.tgt_vocab).to(session.device)
        trainer.train_step(session, batch)
        return batch.num_target_tokens

    for indices in batches[:3]:
        step(indices)
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    tokens = sum(step(indices) for indices in batches)
    if on_gpu:
        torch.cuda.synchronize()
    epoch_seconds = time.perf_counter() - start
    valid_seconds = None
    if not limit:  # the per-epoch validation belongs to whole epochs; the sampled cases skip it
        start = time.perf_counter()
        trainer.validate(session)
        valid_seconds = time.perf_counter() - start
    profile: dict[str, Any] | None = None
    if profiled:
        try:
            profile = profile_updates(step, batches[:profiled], on_gpu)
        except RuntimeError as exc:  # the profiler's own failure (CUPTI busy or missing) keeps the timed figures
            profile = {"error": str(exc).splitlines()[0]}
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"case": case, "recipe": recipe, "overrides": overrides, "batches": len(batches),
            "epoch_s": epoch_seconds, "tokens_per_s": tokens / epoch_seconds, "valid_s": valid_seconds,
            "trainable_parameters": session.params["trainable"],
            "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20 if on_gpu else None, "profile": profile,
            "device": torch.cuda.get_device_name(session.device) if on_gpu else "cpu"}

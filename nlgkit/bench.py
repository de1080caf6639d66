"""``make bench``: training throughput, beam-search speed and peak memory, written to BENCHMARKS.md.

Each measurement runs in its own process, so peak memory (max RSS) belongs to that measurement alone.
Figures are measured on this machine when the command runs; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure_training(recipe: str, updates: int, warmup: int, efficiency: bool = False) -> dict[str, Any]:
    """Target tokens/s over ``updates`` real batches of the recipe's first epoch (after ``warmup``).

    With ``efficiency``, the same batches are stepped again while their matrix products are recorded, and
    the step time is compared with this machine's matmul rate at those shapes (:mod:`nlgkit.bench_efficiency`).
    """
    from nlgkit.config import load_recipe
    from nlgkit.data.batching import bucketed_batches
    from nlgkit.train.trainer import Trainer

    config = load_recipe(ROOT / recipe)
    trainer = Trainer(config, show_progress=False)
    session = trainer.set_up()
    model, data, optimizer, device = session.model, session.data, session.optimizer, session.device
    model.train()
    batches = bucketed_batches(data.train, config.train.batch_size, config.train.batch_unit, config.train.seed, 1)
    tokens, seconds = 0, 0.0
    for i, indices in enumerate(batches[: warmup + updates]):
        batch = session.task.collate(data.train, indices, session.tgt_vocab).to(device)
        start = time.perf_counter()
        trainer.train_step(session, batch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            seconds += time.perf_counter() - start
            tokens += batch.num_target_tokens
    head_grads = sum(p.grad.numel() for p in model.head.parameters() if p.grad is not None)
    optimizer_bytes = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values()
                          if torch.is_tensor(t))
    examples = sum(len(indices) for indices in batches[warmup : warmup + updates])
    figures = _efficiency(trainer, session, batches[warmup : warmup + updates], seconds, tokens) if efficiency else {}
    return {**figures, "recipe": recipe, "head": config.head.type, "updates": updates, "target_tokens": tokens,
            "seconds": seconds, "tokens_per_s": tokens / seconds, "examples_per_s": examples / seconds,
            "threads": torch.get_num_threads(),
            "trainable_parameters": session.params["trainable"], "head_gradient_elements": head_grads,
            "optimizer_state_mib": optimizer_bytes / 2**20, "peak_rss_mib": _peak_rss_mib()}


def _efficiency(trainer: Any, session: Any, batches: list[list[int]], seconds: float, tokens: int) -> dict[str, Any]:
    from nlgkit.bench_efficiency import MatmulRecorder, efficiency

    recorder = MatmulRecorder()
    with recorder:
        for indices in batches:
            trainer.train_step(session, session.task.collate(session.data.train, indices, session.tgt_vocab))
    return efficiency(seconds, recorder.products, tokens)


def measure_translation(run_dir: str, beam: int, limit: int, device: str = "cpu") -> dict[str, Any]:
    """Beam search over test2016 (tokenised source file) with a trained run's best checkpoint."""
    from nlgkit.inference import generate
    from nlgkit.io import read_lines
    from nlgkit.runs import load_trained

    run = load_trained(Path(run_dir), "best", device)
    cfg = run.config
    lines = read_lines(Path(cfg.data.dir) / f"test.{cfg.data.src_lang}")[: limit or None]
    sources = [run.src_vocab.encode(line.split()) for line in lines]
    start = time.perf_counter()
    hyps = generate(run.model, run.task, sources, run.tgt_vocab, beam=beam, batch_size=cfg.search.batch_size,
                    device=run.device)
    seconds = time.perf_counter() - start
    out_tokens = sum(len(h[0].tokens) for h in hyps)
    return {"run": run_dir, "beam": beam, "sentences": len(sources), "seconds": seconds,
            "sentences_per_s": len(sources) / seconds, "output_tokens_per_s": out_tokens / seconds,
            "threads": torch.get_num_threads(), "peak_rss_mib": _peak_rss_mib()}


def measure_extraction(images_dir: str, limit: int, batch_size: int = 32) -> dict[str, Any]:
    """EfficientNet-Lite0 feature extraction (decode, resize, CNN) over the first ``limit`` images."""
    from nlgkit.vision.encoders import EncoderConfig, build_encoder
    from nlgkit.vision.images import load_image

    encoder = build_encoder(EncoderConfig())
    paths = sorted(Path(images_dir).glob("*.jpg"))[:limit]
    start = time.perf_counter()
    with torch.inference_mode():
        for first in range(0, len(paths), batch_size):
            encoder(torch.stack([encoder.preprocess(load_image(p)) for p in paths[first : first + batch_size]]))
    seconds = time.perf_counter() - start
    return {"encoder": "efficientnet_lite0", "images": len(paths), "seconds": seconds,
            "images_per_s": len(paths) / seconds, "threads": torch.get_num_threads(), "peak_rss_mib": _peak_rss_mib()}


def measure_captioning(run_dir: str, beam: int, limit: int) -> dict[str, Any]:
    """Beam search over the test images' cached features with a trained captioning run."""
    from nlgkit.inference import generate
    from nlgkit.io import read_json
    from nlgkit.runs import load_trained
    from nlgkit.tasks.captioning import read_records

    run = load_trained(Path(run_dir), "best", "cpu")
    data_dir = Path(run.config.data.dir)
    names = [r["image"] for r in read_records(data_dir / "test.jsonl", limit)]
    spatial, pooled = run.task.features(data_dir, read_json(data_dir / "manifest.json"), names)  # type: ignore[attr-defined]
    sources = [(spatial[i], pooled[i]) for i in range(len(names))]
    start = time.perf_counter()
    generate(run.model, run.task, sources, run.tgt_vocab, beam=beam, max_len_a=0.0,
             max_len_b=run.config.search.max_len_b, batch_size=run.config.search.batch_size)
    seconds = time.perf_counter() - start
    return {"run": run_dir, "beam": beam, "images": len(names), "seconds": seconds,
            "images_per_s": len(names) / seconds, "threads": torch.get_num_threads(), "peak_rss_mib": _peak_rss_mib()}


def measure_startup(run_dir: str | None, repeats: int = 3) -> dict[str, Any]:
    """Wall seconds (median of ``repeats``) of ``nlgkit --help`` and, with a trained run, of translating one
    line end to end (process start, imports, model load, search, output), as a user runs them."""
    import statistics

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


def _worker(args: argparse.Namespace) -> None:
    if args.worker == "train":
        result = measure_training(args.recipe, args.updates, args.warmup, args.efficiency)
    elif args.worker == "extract":
        result = measure_extraction(args.images, args.limit or 256)
    elif args.worker == "caption":
        result = measure_captioning(args.run, args.beam, args.limit)
    elif args.worker == "head":
        from nlgkit.bench_research import measure_head

        result = measure_head(args.recipe, args.limit)
    elif args.worker == "gpu-epoch":
        from nlgkit.bench_gpu import measure_epoch

        result = measure_epoch(args.recipe, args.device, args.limit)
    elif args.worker == "decode":
        from nlgkit.bench_research import measure_decoding

        result = measure_decoding(args.recipe, args.beam)
    else:
        result = measure_translation(args.run, args.beam, args.limit, args.device)
    print(json.dumps(result))


def _spawn(*argv: str) -> dict[str, Any]:
    return spawn_json("nlgkit.bench", *argv)


def spawn_json(module: str, *argv: str) -> dict[str, Any]:
    """Run ``python -m module argv…`` in a fresh process (so that its peak memory is its own) and return the JSON
    object its last output line prints."""
    out = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, cwd=ROOT,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"error: benchmark {' '.join(argv)} failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m nlgkit.bench", description=__doc__)
    parser.add_argument("--output", default="BENCHMARKS.md")
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--translate-run", default="runs/multi30k_fixed",
                        help="trained run used for the beam-search benchmark")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--limit", type=int, default=0, help="translate only the first N test sentences")
    parser.add_argument("--caption-run", default="runs/flickr8k_attend_fixed",
                        help="trained captioning run used for the beam-10 captioning benchmark")
    parser.add_argument("--images", default="../shared/data/flickr8k/images",
                        help="images for the feature-extraction benchmark")
    parser.add_argument("--caption-updates", type=int, default=20)
    parser.add_argument("--worker", choices=["train", "translate", "extract", "caption", "head", "decode", "gpu-epoch"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--recipe", help=argparse.SUPPRESS)
    parser.add_argument("--efficiency", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args)
        return
    from nlgkit.io import atomic_write
    from nlgkit.train.provenance import cpu_name, git_revision

    training = [_spawn("--worker", "train", "--recipe", f"recipes/{name}.toml", "--updates", str(args.updates),
                       "--warmup", str(args.warmup), "--efficiency") for name in ("multi30k_learned", "multi30k_fixed")]
    translation = None
    if (ROOT / args.translate_run / "checkpoints" / "best").exists():
        translation = _spawn("--worker", "translate", "--run", args.translate_run, "--beam", str(args.beam),
                             "--limit", str(args.limit))
    startup = measure_startup(args.translate_run if translation else None)
    captioning = _captioning_benchmarks(args)
    if "captioning" not in captioning:
        last = _previous(ROOT / args.output, "captioning") or {}
        previous = last.get("captioning") or last.get("previous_captioning")  # carried until measured again
        if previous:
            captioning["previous_captioning"] = previous
    git = git_revision()
    lines = [
        "# Benchmarks",
        "",
        (f"Measured by `make bench` (`python -m nlgkit.bench`) on {cpu_name()}, {training[0]['threads']} threads, "
         f"torch {torch.__version__}, commit {str(git['commit'])[:10]}{' (dirty)' if git['dirty'] else ''}, "
         f"{time.strftime('%Y-%m-%d')}. Each row runs in its own process; peak memory is that process's max RSS."),
        "",
        f"## Training (Multi30K DE-EN recipes, real batches of epoch 1, after {args.warmup} warm-up updates)",
        "",
        ("| recipe | head | updates | target tokens/s | trainable params | head weight-gradient elements "
         "| Adam state (MiB) | peak RSS (MiB) |"),
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in training:
        lines.append(f"| `{r['recipe']}` | {r['head']} | {r['updates']} | {r['tokens_per_s']:,.0f} | "
                     f"{r['trainable_parameters']:,} | {r['head_gradient_elements']:,} | "
                     f"{r['optimizer_state_mib']:.1f} | {r['peak_rss_mib']:,.0f} |")
    lines += _efficiency_lines(training)
    lines += ["", "## Translation (test2016, batched beam search)", ""]
    if translation:
        t = translation
        lines += ["| run | beam | sentences | sentences/s | output tokens/s | peak RSS (MiB) |",
                  "|---|---:|---:|---:|---:|---:|",
                  (f"| `{t['run']}` | {t['beam']} | {t['sentences']} | {t['sentences_per_s']:.1f} | "
                   f"{t['output_tokens_per_s']:,.0f} | {t['peak_rss_mib']:,.0f} |")]
    else:
        lines.append(f"Not measured: no trained run at `{args.translate_run}` (train it first).")
        previous = _previous(ROOT / args.output, "translation")
        if previous:
            translation = previous
            lines.append(f"The previous `make bench` (same file) measured `{previous['run']}` at beam {previous['beam']}: "
                         f"{previous['sentences_per_s']:.1f} sentences/s over {previous['sentences']} sentences.")
    lines += ["", "## CLI start-up (wall seconds, median of 3 runs, as a user runs the commands)", "",
              (f"`nlgkit --help`: {startup['help_s']:.2f} s. `python -c 'import torch'` alone: "
               f"{startup['import_torch_s']:.2f} s.")]
    if "translate_one_line_s" in startup:
        lines.append(f"`echo … | nlgkit translate --model {startup['run']}` (one line, beam 5, end to end): "
                     f"{startup['translate_one_line_s']:.2f} s.")
    lines += _captioning_lines(captioning)
    from nlgkit.bench_research import DECODERS, HEAD_CASES, VOCABS, research_lines

    heads = [_spawn("--worker", "head", "--recipe", case, "--limit", str(v)) for case in HEAD_CASES for v in VOCABS]
    decoding = [_spawn("--worker", "decode", "--recipe", name, "--beam", "5") for name in DECODERS]
    lines += research_lines(heads, decoding)
    from nlgkit.bench_gpu import GPU_CASES, gpu_lines

    gpu: dict[str, Any] = {"epochs": [], "translation": None}
    if torch.cuda.is_available():
        gpu["epochs"] = [_spawn("--worker", "gpu-epoch", "--recipe", case, "--device", "cuda") for case in GPU_CASES]
        if translation and translation.get("run") == args.translate_run:
            gpu["translation"] = _spawn("--worker", "translate", "--run", args.translate_run, "--beam", str(args.beam),
                                        "--limit", str(args.limit), "--device", "cuda")
    lines += gpu_lines(gpu["epochs"], gpu["translation"])
    lines.append("")
    text = "\n".join(lines)
    with atomic_write(ROOT / args.output) as handle:
        handle.write(text)
    with atomic_write((ROOT / args.output).with_suffix(".json")) as handle:
        json.dump({"training": training, "translation": translation, "startup": startup, "captioning": captioning,
                   "heads": heads, "gpu": gpu,
                   "decoding": decoding}, handle, indent=2)
    print(text)


def _efficiency_lines(training: list[dict[str, Any]]) -> list[str]:
    """Each recipe's achieved GFLOP/s as a share of this machine's matmul rate at the step's own shapes."""
    rows = [r for r in training if "share_of_matmul_rate" in r]
    if not rows:
        return []
    lines = ["", ("Efficiency: FLOPs of forward + backward counted from each step's matrix products (2·m·k·n); "
                  "the matmul rate is this machine's, measured in the same process by timing each of those "
                  "products alone (float32). Share = achieved / rate at the step's shapes = ideal matmul time / "
                  "step time."), "",
             ("| recipe | MFLOP per target token | achieved GFLOP/s | matmul GFLOP/s at the step's shapes "
              "| share | distinct products | 2048² matmul GFLOP/s |"),
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| `{r['recipe']}` | {r['mflop_per_token']:.1f} | {r['achieved_gflops']:.1f} | "
                     f"{r['matmul_gflops_at_shapes']:.1f} | {100 * r['share_of_matmul_rate']:.0f}% | "
                     f"{r['distinct_products']} | {r['square_matmul_gflops']:.1f} |")
    return lines


def _previous(output: Path, key: str) -> Any:
    """An entry of the benchmark JSON written last time, when present."""
    path = output.with_suffix(".json")
    return json.loads(path.read_text()).get(key) if path.is_file() else None


def _captioning_benchmarks(args: argparse.Namespace) -> dict[str, Any]:
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
        results["captioning"] = _spawn("--worker", "caption", "--run", args.caption_run, "--beam", "10",
                                       "--limit", "200")
    return results


def _captioning_lines(results: dict[str, Any]) -> list[str]:
    lines = ["", "## Captioning (Flickr8k, EfficientNet-Lite0 features cached once)", ""]
    if "extraction" in results:
        e = results["extraction"]
        lines += [(f"Feature extraction (JPEG decode, resize, CNN; batches of 32): {e['images_per_s']:.1f} images/s over "
                  f"{e['images']} images, peak RSS {e['peak_rss_mib']:,.0f} MiB."), ""]
    lines += ["| recipe | head | updates | captions/s | target tokens/s | trainable params | peak RSS (MiB) |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for r in results.get("training", []):
        lines.append(f"| `{r['recipe']}` | {r['head']} | {r['updates']} | {r['examples_per_s']:.1f} | "
                     f"{r['tokens_per_s']:,.0f} | {r['trainable_parameters']:,} | {r['peak_rss_mib']:,.0f} |")
    by = {(r["recipe"].split("_")[1], r["head"]): r["examples_per_s"] for r in results.get("training", [])}
    for model in ("attend", "tell"):
        if (model, "learned") in by and (model, "fixed") in by:
            lines.append(f"\n{model}: fixed / learned training speed = {by[model, 'fixed'] / by[model, 'learned']:.2f}×")
    if "captioning" in results:
        c = results["captioning"]
        lines += ["", (f"Captioning `{c['run']}` at beam {c['beam']}: {c['images_per_s']:.1f} images/s over {c['images']} "
                  f"test images (cached features), peak RSS {c['peak_rss_mib']:,.0f} MiB.")]
    else:
        lines += ["", "Beam-10 captioning not measured: no trained captioning run with its weights here (train it first)."]
        if "previous_captioning" in results:
            c = results["previous_captioning"]
            lines.append(f"The previous `make bench` (same file) measured `{c['run']}` at beam {c['beam']}: "
                         f"{c['images_per_s']:.1f} images/s over {c['images']} test images.")
    return lines


if __name__ == "__main__":
    main()

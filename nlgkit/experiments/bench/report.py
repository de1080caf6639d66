"""BENCHMARKS.md written from the figures ``make bench`` keeps in BENCHMARKS.json.

Measuring and writing are apart so that the Markdown can be rewritten from the measured figures alone
(``nlgkit bench --render``) and checked against them in a test, without rerunning an hour of benchmarks.
Nothing here imports torch: every figure, the machine and the commit come from the JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nlgkit.evaluate.markdown import md_table
from nlgkit.experiments.bench.precision import precision_lines
from nlgkit.experiments.bench.serve import serve_lines
from nlgkit.experiments.bench.threads import thread_lines


def render_benchmarks(results: dict[str, Any]) -> str:
    """The whole BENCHMARKS.md for one ``make bench`` run's JSON."""
    meta = results["meta"]
    lines = [
        "# Benchmarks",
        "",
        (f"Measured by `make bench` (`nlgkit bench`) on {meta['cpu']}, {meta['threads']} threads, "
         f"torch {meta['torch']}, commit {str(meta['commit'])[:10]}{' (dirty)' if meta['dirty'] else ''}, "
         f"{meta['date']}. Each row runs in its own process; peak memory is that process's max RSS."),
    ]
    lines += training_lines(results["training"], meta["warmup"])
    lines += translation_lines(results, meta["translate_run"])
    lines += startup_lines(results["startup"])
    lines += captioning_lines(results["captioning"])
    if "multimodal" in results:  # JSON written before this benchmark existed has no section for it
        lines += multimodal_lines(results["multimodal"], meta)
    lines += thread_lines(results.get("threads"))  # nothing for JSON written before this benchmark existed
    lines += precision_lines(results.get("precision"))  # nor for this one
    lines += head_lines(results.get("heads", []))
    lines += decoding_lines(results.get("decoding", []))
    lines += debias_lines(results.get("debias"))
    lines += corpus_lines(results.get("corpus"))  # nothing for JSON written before this benchmark existed
    if "serve" in results:  # JSON written before the serving benchmark existed has no section for it
        lines += serve_lines(results["serve"])
    if "ct2" in results:  # JSON written before the CTranslate2 benchmark existed has no section for it
        lines += ct2_lines(results["ct2"])
    if "gpu" in results:  # JSON written before the GPU benchmark existed has no section for it
        lines += gpu_lines(results["gpu"]["epochs"], results["gpu"]["translation"], results["gpu"].get("notes", []),
                           results["gpu"].get("translation_bfloat16"))
    return "\n".join([*lines, ""])


def training_lines(training: list[dict[str, Any]], warmup: int) -> list[str]:
    lines = ["", f"## Training (Multi30K DE-EN recipes, real batches of epoch 1, after {warmup} warm-up updates)", ""]
    lines += md_table(
        ["recipe", "head", "updates", "target tokens/s", "trainable params", "head weight-gradient elements",
         "Adam state (MiB)", "peak RSS (MiB)"],
        [[f"`{r['recipe']}`", r["head"], r["updates"], f"{r['tokens_per_s']:,.0f}", f"{r['trainable_parameters']:,}",
          f"{r['head_gradient_elements']:,}", f"{r['optimizer_state_mib']:.1f}", f"{r['peak_rss_mib']:,.0f}"]
         for r in training],
        numeric=[False, False] + [True] * 6)
    return lines + efficiency_lines(training)


def efficiency_lines(training: list[dict[str, Any]]) -> list[str]:
    """Each recipe's achieved GFLOP/s as a share of this machine's matmul rate at the step's own shapes."""
    rows = [r for r in training if "share_of_matmul_rate" in r]
    if not rows:
        return []
    return ["", ("Efficiency: FLOPs of forward + backward counted from each step's matrix products (2·m·k·n); "
                 "the matmul rate is this machine's, measured in the same process by timing each of those "
                 "products alone (float32). Share = achieved / rate at the step's shapes = ideal matmul time / "
                 "step time."), "",
            *md_table(["recipe", "MFLOP per target token", "achieved GFLOP/s", "matmul GFLOP/s at the step's shapes",
                       "share", "distinct products", "2048² matmul GFLOP/s"],
                      [[f"`{r['recipe']}`", f"{r['mflop_per_token']:.1f}", f"{r['achieved_gflops']:.1f}",
                        f"{r['matmul_gflops_at_shapes']:.1f}", f"{100 * r['share_of_matmul_rate']:.0f}%",
                        r["distinct_products"], f"{r['square_matmul_gflops']:.1f}"] for r in rows])]


def translation_lines(results: dict[str, Any], translate_run: str) -> list[str]:
    lines = ["", "## Translation (test2016, batched beam search)", ""]
    t = results.get("translation")
    if t:
        return lines + _measured_alone(t, "translation") + md_table(
            ["run", "beam", "sentences", "sentences/s", "output tokens/s", "peak RSS (MiB)"],
            [[f"`{t['run']}`", t["beam"], t["sentences"], f"{t['sentences_per_s']:.1f}",
              f"{t['output_tokens_per_s']:,.0f}", f"{t['peak_rss_mib']:,.0f}"]])
    lines.append(f"Not measured: no trained run at `{translate_run}` (train it first).")
    previous = results.get("previous_translation")
    if previous:
        lines.append(f"The previous `make bench` (same file) measured `{previous['run']}` at beam {previous['beam']}: "
                     f"{previous['sentences_per_s']:.1f} sentences/s over {previous['sentences']} sentences.")
    return lines


def _measured_alone(section: dict[str, Any], name: str) -> list[str]:
    """The stamp of a section measured on its own (``nlgkit bench --only NAME``); nothing otherwise."""
    stamp = section.get("measured")
    if not stamp:
        return []
    dirty = " (dirty)" if stamp["dirty"] else ""
    return [(f"Measured on its own (`nlgkit bench --only {name}`) on {stamp['date']}, commit "
            f"{stamp['commit'][:10]}{dirty}."), ""]


def startup_lines(startup: dict[str, Any]) -> list[str]:
    lines = ["", "## CLI start-up (wall seconds, median of 3 runs, as a user runs the commands)", "",
             *_measured_alone(startup, "translation"),
             (f"`nlgkit --help`: {startup['help_s']:.2f} s. `python -c 'import torch'` alone: "
              f"{startup['import_torch_s']:.2f} s.")]
    if "translate_one_line_s" in startup:
        lines.append(f"`echo … | nlgkit translate --model {startup['run']}` (one line, beam 5, end to end): "
                     f"{startup['translate_one_line_s']:.2f} s.")
    return lines


def captioning_lines(results: dict[str, Any]) -> list[str]:
    lines = ["", "## Captioning (Flickr8k, EfficientNet-Lite0 features cached once)", ""]
    if "extraction" in results:
        e = results["extraction"]
        lines += [(f"Feature extraction (JPEG decode, resize, CNN; batches of 32): {e['images_per_s']:.1f} images/s over "
                  f"{e['images']} images, peak RSS {e['peak_rss_mib']:,.0f} MiB."), ""]
    training = results.get("training", [])
    lines += md_table(
        ["recipe", "head", "updates", "captions/s", "target tokens/s", "trainable params", "peak RSS (MiB)"],
        [[f"`{r['recipe']}`", r["head"], r["updates"], f"{r['examples_per_s']:.1f}", f"{r['tokens_per_s']:,.0f}",
          f"{r['trainable_parameters']:,}", f"{r['peak_rss_mib']:,.0f}"] for r in training],
        numeric=[False, False] + [True] * 5)
    speed = {(r["recipe"].split("_")[1], r["head"]): r["examples_per_s"] for r in training}
    for model in ("attend", "tell"):
        if (model, "learned") in speed and (model, "fixed") in speed:
            lines.append(f"\n{model}: fixed / learned training speed = "
                         f"{speed[model, 'fixed'] / speed[model, 'learned']:.2f}×")
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


def ct2_lines(section: dict[str, Any]) -> list[str]:
    """nlgkit's beam search against its CTranslate2 export, float32 and int8 (:mod:`nlgkit.experiments.bench.ct2`):
    BLEU, speed and outputs relative to nlgkit's row."""
    lines = ["", f"## CTranslate2 export (test2016, beam {section['beam']}, CPU)", ""]
    if section.get("missing"):
        return [*lines, f"Not measured: {section['missing']}."]
    rows = section["rows"]
    base = rows[0]
    dirty = " (dirty)" if section.get("dirty") else ""
    lines += [(f"`{section['run']}` exported by `nlgkit export ct2` (CTranslate2 {section['ctranslate2']}) and "
               f"translated from the same source ids by nlgkit's batched beam search and by CTranslate2 "
               f"(`nlgkit translate --engine ct2`, the run's length limits), {section['threads']} thread(s) each, "
               f"each pass in its own process after {section['warmup']} untimed sentences; the rows took turns "
               f"for {section['rounds']} passes each and show their fastest; measured on "
               f"{section['date']}, commit {str(section['commit'])[:10]}{dirty}. *identical*: outputs equal to "
               f"nlgkit's, of {section['sentences']:,}."), ""]
    trained = section.get("trained")
    if trained:
        model = trained["config"]["model"]
        scores = ", ".join(f"validation {name} {value:.2f}" for name, value in trained["metrics"].items()
                           if name in ("bleu", "ppl"))
        lines += [(f"The run: a {model['type']} ({', '.join(f'{k} {model[k]}' for k in ('preset', 'dim') if model.get(k))}"
                   f"; head {trained['config']['head']['type']}), its best checkpoint (epoch {trained['epoch']}, "
                   f"update {trained['update']:,}; {scores}), trained at commit {str(trained['commit'])[:10]}; its "
                   "resolved config is `ct2.trained.config` in BENCHMARKS.json (`nlgkit train` it again from that)."),
                  ""]
    lines += md_table(
        ["engine", "computation", "BLEU", "Δ BLEU", "sentences/s", "× nlgkit", "identical", "peak RSS (MiB)"],
        [[r["engine"], r["compute_type"], f"{r['bleu']:.2f}", f"{r['bleu'] - base['bleu']:+.2f}",
          f"{r['sentences_per_s']:.1f}", f"{r['sentences_per_s'] / base['sentences_per_s']:.2f}×",
          f"{r['identical']:,}" if "identical" in r else "–", f"{r['peak_rss_mib']:,.0f}"] for r in rows],
        numeric=[False, False, True, True, True, True, True, True])
    return lines


def multimodal_lines(section: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """Each multimodal model's training speed and its ratio to the text-only row of the same run
    (:mod:`nlgkit.experiments.bench.multimodal`); the recipes not measured, and why."""
    lines = ["", (f"## Multimodal translation training (Multi30K EN→DE, `recipes/hirasawa/`, cached "
                  f"EfficientNet-Lite0 features, real batches of epoch 1 after {section['warmup']} warm-up updates)"),
             ""]
    stamp = {key: section.get(key, meta[key]) for key in ("commit", "date", "threads")}
    if any(stamp[key] != meta[key] for key in stamp):
        lines += [(f"Measured on its own (`nlgkit bench --only multimodal`) on {stamp['date']}, commit "
                   f"{str(stamp['commit'])[:10]}{' (dirty)' if section.get('dirty') else ''}, "
                   f"{stamp['threads']} threads."), ""]
    lines.append("Each image-reading model against text-only NMT (`rnn`) of the same size on the same pairs, both "
                 "measured in this run: × text-only = its target tokens/s ÷ the text-only row's.")
    rows = section["rows"]
    speed = {r["recipe"]: r["tokens_per_s"] for r in rows}

    def ratio(row: dict[str, Any]) -> str:
        if row["baseline"] is None:
            return "1.00×"
        return f"{row['tokens_per_s'] / speed[row['baseline']]:.2f}×" if row["baseline"] in speed else "–"

    if rows:
        lines += ["", *md_table(
            ["model", "recipe", "training pairs", "image features", "updates", "target tokens/s", "× text-only",
             "trainable params", "peak RSS (MiB)"],
            [[f"{r['model']} (text-only)" if r["baseline"] is None else r["model"],
              f"`{Path(r['recipe']).stem}`", f"{r['pairs']:,}",
              f"{r['image_grid']}×{r['image_grid']}" + (" (unread)" if r["baseline"] is None else ""), r["updates"],
              f"{r['tokens_per_s']:,.0f}", ratio(r), f"{r['trainable_parameters']:,}", f"{r['peak_rss_mib']:,.0f}"]
             for r in rows],
            numeric=[False, False, True, False, True, True, True, True, True])]
    for s in section["skipped"]:
        lines += ["", f"Not measured: `{s['recipe']}` ({s['model']}): {s['note']}."]
    return lines


def head_lines(heads: list[dict[str, Any]]) -> list[str]:
    """Tokens/s (peak RSS) of each head at each vocabulary size, in the order they were measured."""
    cases = list(dict.fromkeys(r["head"] for r in heads))
    vocabs = list(dict.fromkeys(r["vocab"] for r in heads))
    cell = {(r["head"], r["vocab"]): f"{r['tokens_per_s']:,.0f} ({r['peak_rss_mib']:,.0f})" for r in heads}
    lines = ["", "## Research heads: training cost as the vocabulary grows", "",
             ("Forward + backward of the head's loss over 1,024 target tokens of 512-dim features (the rest of the "
              "model is the same for every row)."), ""]
    lines += md_table(["head", *(f"|V| = {v // 1000}k: tokens/s (peak RSS MiB)" for v in vocabs)],
                      [[case, *(cell.get((case, v), "–") for v in vocabs)] for case in cases])
    speed = {(r["head"], r["vocab"]): r["tokens_per_s"] for r in heads}
    if vocabs and all((case, v) in speed for case in ("continuous", "softmax") for v in (vocabs[0], vocabs[-1])):
        small, large = vocabs[0], vocabs[-1]
        lines.append(f"\ncontinuous head: {large // 1000}k / {small // 1000}k speed = "
                     f"{speed['continuous', large] / speed['continuous', small]:.2f}× (softmax: "
                     f"{speed['softmax', large] / speed['softmax', small]:.2f}×)")
    return lines


def decoding_lines(decoding: list[dict[str, Any]]) -> list[str]:
    lines = ["", "## Beam-5 decoding by model (untrained, 8,000-word vocabularies, to the length limit)", ""]
    lines += md_table(["model", "sentences/s", "output tokens", "peak RSS (MiB)"],
                      [[r["model"], f"{r['sentences_per_s']:.1f}", f"{r['output_tokens']:,}",
                        f"{r['peak_rss_mib']:,.0f}"] for r in decoding])
    speed = {r["model"]: r["sentences_per_s"] for r in decoding}
    cached, plain = "transformer (small, cached)", "transformer (small, no cache)"
    if cached in speed and plain in speed:
        lines.append(f"\nTransformer key/value cache: {speed[cached] / speed[plain]:.2f}× the speed without it")
    return lines


def gpu_lines(epochs: list[dict[str, Any]], translation: dict[str, Any] | None,
              notes: list[str] | None = None, translation_bf16: dict[str, Any] | None = None) -> list[str]:
    """The GPU section; ``notes`` are measured remarks kept with the figures (training side by side, BLEU);
    ``translation_bf16``: the same search under ``--compute-type bfloat16``."""
    if not epochs:
        return ["", "## GPU", "", "Not measured: no CUDA device on this machine (run `make bench` where there is one)."]
    measured = [r for r in epochs if "error" not in r]
    device = measured[0]["device"] if measured else "CUDA"
    lines = ["", f"## GPU ({device}, fused Adam; bf16 autocast unless the case says otherwise)", "",
             ("One process on an otherwise idle GPU. *batches*: the whole first epoch, or its first batches where "
              "the case changes one setting (those rows share their batches, so their tokens/s compare directly)."),
             ""]
    lines += md_table(
        ["case", "batches", "seconds", "target tokens/s", "validation (s)", "trainable params",
         "peak GPU memory (MiB)"],
        [[r["case"], r["batches"], f"{r['epoch_s']:.1f}", f"{r['tokens_per_s']:,.0f}",
          "–" if r.get("valid_s") is None else f"{r['valid_s']:.1f}",
          f"{r['trainable_parameters']:,}", f"{r['peak_gpu_mib']:,.0f}"] if "error" not in r
         else [r["case"], "–", "–", "–", "–", "–", f"failed: {r['error']}"] for r in epochs])
    speed = {r["case"]: r["tokens_per_s"] for r in measured}
    for case, base, what in (("multi30k_learned, float32", "multi30k_learned, bf16", "float32 against bf16"),
                             ("multi30k_learned, float16 + loss scale", "multi30k_learned, bf16",
                              "float16 with a loss scale against bf16"),
                             ("multi30k_learned, bf16 + torch.compile", "multi30k_learned, bf16",
                              "torch.compile against eager")):
        if case in speed and base in speed:
            lines.append(f"\n{what}: {speed[case] / speed[base]:.2f}× the target tokens/s")
    lines += profile_lines(measured)
    if translation:
        bf16 = "" if not translation_bf16 else (
            f" (float32); {translation_bf16['sentences_per_s']:.1f} with `--compute-type bfloat16` "
            f"({translation_bf16['sentences_per_s'] / translation['sentences_per_s']:.2f}×)")
        lines += ["", (f"Beam-5 translation of test2016 on the GPU with `{translation['run']}`: "
                       f"{translation['sentences_per_s']:.1f} sentences/s{bf16}.")]
    for note in notes or []:
        lines += ["", note]
    return lines


def profile_lines(epochs: list[dict[str, Any]]) -> list[str]:
    """The GPU cases' profiles (:mod:`nlgkit.experiments.bench.profiling`); nothing for figures measured before
    the cases were profiled."""
    profiled = [(r["case"], p) for r in epochs
                if (p := r.get("profile")) and ("error" in p or p.get("device_busy") is not None)]
    if not profiled:
        return []
    updates = max(p.get("updates", 0) for _, p in profiled)
    lines = ["", (f"Where an update's time goes (`torch.profiler` over {updates} more updates of each case, after "
                  "its timed batches): *GPU busy* is the kernels' time over the updates' wall time, so a low share "
                  "means the host, not the GPU's arithmetic, sets the pace; *host waits*: the host blocking on the "
                  "GPU (a value read back), per update."), ""]
    lines += md_table(
        ["case", "kernels per update", "host waits per update", "GPU busy", "most GPU time"],
        [[case, f"{p['kernels_per_update']:,.0f}", f"{p['waits_per_update']:,.1f}", f"{p['device_busy']:.0%}",
          ", ".join(f"`{name}` {share:.0%}" for name, share in p["top_operators"])] if "error" not in p
         else [case, "–", "–", "–", f"failed: {p['error']}"] for case, p in profiled],
        numeric=[False, True, True, True, False])
    return lines


def debias_lines(section: dict[str, Any] | None) -> list[str]:
    """`nlgkit embed debias` on random tables (:mod:`nlgkit.experiments.bench.debias`); nothing if not measured."""
    if not section or not section.get("cases"):
        return []
    names = {"abtt": "All-but-the-Top (D = 3)", "lc": "localized centering (k = 10)"}
    lines = ["", "## Debiasing word vectors (random float32 tables, `nlgkit embed debias`)", "",
             *_measured_alone(section, "debias")]
    rows = []
    for r in section["cases"]:
        share = "–"
        if "search_gflop" in r:
            achieved = r["search_gflop"] / r["seconds"]
            share = f"{achieved:,.1f} GFLOP/s = {100 * achieved / r['square_matmul_gflops']:.0f}% of {r['square_matmul_gflops']:,.1f}"
        rows.append([names.get(r["method"], r["method"]), f"{r['words']:,} × {r['dim']}", r["device"], r["threads"],
                     f"{r['seconds']:.1f}", f"{r['words_per_s']:,.0f}", share, f"{r['peak_rss_mib']:,.0f}",
                     f"{r['table_mib']:,.0f}", f"{r['peak_gpu_mib']:,.0f}" if "peak_gpu_mib" in r else "–"])
    lines += md_table(["method", "words × dim", "device", "threads", "seconds", "words/s",
                       "neighbour search vs 2048² matmul", "peak RSS (MiB)", "table (MiB)", "peak GPU memory (MiB)"],
                      rows, numeric=[False, False, False, True, True, True, False, True, True, True])
    lines += ["", ("Localized centering's neighbour search is 2 · V² · e FLOPs of float32 products (cosine "
                   "similarities of every pair of words, in blocks); its share of the 2048² matmul rate measured in "
                   "the same process says how near the hardware it runs; its time grows as V². All-but-the-Top is a "
                   "few linear passes in float64 (mean, covariance, projections): its time grows as V.")]
    return lines


def _two_processes_sentence(section: dict[str, Any]) -> str:
    """Two processes mapping the binarised corpus at once: what each adds to its RSS and PSS (Linux only)."""
    if not section.get("two_processes"):
        return ""
    first, second = section["two_processes"]
    return (f" Two processes mapping it at once (two ranks of one machine) each add {first['Rss']:.1f} and "
            f"{second['Rss']:.1f} MiB to their RSS but {first['Pss']:.1f} and {second['Pss']:.1f} MiB to their PSS "
            f"(a shared page counts half in each; {first['Anonymous']:.1f} and {second['Anonymous']:.1f} MiB of it "
            f"anonymous): the {section['mapped_mib']:.1f} MiB of mapped ids are held once between them.")


def corpus_lines(section: dict[str, Any] | None) -> list[str]:
    """A training corpus in memory (:mod:`nlgkit.experiments.bench.corpus`); nothing if not measured."""
    if not section:
        return []
    per_million = 1e6 / 2**20  # bytes a token → MiB a million tokens
    lines = ["", (f"## A training corpus in memory (synthetic, WMT-14's shape: {section['vocabulary']:,} words, "
                  f"sentences of {section['shortest']}–{section['longest']} tokens)"), "",
             *_measured_alone(section, "corpus")]
    lines += md_table(
        ["pairs", "tokens (both sides)", "held (MiB a million tokens)", "peak while reading",
         "as a list per sentence", "read (tokens/s)", "an epoch's batch order (s)", "collate (ms a batch)"],
        [[f"{section['pairs']:,}", f"{section['tokens']:,}", f"{section['bytes_per_token'] * per_million:.1f}",
          f"{section['peak_bytes_per_token'] * per_million:.1f}",
          f"{section['list_bytes_per_token'] * per_million:.1f}", f"{section['tokens_per_s']:,.0f}",
          f"{section['order_s']:.2f}", f"{section['collate_ms']:.2f}"]])
    ratio = section["list_bytes_per_token"] / section["bytes_per_token"]
    lines += ["", (f"Training holds each side of a corpus as one int32 array of ids and row offsets "
                   f"(`nlgkit/data/token_rows.py`): {ratio:.1f}× less memory than the same ids as a Python list per "
                   "sentence, in every process of a torchrun job. Bytes counted by `tracemalloc`; the batch order "
                   f"is one epoch's {section['batches']:,} batches of at most {section['batch_tokens']:,} target "
                   f"tokens; times on {section['threads']} thread(s).")]
    if "mapped_load_s" in section:  # measured since the binarised cache exists
        lines += ["", (f"Binarised (`data.id_cache`, on by default: `nlgkit/data/id_cache.py`), the corpus is read as "
                       f"text once ({section['binarise_s']:.1f} s, writing the cache included) and memory-mapped "
                       f"after: {section['mapped_load_s']:.2f} s a read, "
                       f"{section['load_s'] / section['mapped_load_s']:.0f}× faster than the text (most of it hashing "
                       f"the text, to check the cache is its own); the process allocates "
                       f"{section['mapped_bytes_per_token'] * section['tokens'] / 1024:,.0f} KiB for its "
                       f"{section['tokens']:,} tokens: the ids are the page cache's, one copy for all the processes "
                       "of a machine."
                       + (f" Collating a batch from the mapped ids takes {section['mapped_collate_ms']:.2f} ms."
                          if "mapped_collate_ms" in section else "")
                       + _two_processes_sentence(section))]
    return lines

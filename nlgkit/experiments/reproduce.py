"""Paper tables from run directories: ``python -m nlgkit.experiments.reproduce table1|table2|table3|table4|tokarchuk|pappas``,
their run logs (``log-summary``), weightless run records (``archive``) and ``show``.

Each table prints nlgkit's figure beside the paper's, with where it came from (run directory, hardware,
wall time), so every number in ``results/`` traces back to the runs behind it; ``--records results/runs`` reads
a run whose directory is gone from the record committed there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nlgkit.core.errors import NlgkitError
from nlgkit.evaluate.markdown import md_table
from nlgkit.runs.records import archive_run, with_records

RECIPES = Path(__file__).resolve().parents[1] / "recipes"


def _write(text: str, output: str | None) -> None:
    if output:
        from nlgkit.core.io import atomic_write

        with atomic_write(output) as handle:
            handle.write(text)
    sys.stdout.write(text)


def table3(output: str | None) -> str:
    """Trainable parameters of the Multi30K recipes, checked to the unit against the paper's counts."""
    from nlgkit.runs.build import build_untrained, count_parameters
    from nlgkit.core.config import load_recipe
    from nlgkit.experiments.papers import load_table

    paper = load_table("shalev2020_table3")
    rows = []
    for src, tgt in (("de", "en"), ("en", "de")):
        prefix = "multi30k_" if (src, tgt) == ("de", "en") else "multi30k_en_de_"
        paper_learned, paper_fixed = (paper.find(dataset="multi30k", pair=f"{src}-{tgt}", model="rnn",
                                                 head=head).values["params"] for head in ("learned", "fixed"))
        counts = {}
        for head in ("learned", "fixed", "tied"):
            config = load_recipe(RECIPES / f"{prefix}{head}.toml")
            model = build_untrained(config, log=lambda *a: print(*a, file=sys.stderr))[2]
            counts[head] = count_parameters(model)["trainable"]
        saving = 1 - counts["fixed"] / counts["learned"]
        rows.append([f"Multi30K {src.upper()}-{tgt.upper()}", f"{counts['learned']:,}", f"{paper_learned:,}",
                     f"{counts['fixed']:,}", f"{paper_fixed:,}", f"{saving:.0%}", f"{counts['tied']:,}",
                     "yes" if (counts["learned"], counts["fixed"]) == (paper_learned, paper_fixed) else "NO"])
    caption_rows = _table3_captioning(paper, build_untrained, count_parameters)
    text = "\n".join([
        "# Shalev et al., Table 3: trainable parameters",
        "",
        "Computed by `make reproduce-table3` (`python -m nlgkit.experiments.reproduce table3`) from the recipes in `recipes/`.",
        "Multi30K: vocabularies from `nlgkit prepare multi30k` (raw files, spaCy tokenizer, lowercase, min-freq 2).",
        "MSCOCO: the `coco_*` recipes (ResNet-101 features, 2048 channels, 14×14 regions) counted for the paper's",
        "9,490-word vocabulary (`nlgkit train recipes/coco_attend_learned.toml --dry-run --vocab-size 9490`).",
        "",
        *md_table(["model", "learned (nlgkit)", "learned (paper)", "fixed (nlgkit)", "fixed (paper)", "decrease",
                   "tied (nlgkit)", "equal to paper"], rows + caption_rows, [False] + [True] * 6 + [False]),
        "",
        "The tied models have no row in the paper. Multi30K's tied head shares the 256-dim target embeddings",
        "through a learned 512→256 projection; the captioners' embeddings are 512-wide, so they tie directly.",
        "",
        "**Captioning rows.** nlgkit's Show-Attend-Tell is, layer for layer, the widely used PyTorch decoder",
        "(sgrvinod's tutorial: attention 2048/512→512→1, Embedding(9490, 512), LSTMCell(2560→512), init_h/init_c",
        "2048→512, f_β 512→2048) with the output layer as nlgkit's head. Its learned count equals the paper's",
        "*fixed* count, and both nlgkit rows are exactly one 512×9,490 matrix (4,858,880) below the paper's, while",
        "learned − fixed = 512·9,490 as in the paper (the fixed head's bias trains, its 512×9,490 matrix does not).",
        "No layer of Xu et al.'s model accounts for that matrix: the paper's counts hold one V×512 matrix that is not",
        "trained (most likely the frozen matrix counted with `sum(p.numel() for p in model.parameters())`, the learned",
        "row then derived as fixed + d·|V|). Show-and-Tell (Vinyals et al.: the pooled image projected 2048→512 and fed",
        "as the first LSTM input, Embedding(9490, 512), LSTM(512→512)) differs by that matrix plus 264,705 = a",
        "512×512 linear layer with bias (262,656) and a BatchNorm1d(512) counted with its buffers (2,049), as in the",
        "popular yunjey image-captioning tutorial's encoder head; Vinyals et al. describe neither, so nlgkit does not",
        "add them. IWSLT and WMT rows are not covered (their data is not available offline).",
        "",
    ])
    _write(text, output)
    return text


def _table3_captioning(paper, build_untrained, count_parameters) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Tell and Attend rows for the paper's 9,490-word COCO vocabulary (no data or weights needed)."""
    from nlgkit.core.config import load_recipe

    rows = []
    for model, name in (("tell", "Show-and-Tell"), ("attend", "Show-Attend-Tell")):
        paper_learned, paper_fixed = (paper.find(dataset="mscoco", pair="image-en", model=model,
                                                 head=head).values["params"]
                                      for head in ("learned", "fixed"))
        counts = {head: count_parameters(build_untrained(load_recipe(RECIPES / f"coco_{model}_{head}.toml"),
                                                         vocab_size=9490)[2])["trainable"]
                  for head in ("learned", "fixed", "tied")}
        saving = 1 - counts["fixed"] / counts["learned"]
        gaps = {paper_learned - counts["learned"], paper_fixed - counts["fixed"]}
        verdict = "yes" if gaps == {0} else (f"no: {gaps.pop():,} below in both rows (see below)" if len(gaps) == 1
                                             else "no")
        rows.append([f"MSCOCO {name}", f"{counts['learned']:,}", f"{paper_learned:,}", f"{counts['fixed']:,}",
                     f"{paper_fixed:,}", f"{saving:.0%}", f"{counts['tied']:,}", verdict])
    return rows


def table2(run_dirs: list[str], output: str | None) -> str:
    """Shalev et al.'s Table 2 beside the given runs (see :mod:`nlgkit.evaluate.report`)."""
    from nlgkit.evaluate.report import build_report, collect_runs, render_markdown, report_to_dict

    ready, waiting = _trained(run_dirs)  # runs not trained yet are listed, not an error
    intro = [
        "Written by `make reproduce-table2` (`python -m nlgkit.experiments.reproduce table2 RUN_DIR…`): each run's best",
        "checkpoint (by validation BLEU) translates test2016 with the recipe's beam; sacreBLEU on detokenised,",
        "lowercased output against the lowercased raw references.",
        *([""] + [f"Not run yet: `{Path(run_dir).name}`" for run_dir in waiting] if waiting else []),
    ]
    if not ready:
        text = "\n".join(["# Shalev et al., Table 2: BLEU on Multi30K test2016", "", *intro, ""])
        _write(text, output)
        return text
    # significance against the first run (the learned head in the Makefile's order), for runs on the same test set
    report = build_report(collect_runs(ready, log=lambda m: print(m, file=sys.stderr)), "shalev2020_table2",
                          baseline=ready[0])
    text = render_markdown(report, title="Shalev et al., Table 2: BLEU on Multi30K test2016", intro=intro)
    _write(text, output)
    if output:
        from nlgkit.core.io import write_json

        write_json(Path(output).with_suffix(".json"), report_to_dict(report))
    return text


def tokarchuk(run_dirs: list[str], output: str | None, beams: tuple[int, ...] = tuple(range(1, 11))) -> str:
    """Tokarchuk & Niculae's Table 1, Fig. 1 and Fig. 3 from the given runs, softmax baseline first
    (see :mod:`nlgkit.experiments.tokarchuk`)."""
    from nlgkit.experiments.tokarchuk import tokarchuk_report

    return _research_report("Tokarchuk & Niculae (2024)", lambda ready: tokarchuk_report(ready, beams, log=_log),
                            run_dirs, output)


def pappas(run_dirs: list[str], output: str | None) -> str:
    """Pappas et al.'s Table 2, ablations and sampling from the given runs (see :mod:`nlgkit.experiments.pappas`)."""
    from nlgkit.experiments.pappas import pappas_report

    return _research_report("Pappas et al. (2018)", lambda ready: pappas_report(ready, log=_log), run_dirs, output)


def pappas_speed(recipe: str, overrides: list[str], vocab_size: int, sentences: int, updates: int, warmup: int,
                 output: str | None, device: str = "cpu") -> str:
    """Pappas et al.'s Table 4: training target tokens/s of each output layer at each sampling share, measured
    on synthetic batches at the paper's vocabulary size (Multi30K cannot give |V| = 128K: its joint BPE 8k
    vocabulary has 4,322 English entries, and the Shalev recipes' word vocabulary 5,893)."""
    import torch

    from nlgkit.experiments.bench.research import spawn_model_training
    from nlgkit.core.config import load_recipe
    from nlgkit.experiments.pappas import SPEED_HEADS, SPEED_SHARES, speed_overrides, speed_report
    from nlgkit.runs.provenance import git_revision

    config = load_recipe(recipe, overrides)  # a bad recipe or option fails here, before any measurement
    results = []
    for kind, joint_dim in SPEED_HEADS:
        for share in SPEED_SHARES:
            cell = speed_overrides(kind, joint_dim, share)
            _log(f"measuring {' '.join(cell)}")
            result = spawn_model_training(recipe, [*overrides, *cell], vocab_size, sentences, updates, warmup,
                                          device)
            results.append({**result, "head": kind, "joint_dim": joint_dim, "share": share})
    git = git_revision()
    m = config.model
    shown = Path(recipe).resolve()
    shown = shown.relative_to(RECIPES.parent) if shown.is_relative_to(RECIPES.parent) else shown
    setting = (f"Model: `{shown}` ({m.type}, {m.layers} layers, {m.hidden_dim} wide"
               + (f"; options {', '.join(f'`{o}`' for o in overrides)}" if overrides else "")
               + f"), synthetic vocabulary of {vocab_size:,} words on each side (the paper's joint BPE |V| ≈ "
               f"128K), batches of {sentences} sentence pairs of 8–20 Zipf-distributed tokens, {updates} timed "
               f"updates after {warmup} warm-up. Measured on {_speed_machine(device, results[0]['threads'])}, torch "
               f"{torch.__version__}, nlgkit {str(git['commit'])[:7]}{' (dirty)' if git['dirty'] else ''}.")
    text = speed_report(results, setting)
    _write(text, output)
    return text


def _speed_machine(device: str, threads: int) -> str:
    """Where a speed table was measured: the GPU's name (float32) or the CPU's with its thread count."""
    import torch

    from nlgkit.runs.provenance import cpu_name, thread_count

    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(torch.device(device))} (float32)"
    return f"{cpu_name()}, {thread_count(threads)}"


def _research_report(paper: str, build: Any, run_dirs: list[str], output: str | None) -> str:
    """``build(trained run directories)``'s Markdown, with the runs not trained yet listed (not an error)."""
    ready, waiting = _trained(run_dirs)
    text = build([Path(r) for r in ready]) if ready else f"# {paper} on the data present\n"
    if waiting:
        text += "\nNot run yet: " + ", ".join(f"`{Path(run_dir).name}`" for run_dir in waiting) + ".\n"
    _write(text, output)
    return text


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _beams(text: str) -> tuple[int, ...]:
    try:
        beams = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise NlgkitError(f"--beams {text!r}: expected beam sizes separated by commas, e.g. 1,2,5") from None
    if not beams or min(beams) < 1:
        raise NlgkitError(f"--beams {text!r}: beam sizes must be at least 1")
    return beams


def _trained(run_dirs: list[str]) -> tuple[list[str], list[str]]:
    """The run directories with a best checkpoint, and those without one yet."""
    from nlgkit.runs.records import best_meta

    ready, waiting = [], []
    for run_dir in run_dirs:
        try:
            best_meta(Path(run_dir))
            ready.append(run_dir)
        except NlgkitError:
            waiting.append(run_dir)
    return ready, waiting


def table1(run_dirs: list[str], output: str | None, dataset: str = "Flickr8k") -> str:
    """Shalev et al.'s Table 1 for the given captioning runs (see :mod:`nlgkit.experiments.table1`)."""
    from nlgkit.runs.records import best_meta
    from nlgkit.experiments.table1 import build_table1, render

    ready = []
    for run_dir in run_dirs:
        try:
            best_meta(Path(run_dir))
            ready.append(Path(run_dir))
        except NlgkitError:
            print(f"not trained yet: {run_dir}", file=sys.stderr)
    table = build_table1(ready)
    text = render(table, dataset)
    _write(text, output)
    if output:
        from nlgkit.core.io import write_json

        write_json(Path(output).with_suffix(".json"), {k: v for k, v in table.items() if k != "examples"}
                   | {"examples": table["examples"]})
    return text


def table4(run_dirs: list[str], output: str | None, wordsim_dir: str | None = None) -> str:
    """Shalev et al. Table 4: word similarity of target and input vectors beside the paper's correlations.

    For a DE-EN model the English vectors are the decoder's: "target" = the head's rows, "input" = the decoder's
    input embeddings; for EN-DE they are the encoder's input embeddings (the paper has no EN-DE row).
    """
    from nlgkit.evaluate.analysis.vectors import vector_sets
    from nlgkit.evaluate.analysis.wordsim import DEFAULT_DIR, benchmark_paths, read_benchmark, word_similarity
    from nlgkit.experiments.papers import load_table
    from nlgkit.runs.loading import load_trained

    paper = load_table("shalev2020_table4")
    benchmarks = {name: read_benchmark(path)
                  for name, path in benchmark_paths(Path(wordsim_dir) if wordsim_dir else DEFAULT_DIR).items()}
    lines = ["# Shalev et al., Table 4: word similarity (Spearman ρ), target / input vectors", "",
             "Written by `make reproduce-table4` (`python -m nlgkit.experiments.reproduce table4 RUN_DIR…`): Spearman ρ between",
             "the cosine of two words' vectors and the human score, over the pairs whose words are both in the",
             "vocabulary (covered/total); each run's best checkpoint.", ""]
    body = []
    for run_dir in run_dirs:
        run = load_trained(Path(run_dir), "best", "cpu")
        cfg = run.config
        sets = vector_sets(run.model, run.src_vocab, run.tgt_vocab)
        english = ("tgt_output", "tgt_input") if cfg.data.tgt_lang == "en" else (None, "src_input")
        row = paper.match({"dataset": "multi30k", "pair": f"{cfg.data.src_lang}-{cfg.data.tgt_lang}",
                           "model": cfg.model.type}) if cfg.head.type == "learned" else None  # learned rows only
        for name, pairs in benchmarks.items():
            cells, covered = [], ""
            for kind, set_name in zip(("target", "input"), english):
                result = word_similarity(sets[set_name].matrix, sets[set_name].vocab, pairs) if set_name else None
                ours = "–" if result is None or result.rho is None else f"{result.rho:.2f}"
                theirs = row.values.get(f"{name}_{kind}") if row else None
                cells += [ours, "–" if theirs is None else f"{theirs:.2f}"]
                if result is not None:
                    covered = f"{result.covered}/{result.total}"
            body.append([f"`{run_dir}`", cfg.head.type, name, *cells, covered])
    lines += md_table(["run", "head", "benchmark", "target ρ (nlgkit)", "target ρ (paper)", "input ρ (nlgkit)",
                       "input ρ (paper)", "pairs"], body, [False] * 3 + [True] * 5)
    lines += ["", "A fixed head's target vectors are random by construction; the paper reports learned models only.",
              ""]
    text = "\n".join(lines)
    _write(text, output)
    return text


def _source_line(run_dir: Path) -> str:
    """Where a summary was read from; a record names the run directory it was archived from."""
    from nlgkit.runs.records import RECORD_FILE, is_record

    if is_record(run_dir):
        origin = json.loads((run_dir / RECORD_FILE).read_text(encoding="utf-8")).get("archived_from", "?")
        return f"Read from its record `{run_dir}` (archived from `{origin}`)."
    return f"Read from its run directory `{run_dir}`."


def log_summary(run_dirs: list[str], output: str | None) -> str:
    """Per-epoch validation figures of each run, from its metrics.jsonl (the run logs behind a table)."""
    from nlgkit.runs.metrics_log import MetricsLog

    parts = ["# Run logs", "", "Per-epoch validation (greedy search over the validation set) from each run's",
             "`metrics.jsonl`; written by `python -m nlgkit.experiments.reproduce log-summary`.", ""]
    for run_dir in run_dirs:
        events = MetricsLog(Path(run_dir) / "metrics.jsonl").read()
        parts += [f"## `{Path(run_dir).name}`", ""]
        if not events:
            parts += ["Not run yet: no metrics.jsonl in its run directory or record.", ""]
            continue
        parts.append(_source_line(Path(run_dir)))
        resumes = [e for e in events if e["event"] == "resume"]
        start = next((e for e in events if e["event"] == "start"), {})
        train = [e for e in events if e["event"] == "train"]
        speed = sum(e["tokens_per_s"] for e in train) / max(len(train), 1)
        # an "end" followed by a resume was a pause (a signal, a time limit), not the run's end
        end = events[-1:] if events and events[-1]["event"] == "end" else []
        provenance_file = Path(run_dir) / "provenance.json"
        provenance = json.loads(provenance_file.read_text(encoding="utf-8")) if provenance_file.is_file() else None
        parts += ["", _provenance_line(provenance) +
                  f"{start.get('parameters', 0):,} trainable parameters; mean training speed {speed:,.0f} target "
                  f"tokens/s over {len(train)} logged windows; "
                  + (f"resumed {len(resumes)} time(s) from its last checkpoint (at updates "
                     f"{_resume_points(provenance, resumes)}); " if resumes else "")
                  + "".join(f"went on from epoch {e['epoch']} after '{e['previous_stop']}' (limits raised); "
                            for e in events if e["event"] == "extend")
                  + (f"ended: {end[-1]['reason']}." if end else "no end event: the run was stopped from outside "
                     "(or is still running)."),
                  "", _training_line(Path(run_dir)), ""]
        epochs = []
        for e in events:
            if e["event"] == "valid" and not e.get("partial"):
                metric = e.get("metric", "bleu")  # runs logged before tasks existed: BLEU, best as best_bleu
                best = e.get("best", e.get("best_bleu"))
                epochs.append([str(e["epoch"]), str(e["update"]), f"{e['loss']:.3f}", f"{e['ppl']:.2f}",
                               f"{e[metric]:.2f}", f"{best:.2f}", f"{e['lr']:.2e}", f"{e['wall_s'] / 60:.1f}"])
        parts += md_table(["epoch", "updates", "valid loss", "valid ppl", f"valid {_metric_name(events)}", "best", "lr",
                           "wall (min)"], epochs, [True] * 8)
        parts.append("")
    text = "\n".join(parts)
    _write(text, output)
    return text


def _resume_points(provenance: dict[str, Any] | None, resumes: list[dict[str, Any]]) -> str:
    """The updates a run resumed at, each marked with the code revision it went on with when that differs
    from the revision before it (a fix landing between two resumes shows where the log's figures change)."""
    previous = _commit(provenance.get("git", {})) if provenance is not None else None
    points = []
    for event in resumes:
        commit = _commit(event["git"]) if "git" in event else previous
        points.append(f"{event['update']}" + (f" with nlgkit {commit}" if commit != previous else ""))
        previous = commit
    return ", ".join(points)


def _commit(git: dict[str, Any]) -> str:
    """A short revision, as the run logs name it."""
    return str(git.get("commit") or "unknown")[:7] + (" with uncommitted changes" if git.get("dirty") else "")


def _provenance_line(provenance: dict[str, Any] | None) -> str:
    """Where and from which code a run trained (its provenance.json), as the start of its summary line."""
    from nlgkit.runs.provenance import thread_count

    if provenance is None:
        return ""
    env, git = provenance.get("env", {}), provenance.get("git", {})
    threads = env.get("threads", "?")
    device = env.get("gpu") or f"CPU ({env.get('cpu', '?')}, {thread_count(threads)})"
    return f"Trained on {device}, torch {env.get('torch', '?')}, nlgkit {_commit(git)}; "


def _training_line(run_dir: Path) -> str:
    """The run's optimisation settings as it last trained (its last checkpoint's config, else config.json),
    so a table's budget can be read off; limits raised on resuming show their raised values."""
    meta, path = run_dir / "checkpoints" / "last" / "meta.json", run_dir / "config.json"
    if meta.is_file():
        train = json.loads(meta.read_text(encoding="utf-8"))["config"].get("train", {})
    elif path.is_file():
        train = json.loads(path.read_text(encoding="utf-8")).get("train", {})
    else:
        return "no config.json"
    schedule = train.get("schedule", "plateau")
    if schedule == "inverse_sqrt":
        schedule += f" (warm-up {train.get('warmup_updates')} updates)"
    elif schedule == "plateau":
        watched = "validation loss" if train.get("schedule_metric") == "loss" else "validation score"
        schedule += f" (× {train.get('lr_decay')} after {train.get('lr_patience')} epochs without {watched} gain)"
    return (f"Training: {train.get('optimizer', 'adam')}, lr {train.get('lr')}, schedule {schedule}, batches of "
            f"{train.get('batch_size')} {train.get('batch_unit')}, at most {train.get('max_epochs')} epochs, early "
            f"stop after {train.get('early_stop_patience')} epochs without improvement, label smoothing "
            f"{train.get('label_smoothing', 0.0)}, seed {train.get('seed')}.")


def _metric_name(events: list[dict[str, Any]]) -> str:
    """The validation metric a run logged (runs from before tasks logged BLEU only)."""
    metric = next((e.get("metric", "bleu") for e in events if e["event"] == "valid"), "bleu")
    return "BLEU" if metric == "bleu" else metric


def show(hyp: str, ref: str, source: str | None, n: int) -> None:
    """Print the first ``n`` hypotheses beside their references (and sources)."""
    from rich.console import Console
    from rich.table import Table

    from nlgkit.core.io import read_lines

    hyps, refs = read_lines(hyp), read_lines(ref)
    srcs = read_lines(source) if source else [""] * len(hyps)
    table = Table(title=f"first {n} test translations", show_lines=True)
    for column in ("source", "nlgkit", "reference"):
        table.add_column(column, overflow="fold")
    for s, h, r in list(zip(srcs, hyps, refs))[:n]:
        table.add_row(s, h, r)
    Console().print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m nlgkit.experiments.reproduce", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p1 = sub.add_parser("table1")
    p1.add_argument("runs", nargs="+")
    p1.add_argument("--output")
    p1.add_argument("--dataset", default="Flickr8k")
    p3 = sub.add_parser("table3")
    p3.add_argument("--output")
    p2 = sub.add_parser("table2")
    p2.add_argument("runs", nargs="+")
    p2.add_argument("--output")
    p4 = sub.add_parser("table4")
    p4.add_argument("runs", nargs="+")
    p4.add_argument("--output")
    p4.add_argument("--wordsim-dir")
    pt = sub.add_parser("tokarchuk")
    pt.add_argument("runs", nargs="+")
    pt.add_argument("--output")
    pt.add_argument("--beams", default="1,2,3,4,5,6,7,8,9,10", help="beam sizes of BLEU against beam size")
    pp = sub.add_parser("pappas")
    pp.add_argument("runs", nargs="+")
    pp.add_argument("--output")
    pv = sub.add_parser("pappas-speed", help="their Table 4: training tokens/s by output layer and sampling share")
    pv.add_argument("recipe", nargs="?", default=str(RECIPES / "pappas_multi30k.toml"))
    pv.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    pv.add_argument("--vocab", type=int, default=128_000, help="synthetic vocabulary size (the paper's ≈ 128K)")
    pv.add_argument("--sentences", type=int, default=64, help="sentence pairs per update")
    pv.add_argument("--updates", type=int, default=3)
    pv.add_argument("--warmup", type=int, default=1)
    pv.add_argument("--device", default="cpu", help="cpu, or cuda to measure on a GPU (float32)")
    pv.add_argument("--output")
    pl = sub.add_parser("log-summary")
    pl.add_argument("runs", nargs="+")
    pl.add_argument("--output")
    pa = sub.add_parser("archive", help="write weightless run records (commit them beside the tables)")
    pa.add_argument("runs", nargs="+")
    pa.add_argument("--into", required=True, help="records directory, e.g. results/runs")
    for reads_runs in (p1, p2, pt, pp, pl):
        reads_runs.add_argument("--records", help="read a run with no trained directory from its record here")
    ps = sub.add_parser("show")
    ps.add_argument("hyp")
    ps.add_argument("ref")
    ps.add_argument("--source")
    ps.add_argument("-n", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        if getattr(args, "records", None):
            args.runs = with_records(args.runs, args.records, log=_log)
        if args.command == "table1":
            table1(args.runs, args.output, args.dataset)
        elif args.command == "table3":
            table3(args.output)
        elif args.command == "table2":
            table2(args.runs, args.output)
        elif args.command == "table4":
            table4(args.runs, args.output, args.wordsim_dir)
        elif args.command == "tokarchuk":
            tokarchuk(args.runs, args.output, _beams(args.beams))
        elif args.command == "pappas":
            pappas(args.runs, args.output)
        elif args.command == "pappas-speed":
            pappas_speed(args.recipe, args.overrides, args.vocab, args.sentences, args.updates, args.warmup,
                         args.output, args.device)
        elif args.command == "log-summary":
            log_summary(args.runs, args.output)
        elif args.command == "archive":
            for run in args.runs:
                _log(f"{run}: recorded in {archive_run(Path(run), Path(args.into))}")
        else:
            show(args.hyp, args.ref, args.source, args.n)
    except NlgkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()

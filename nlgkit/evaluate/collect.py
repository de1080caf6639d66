"""What a report needs from each run directory: its settings, test hypotheses, scores and provenance.

Hypotheses are the expensive part, so ``RUN_DIR/test.hyp.{tgt}`` is reused whenever it is newer than the best
checkpoint; only then is no model loaded at all (reports over many runs stay cheap, and tests need no weights).
Otherwise the best checkpoint translates the test split with the recipe's ``[search]`` and the file is written
atomically for next time. A run record (:mod:`nlgkit.runs.records`) has no weights: its hypotheses and
references are always the ones it keeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nlgkit.core.config import RunConfig, config_from_dict, to_dict
from nlgkit.core.errors import DataError
from nlgkit.runs.records import best_meta, check_record, is_record, newest_mtime
from nlgkit.core.io import atomic_write, read_json, read_lines
from nlgkit.metrics.corpus import corpus_scores

# Settings that say where or how fast a run was executed, not what was trained: runs differing only in
# these (and the seed) are repetitions of one experiment. The wall-time cap is one: it depends on the machine,
# and a run that reached it shows so in its status (reports flag one stopped while still improving).
EXECUTION_ONLY = {"train": {"seed", "device", "num_threads", "log_every", "max_minutes"}, "search": {"batch_size"}}


@dataclass
class RunResult:
    name: str
    run_dir: Path
    # matched against paper rows: dataset, pair, src, tgt, model, head, seed, beam, subword, target_embeddings
    keys: dict[str, Any]
    group: str  # the config without the seed and execution settings: equal for seed repetitions
    hyps: list[str]
    refs: list[str]
    hyp_file: Path
    reused: bool  # hypotheses read from hyp_file rather than translated now
    values: dict[str, float] = field(default_factory=dict)  # metric scores, and "params" when recorded
    signatures: dict[str, str] = field(default_factory=dict)
    progress: dict[str, Any] = field(default_factory=dict)  # epoch, best_epoch, finished, stop_reason, wall
    hardware: str = "unknown"
    config: RunConfig | None = None  # the run's resolved recipe (its search beam as scored)

    @property
    def status(self) -> str:
        reason = self.progress.get("stop_reason")
        if self.progress.get("finished"):
            return f"finished: {reason}" if reason else "finished"
        return f"not finished: {reason}" if reason else "not finished (stopped from outside, or running)"

    @property
    def wall_seconds(self) -> float | None:
        return self.progress.get("wall_seconds")

    @property
    def completed_epochs(self) -> int | None:
        if "epoch" not in self.progress:
            return None
        # an unfinished run's loop already points at the epoch it would train next
        return self.progress["epoch"] if self.progress.get("finished") else self.progress["epoch"] - 1

    @property
    def epochs(self) -> str:
        """``best epoch / completed epochs`` ("–" when the run recorded no progress)."""
        completed = self.completed_epochs
        return "–" if completed is None else f"{self.progress.get('best_epoch', '?')} / {completed}"

    @property
    def still_improving(self) -> bool:
        """Its last completed epoch was its best so far, and early stopping did not end it: not converged.

        That covers runs stopped by a limit (epochs, time, updates) and runs not finished yet.
        """
        completed = self.completed_epochs
        early_stop = str(self.progress.get("stop_reason", "")).startswith("no ")  # "no bleu improvement for …"
        return bool(completed) and not early_stop and self.progress.get("best_epoch") == completed


def collect_runs(
    run_dirs: Sequence[str | Path],
    metrics: Sequence[str] = ("bleu",),
    device: str = "auto",
    log: Callable[[str], None] | None = None,
    beam: int | None = None,
) -> list[RunResult]:
    """One :class:`RunResult` per run directory, scored on its data directory's test split (with the
    recipe's beam, or ``beam``)."""
    for run_dir in run_dirs:  # fail on a bad directory before translating anything
        best_meta(Path(run_dir))
    return [collect_run(Path(run_dir), metrics, device, log, beam) for run_dir in run_dirs]


def collect_run(
    run_dir: Path, metrics: Sequence[str], device: str = "auto", log: Callable[[str], None] | None = None,
    beam: int | None = None,
) -> RunResult:
    meta_path = best_meta(run_dir)
    config_path = run_dir / "config.json"
    raw = read_json(config_path) if config_path.is_file() else read_json(meta_path)["config"]
    config = config_from_dict(raw, str(config_path))
    if beam is not None and beam != config.search.beam:
        config = replace(config, search=replace(config.search, beam=beam))
        hyp_file = run_dir / f"test.beam{beam}.hyp.{config.data.tgt_lang}"
    else:
        hyp_file = run_dir / f"test.hyp.{config.data.tgt_lang}"
    src, tgt = config.data.src_lang, config.data.tgt_lang
    data_dir = Path(config.data.dir)
    record = is_record(run_dir)  # a run without weights: its own references, and hypotheses it cannot remake
    if record:
        check_record(run_dir)
    refs = read_lines((run_dir / "data" if record else data_dir) / f"test.ref.{tgt}")
    reused = hyp_file.is_file() and (record or hyp_file.stat().st_mtime_ns > newest_mtime(meta_path.parent))
    if record and not reused:
        raise DataError(f"{hyp_file}: not in this run record, which keeps no weights to translate with")
    if reused:
        hyps = read_lines(hyp_file)
    else:
        if log:
            log(f"{run_dir}: translating {data_dir / f'test.{src}'} with the best checkpoint, beam {config.search.beam}")
        hyps = translate_test(run_dir, data_dir, device, beam=config.search.beam)
        with atomic_write(hyp_file) as handle:
            handle.writelines(line + "\n" for line in hyps)
    if len(hyps) != len(refs):
        raise DataError(
            f"{hyp_file}: {len(hyps)} lines but {data_dir / f'test.ref.{tgt}'} has {len(refs)} "
            "(delete it to translate again)"
        )
    scores = corpus_scores(hyps, [refs], metrics=metrics)
    result = RunResult(
        config.run.name or run_dir.name,
        run_dir,
        run_keys(config, run_dir),
        group_key(config),
        hyps,
        refs,
        hyp_file,
        reused,
        values={name: entry["score"] for name, entry in scores.items()},
        signatures={name: entry["signature"] for name, entry in scores.items()},
        config=config,
    )
    last = run_dir / "checkpoints" / "last" / "meta.json"
    # progress from the last checkpoint: present even when a run was stopped from outside
    result.progress = read_json(last if last.is_file() else meta_path).get("loop", {})
    provenance_path = run_dir / "provenance.json"
    if provenance_path.is_file():
        from nlgkit.runs.metrics_log import MetricsLog
        from nlgkit.runs.provenance import hardware_label

        provenance = read_json(provenance_path)
        # a resumed session may have run elsewhere, or with other threads: name every set-up once
        resumes = [e for e in MetricsLog(run_dir / "metrics.jsonl").read() if e["event"] == "resume"]
        envs = [provenance.get("env", {})] + [event["env"] for event in resumes if "env" in event]
        result.hardware = " + ".join(dict.fromkeys(hardware_label(env) for env in envs))
        if "trainable" in provenance.get("parameters", {}):
            result.values["params"] = provenance["parameters"]["trainable"]
    return result


def translate_test(run_dir: Path, data_dir: Path, device: str = "auto", beam: int | None = None) -> list[str]:
    """Detokenised translations of ``test.{src}`` by the best checkpoint, with the recipe's search settings
    (its beam unless ``beam`` is given)."""
    from nlgkit.generation.decode import best_texts, generate
    from nlgkit.runs.loading import load_trained

    run = load_trained(run_dir, "best", device=device)
    cfg = run.config
    sources = [
        run.src_vocab.encode(line.split()) for line in read_lines(data_dir / f"test.{cfg.data.src_lang}")
    ]
    s = cfg.search
    found = generate(
        run.model,
        run.task,
        sources,
        run.tgt_vocab,
        beam=s.beam if beam is None else beam,
        length_penalty=s.length_penalty,
        max_len_a=s.max_len_a,
        max_len_b=s.max_len_b,
        batch_size=s.batch_size,
        device=run.device,
    )
    return best_texts(found, run.tgt_vocab, run.detokenizer())


def run_keys(config: RunConfig, run_dir: Path) -> dict[str, Any]:
    """The names a paper row may be keyed on, in the paper tables' vocabulary (lowercase corpus and pair)."""
    manifest = _manifest(run_dir, Path(config.data.dir))
    prepare = config.data.prepare
    dataset = manifest.get("corpus") or (
        prepare.corpus if prepare.corpus != "none" else Path(config.data.dir).name
    )
    src, tgt = config.data.src_lang, config.data.tgt_lang
    return {
        "dataset": dataset,
        "pair": f"{src}-{tgt}",
        "src": src,
        "tgt": tgt,
        "model": config.model.type,
        "head": config.head.type,
        "seed": config.train.seed,
        "beam": config.search.beam,
        "subword": manifest.get("subword", prepare.subword),
        "target_embeddings": config.head.target_embeddings(),
    }


def _manifest(run_dir: Path, data_dir: Path) -> dict[str, Any]:
    for path in (run_dir / "manifest.json", run_dir / "data" / "manifest.json", data_dir / "manifest.json"):
        if path.is_file():
            return read_json(path)
    return {}


def group_key(config: RunConfig) -> str:
    """The resolved config minus the run's name/directory, seed and execution settings, as canonical JSON."""
    data = to_dict(config)
    data.pop("run", None)
    for section, names in EXECUTION_ONLY.items():
        for name in names:
            data.get(section, {}).pop(name, None)
    return json.dumps(data, sort_keys=True)


def group_runs(results: Sequence[RunResult]) -> list[list[RunResult]]:
    """Seed repetitions together (first-seen order), each group sorted by seed."""
    groups: dict[str, list[RunResult]] = {}
    for result in results:
        groups.setdefault(result.group, []).append(result)
    return [sorted(group, key=lambda r: r.keys["seed"]) for group in groups.values()]

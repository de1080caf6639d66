"""What a report needs from each run directory: its settings, test outputs, scores and provenance.

Outputs are the expensive part, so the ones a run keeps are reused while they are its best checkpoint's;
only then is no model loaded at all (reports over many runs stay cheap, and tests need no weights). Otherwise
the best checkpoint generates the test split with the recipe's ``[search]`` (:mod:`nlgkit.evaluate.outputs`).
A run record (:mod:`nlgkit.runs.records`) has no weights: its outputs and references are the ones it keeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from nlgkit.core.config import RunConfig, to_dict
from nlgkit.core.io import read_json, sha256_file
from nlgkit.evaluate.outputs import split_outputs
from nlgkit.metrics.corpus import corpus_scores, reference_streams
from nlgkit.runs.metrics_log import MetricsLog
from nlgkit.runs.outputs import best_meta, run_config
from nlgkit.runs.provenance import hardware_label
from nlgkit.tasks import build_task

# Settings that say where or how fast a run was executed, not what was trained: runs differing only in
# these (and the seed) are repetitions of one experiment. The wall-time cap is one: it depends on the machine,
# and a run that reached it shows so in its status (reports flag one stopped while still improving).
EXECUTION_ONLY = {"train": {"seed", "device", "num_threads", "log_every", "max_minutes",
                            "tensorboard", "keep_epochs", "save_every_updates"}, "search": {"batch_size"}}


@dataclass
class RunResult:
    name: str
    run_dir: Path
    # matched against paper rows: dataset, pair, src, tgt, model, head, seed, beam, subword, target_embeddings
    keys: dict[str, Any]
    group: str  # the config without the seed and execution settings: equal for seed repetitions
    hyps: list[str]
    refs: list[str]  # the first reference of each item
    hyp_file: Path
    reused: bool  # hypotheses read from hyp_file rather than translated now
    values: dict[str, float] = field(default_factory=dict)  # metric scores, and "params" when recorded
    signatures: dict[str, str] = field(default_factory=dict)
    progress: dict[str, Any] = field(default_factory=dict)  # epoch, best_epoch, finished, stop_reason, wall
    hardware: str = "unknown"
    config: RunConfig | None = None  # the run's resolved recipe (its search beam as scored)
    ref_streams: list[list[str]] = field(default_factory=list)  # every reference stream (``refs`` is the first)

    def __post_init__(self) -> None:
        if not self.ref_streams:
            self.ref_streams = [self.refs]

    @property
    def finished(self) -> bool:
        """Trained to its recipe's end (stopping rule or epoch limit), not stopped by a cap or from outside."""
        return bool(self.progress.get("finished"))

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


class Finishable(Protocol):
    """A run, or a run's progress, that knows whether it trained to its recipe's end."""

    @property
    def finished(self) -> bool: ...


SeedRun = TypeVar("SeedRun", bound=Finishable)


def counted_seeds(results: Sequence[SeedRun]) -> list[SeedRun]:
    """The seeds a mean counts: the finished ones where some finished (a run stopped by a cap is interim and,
    averaged in, would pull the mean towards its training budget), else all of them."""
    finished = [result for result in results if result.finished]
    return finished or list(results)


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
    outputs = split_outputs(run_dir, "test", beam, device, log)
    config = run_config(run_dir, beam)
    streams = reference_streams(outputs.refs)
    scores = corpus_scores(outputs.texts, streams, metrics=metrics)
    result = RunResult(
        config.run.name or run_dir.name,
        run_dir,
        run_keys(config, run_dir),
        group_key(config),
        outputs.texts,
        streams[0],
        outputs.file,
        outputs.reused,
        values={name: entry["score"] for name, entry in scores.items()},
        signatures={name: entry["signature"] for name, entry in scores.items()},
        config=config,
        ref_streams=streams,
    )
    last = run_dir / "checkpoints" / "last" / "meta.json"
    # progress from the last checkpoint: present even when a run was stopped from outside
    result.progress = read_json(last if last.is_file() else meta_path).get("loop", {})
    provenance_path = run_dir / "provenance.json"
    if provenance_path.is_file():
        provenance = read_json(provenance_path)
        # a resumed session may have run elsewhere, or with other threads: name every set-up once
        resumes = [e for e in MetricsLog(run_dir / "metrics.jsonl").read() if e["event"] == "resume"]
        envs = [provenance.get("env", {})] + [event["env"] for event in resumes if "env" in event]
        result.hardware = " + ".join(dict.fromkeys(hardware_label(env) for env in envs))
        if "trainable" in provenance.get("parameters", {}):
            result.values["params"] = provenance["parameters"]["trainable"]
    return result


def run_keys(config: RunConfig, run_dir: Path) -> dict[str, Any]:
    """The names a paper row may be keyed on, in the paper tables' vocabulary (lowercase corpus and pair):
    the task's (dataset, pair, subword…) and the model's, head's, seed's and search's."""
    return {
        **build_task(config).report_keys(_manifest(run_dir, Path(config.data.dir))),
        "model": config.model.type,
        "head": config.head.type,
        "seed": config.train.seed,
        "beam": config.search.beam,
        "target_embeddings": config.head.target_embeddings(),
    }


def _manifest(run_dir: Path, data_dir: Path) -> dict[str, Any]:
    for path in (run_dir / "manifest.json", run_dir / "data" / "manifest.json", data_dir / "manifest.json"):
        if path.is_file():
            return read_json(path)
    return {}


def group_key(config: RunConfig) -> str:
    """The resolved config minus the run's name/directory, seed and execution settings, as canonical JSON.

    A file the config names (a continuous head's target table) counts by its content, not its path: two seeds
    archived as records each keep their own copy of the same table.
    """
    data = to_dict(config)
    data.pop("run", None)
    for section, names in EXECUTION_ONLY.items():
        for name in names:
            data.get(section, {}).pop(name, None)
    table = data.get("head", {}).get("table")
    if table and Path(table).expanduser().is_file():
        data["head"]["table"] = "sha256:" + sha256_file(Path(table).expanduser())
    return json.dumps(data, sort_keys=True)


def group_runs(results: Sequence[RunResult]) -> list[list[RunResult]]:
    """Seed repetitions together (first-seen order), each group sorted by seed."""
    groups: dict[str, list[RunResult]] = {}
    for result in results:
        groups.setdefault(result.group, []).append(result)
    return [sorted(group, key=lambda r: r.keys["seed"]) for group in groups.values()]

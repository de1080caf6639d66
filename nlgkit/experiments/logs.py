"""The run logs behind a table (``nlgkit reproduce log-summary``): per-epoch validation figures, where and with
which code and settings each run trained, read from its run directory or its committed record; and where runs
still training stand against their stopping rule (``nlgkit reproduce status``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from nlgkit.evaluate.markdown import md_table
from nlgkit.experiments.common import write_output
from nlgkit.runs.metrics_log import MetricsLog
from nlgkit.runs.progress import RunProgress, read_progress
from nlgkit.runs.provenance import thread_count
from nlgkit.runs.records import RECORD_FILE, is_record


def _source_line(run_dir: Path) -> str:
    """Where a summary was read from; a record names the run directory it was archived from."""
    if is_record(run_dir):
        origin = json.loads((run_dir / RECORD_FILE).read_text(encoding="utf-8")).get("archived_from", "?")
        return f"Read from its record `{run_dir}` (archived from `{origin}`)."
    return f"Read from its run directory `{run_dir}`."


def log_summary(run_dirs: list[str], output: str | None) -> str:
    """Per-epoch validation figures of each run, from its metrics.jsonl (the run logs behind a table)."""
    parts = ["# Run logs", "", "Per-epoch validation (greedy search over the validation set) from each run's",
             "`metrics.jsonl`; written by `nlgkit reproduce log-summary`.", ""]
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
    return write_output(text, output)


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
    gain = f" above {train['min_delta']:g}" if train.get("min_delta") else ""
    return (f"Training: {train.get('optimizer', 'adam')}, lr {train.get('lr')}, schedule {schedule}, batches of "
            f"{train.get('batch_size')} {train.get('batch_unit')}, at most {train.get('max_epochs')} epochs, early "
            f"stop after {train.get('early_stop_patience')} epochs without improvement{gain}, label smoothing "
            f"{train.get('label_smoothing', 0.0)}, seed {train.get('seed')}.")


def _metric_name(events: list[dict[str, Any]]) -> str:
    """The validation metric a run logged (runs from before tasks logged BLEU only)."""
    metric = next((e.get("metric", "bleu") for e in events if e["event"] == "valid"), "bleu")
    return "BLEU" if metric == "bleu" else metric


def status(run_dirs: list[str], now: float | None = None) -> str:
    """One row per run: done or how far, its best epoch, epochs without a gain against the stopping rule's patience,
    and at most how many epochs and hours are left (the last epochs' mean length; a better score resets the count).
    ``now``: the time the log's last event is aged against (default: now)."""
    now = time.time() if now is None else now
    progress = [read_progress(Path(run_dir)) for run_dir in run_dirs]
    on_the_way = [p for p in progress if p.started and not p.finished]
    known = [p.hours_left for p in on_the_way if p.hours_left is not None]
    total = (f"{sum(p.finished for p in progress)} finished, {len(on_the_way)} on their way, "
             f"{sum(not p.started for p in progress)} not started"
             + (f"; at most {sum(known):.1f} h of training left for those on their way, one after another"
                if known else "")
             + (" (besides runs with no epoch yet)" if len(known) < len(on_the_way) else "") + ".")
    return "\n".join([*md_table(["run", "state", "epochs", "best valid (epoch)", "without gain", "epochs left ≤",
                                  "min / epoch", "trained (h)", "left ≤ (h)", "last logged"],
                                 [_status_row(p, now) for p in progress],
                                 [False, False, True, True, True, True, True, True, True, True]), "", total, ""])


def _status_row(progress: RunProgress, now: float) -> list[str]:
    name = progress.run_dir.name
    if not progress.started:
        return [name, "not started (no checkpoint)", *["–"] * 8]
    state = f"finished: {progress.stop_reason}" if progress.finished else "not finished"
    if is_record(progress.run_dir):  # trained elsewhere: the record's last checkpoint, not a run going on here
        state += " (its record)"
    best = f"{progress.best_score:.2f} ({progress.best_epoch})" if progress.best_score is not None else "–"
    minutes, hours = progress.minutes_per_epoch, progress.hours_left
    ago = "–" if progress.last_logged is None else _age(now - progress.last_logged)
    return [name, state, str(progress.epochs_done), best,
            f"{progress.epochs_without_gain} of {progress.patience}" if progress.patience else "–",
            str(progress.epochs_left), "–" if minutes is None else f"{minutes:.1f}", f"{progress.hours_trained:.2f}",
            "–" if hours is None else f"{hours:.1f}", ago]


def _age(seconds: float) -> str:
    """How long ago, in the largest whole unit (a run last logged minutes ago is most likely still training)."""
    seconds = max(0.0, seconds)
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.0f} days ago"

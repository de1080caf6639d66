"""The training checkpoints of a run directory: what goes into ``checkpoints/{best,last}`` and how a
resumed run takes it back.

``last`` carries the training state (optimizer, schedule, every rank's RNG state, the loop position) so
that an interrupted-and-resumed run ends with the same weights as an uninterrupted one; ``best`` holds
weights and metadata only. The files themselves are written atomically by
:func:`nlgkit.runs.checkpoint.save_checkpoint`; this module decides what they hold and checks, before
anything is loaded, that a resumed run is the same run (frozen config sections, vocabularies).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from nlgkit.core.config import RunConfig, config_from_dict, to_dict
from nlgkit.core.errors import CheckpointError, NlgkitError
from nlgkit.core.io import read_json, sha256_file, write_json
from nlgkit.runs.checkpoint import (
    find_checkpoint,
    load_meta,
    load_train_state,
    load_weights,
    save_checkpoint,
    state_file,
)
from nlgkit.runs.outputs import RECORD_FILE, is_record
from nlgkit.runs.provenance import environment
from nlgkit.train.distributed import rank_seed
from nlgkit.train.ema import WeightAverage
from nlgkit.train.precision import precision_label
from nlgkit.train.session import LoopState, Session

# Sections that define the model: a resumed run must not change them.
FROZEN_SECTIONS = ("task", "data", "model", "head")
# Settings of [train] that a resumed run cannot go on with once changed: the optimizer and the plateau schedule
# take theirs back from the saved state (a new train.lr would be ignored, while config.json named it), and the
# epoch's batches are cut and ordered by the seed and batch size (another would repeat or skip examples of the
# epoch under way). A new run started from the weights (train.init_from) takes new ones.
FROZEN_TRAIN_KEYS = ("seed", "batch_size", "batch_unit", "lr", "optimizer", "adam_betas", "weight_decay", "schedule",
                     "schedule_metric", "lr_decay", "lr_patience", "min_lr")
# What a training state holds, whatever else it may (:func:`save_training_checkpoint`).
STATE_KEYS = ("optimizer", "scheduler", "rng", "loop")


def check_run_dir(run_dir: Path, last_dir: Path, resume: bool) -> None:
    """Refuse to resume a run with no checkpoint, and to start a new run over a trained one or a run record."""
    if is_record(run_dir):  # (a record's checkpoints hold their meta.json alone: none is found below)
        raise NlgkitError(f"{run_dir}: a run record ({RECORD_FILE}: a finished run's files without its weights), "
                          "not a run directory; set run.dir to a new directory")
    has_checkpoint = find_checkpoint(last_dir) is not None
    if resume and not has_checkpoint:
        raise CheckpointError(f"{last_dir}: nothing to resume (no checkpoint); train without --resume")
    if not resume and has_checkpoint:
        raise NlgkitError(f"{run_dir}: already holds a trained run; pass --resume to continue it "
                          f"or set run.dir to a new directory")
    left = [path.name for path in sorted(last_dir.parent.glob("*")) if find_checkpoint(path) is not None] \
        if not resume and last_dir.parent.is_dir() else []
    if left:  # (a run stopped between its first best and last, or one whose last was deleted: weights to keep)
        raise NlgkitError(f"{run_dir}: holds checkpoints of an earlier run ({', '.join(left)}) but no "
                          f"{last_dir.name} to resume from; move them away, or set run.dir to a new directory")


def save_training_checkpoint(config: RunConfig, session: Session, loop: LoopState, directory: Path,
                             metrics: dict[str, Any], with_state: bool = True) -> None:
    """Rank 0 writes the checkpoint; with the training state, every rank's RNG state goes into it."""
    ranks = session.ranks
    rng_by_rank = ranks.gather(torch.get_rng_state()) if with_state and ranks.distributed else []
    if not ranks.is_main:
        return
    state = None
    if with_state:
        state = {"optimizer": session.optimizer.state_dict(), "scheduler": session.scheduler.state_dict(),
                 "rng": torch.get_rng_state(), "loop": dataclasses.asdict(loop)}
        if session.ema is not None:
            state["ema"] = session.ema.state_dict()
        if session.scaler is not None:
            state["scaler"] = session.scaler.state_dict()
        if ranks.distributed:
            state["rng_by_rank"], state["world_size"] = rng_by_rank, ranks.world_size
        if session.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(session.device)
    meta = {"config": to_dict(config), "vocab_checksums": session.vocab_checksums,
            "git": session.git, "loop": dataclasses.asdict(loop), "metrics": metrics}
    save_checkpoint(directory, session.model, meta, state)


def restore_training_checkpoint(config: RunConfig, session: Session, last_dir: Path,
                                console: Console) -> LoopState:
    """Weights, optimizer, scheduler, RNG and loop position of the last checkpoint, all checked first.

    Logs a ``resume`` event and, when the recipe changed a setting the weights do not depend on, rewrites
    the run's ``config.json`` (the event keeps the old values).
    """
    meta = load_meta(last_dir)
    changed = check_resume_config(config, meta["config"], last_dir)
    if meta.get("vocab_checksums") != session.vocab_checksums:  # saved so a resume can refuse other data
        raise CheckpointError(f"{session.data.data_dir}: vocabularies differ from those of checkpoint "
                              f"{last_dir}")
    check_resume_data(Path(config.run.dir), Path(session.data.data_dir))
    load_weights(last_dir, session.model)
    path, state = state_file(last_dir), load_train_state(last_dir)
    missing = [key for key in STATE_KEYS if key not in state] if isinstance(state, dict) else list(STATE_KEYS)
    if missing:
        raise CheckpointError(f"{path}: not a valid nlgkit training state; it was not loaded (no {missing[0]!r})")
    try:  # a state torch could load may still not be one nlgkit wrote (edited, or another program's)
        loop = _restore_state(config, session, state, last_dir, console)
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{path}: not a valid nlgkit training state; it was not loaded "
                              f"({type(exc).__name__}: {' '.join(str(exc).split())})") from None
    ranks = session.ranks
    session.log.write("resume", update=loop.update, epoch=loop.epoch, git=session.git,
                      env=environment(session.device), precision=precision_label(config.train, session.device),
                      world_size=ranks.world_size,
                      saved_world_size=int(state.get("world_size", 1)), changed=changed)
    if changed and ranks.is_main:  # config.json says what the run goes on with; the event keeps the old values
        write_json(Path(config.run.dir) / "config.json", to_dict(config))
    return loop


def _restore_state(config: RunConfig, session: Session, state: dict[str, Any], last_dir: Path,
                   console: Console) -> LoopState:
    """Put the saved optimizer, schedule, weight average, loss scale and random streams back; the loop position."""
    if session.ema is not None:  # the saved average, or (averaging turned on at this resume) the weights
        session.ema = WeightAverage(session.model, session.ema.decay)
        session.ema.load_state_dict(state.get("ema", {}))
    session.optimizer.load_state_dict(state["optimizer"])
    if session.scaler is not None and "scaler" in state:  # (a run that trained in another precision has none)
        session.scaler.load_state_dict(state["scaler"])
    session.scheduler.load_state_dict(state["scheduler"])
    loop = LoopState.from_saved(state["loop"])
    saved_world = int(state.get("world_size", 1))
    ranks = session.ranks
    if saved_world == ranks.world_size:
        torch.set_rng_state(state["rng_by_rank"][ranks.rank] if ranks.distributed else state["rng"])
        if session.device.type == "cuda" and "cuda_rng" in state and ranks.is_main:
            torch.cuda.set_rng_state(state["cuda_rng"], session.device)
    else:
        # the data order is the same for any world size; only the random streams cannot continue
        torch.manual_seed(rank_seed(config.train.seed, ranks.rank) + loop.update)
        console.print(f"{last_dir}: saved by {saved_world} rank(s), resumed by {ranks.world_size}: "
                      f"same batches from update {loop.update} on, new dropout/sampling draws "
                      f"(the run will not match an uninterrupted one bit for bit)")
    return loop


def check_resume_data(run_dir: Path, data_dir: Path) -> None:
    """Refuse to resume on data other than the run's: every file the run's ``manifest.json`` lists (the data
    directory's, as the run started) must still have its checksum. The same vocabularies over an edited or
    re-prepared corpus (another ``max_len``, a line changed) went on silently, with a manifest that no longer said
    what the run trained on. A run without a manifest (older ones) is not checked."""
    manifest = run_dir / "manifest.json"
    listed = read_json(manifest).get("files", {}) if manifest.is_file() else {}
    for name, digest in sorted(listed.items()) if isinstance(listed, dict) else []:
        path = data_dir / name
        if isinstance(digest, str) and path.is_file() and sha256_file(path) != digest:
            raise CheckpointError(f"{path}: changed since this run started ({manifest} lists another checksum); "
                                  "resume on the data it started with, or start a new run on this data")


def check_resume_config(config: RunConfig, saved: dict[str, Any], last_dir: Path) -> dict[str, list[Any]]:
    """Refuse a change to what the weights depend on; return the other changed keys as {key: [old, new]}."""
    current = to_dict(config)
    previous = to_dict(config_from_dict(saved, str(last_dir / "meta.json")))
    changed: dict[str, list[Any]] = {}
    for section, values in previous.items():
        for key, value in values.items():
            now = current[section].get(key)
            if now == value:
                continue
            if section in FROZEN_SECTIONS:
                raise CheckpointError(
                    f"{last_dir}: {section}.{key} was {value!r} when this run started, "
                    f"now {now!r}; resume with the original value")
            if section == "train" and key in FROZEN_TRAIN_KEYS:
                raise CheckpointError(
                    f"{last_dir}: train.{key} was {value!r} when this run started, now {now!r}; a resumed run goes "
                    "on with its saved optimizer, schedule and batches: resume with the original value, or start a "
                    "new run from its weights (--init-from)")
            changed[f"{section}.{key}"] = [value, now]
    if "train.init_from" in changed:  # a resumed run's weights are its own: the config must not say otherwise
        before, after = changed["train.init_from"]
        raise CheckpointError(f"{last_dir}: train.init_from was {before!r} when this run started, now {after!r}; "
                              "a resumed run continues from its own checkpoint (start a new run to fine-tune)")
    return changed

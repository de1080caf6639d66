"""What a new run directory records before its first update: the model's assets, the full resolved config, the data
manifest, the provenance (code revision, environment, parameter counts, initial tables or checkpoint) and the
metrics log's ``start`` event, so that every run says what it was, whatever happens to it later; and the summary
it ends with (``summary.json``: where it stopped, and why)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from nlgkit.core.config import RunConfig, to_dict
from nlgkit.core.io import atomic_write, write_json
from nlgkit.runs.data import copy_model_assets
from nlgkit.runs.provenance import environment
from nlgkit.train.precision import precision_label
from nlgkit.train.session import LoopState, Session


def write_run_records(config: RunConfig, session: Session, run_dir: Path) -> None:
    """Write ``run_dir``'s records of a new run (rank 0 only).

    A new run may start only where no checkpoint is (:func:`~nlgkit.train.checkpointing.check_run_dir`): what an
    earlier run left there (stopped before it wrote a checkpoint: its log, a half-written temporary checkpoint)
    cannot be resumed and is not this run's, so it goes; its events would otherwise open the new run's log."""
    data = session.data
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    session.log.restart()
    run_dir.mkdir(parents=True, exist_ok=True)
    copy_model_assets(data.data_dir, run_dir / "data")
    write_json(run_dir / "config.json", to_dict(config))
    write_json(run_dir / "manifest.json", data.manifest)
    extra = {**({"embeddings": session.embeddings} if session.embeddings else {}),
             **({"init_from": session.init_from} if session.init_from else {})}
    write_json(run_dir / "provenance.json", {"git": session.git, "env": environment(session.device),
                                             "parameters": session.params, **extra})
    session.log.write("start", parameters=session.params["trainable"],
                      frozen=session.params["frozen"] + session.params["buffers"], device=str(session.device),
                      precision=precision_label(config.train, session.device), task=config.task.type,
                      train_examples=len(data.train), world_size=session.ranks.world_size,
                      **({"init_from": session.init_from["checkpoint"]} if session.init_from else {}))


def write_summary(run_dir: Path, loop: LoopState, session: Session) -> dict[str, Any]:
    """The run's ``summary.json`` as it stops (rank 0 writes it; every rank returns it)."""
    summary = {"run_dir": str(run_dir), "trainable_parameters": session.params["trainable"],
               "metric": session.task.metric, **dataclasses.asdict(loop)}
    if session.ranks.is_main:
        with atomic_write(run_dir / "summary.json") as handle:
            json.dump(summary, handle, indent=2)
    return summary

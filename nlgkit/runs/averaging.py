"""Checkpoint averaging: the element-wise mean of several checkpoints' weights, written as a new run directory.

``nlgkit average RUN --last N | --best N -o RUN_AVG`` averages the run's kept epoch checkpoints
(:mod:`nlgkit.runs.epochs`; Junczys-Dowmunt et al. 2016, Vaswani et al. 2017 average the last few). The new
run directory loads like any other: ``config.json`` (its ``run.dir`` and ``run.name`` say what it is),
``manifest.json`` and ``data/`` copied from the source run, ``checkpoints/best`` and ``checkpoints/last``
with the averaged weights (safetensors; no training state, so it cannot be resumed) and a ``provenance.json``
that keeps the source run's and adds ``averaged_from``: the run, the selection and every checkpoint with its
epoch, validation score and the SHA-256 of its weights. The directory is written whole or not at all.

Floating-point tensors are summed in float64 and stored in their own dtype, so averaging copies of one
checkpoint gives it back exactly; other tensors (counters, integer buffers) must agree and are kept.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from nlgkit.core.config import config_from_dict, to_dict
from nlgkit.core.errors import CheckpointError, DataError
from nlgkit.core.io import atomic_directory, read_json, sha256_file, write_json
from nlgkit.runs.checkpoint import META_FILE, MODEL_FILE, find_checkpoint, load_meta
from nlgkit.runs.epochs import EpochCheckpoint, select_epochs
from nlgkit.runs.loading import load_trained
from nlgkit.runs.provenance import git_revision
from nlgkit.tasks import build_task

# sections the weights depend on: checkpoints that differ in one of them cannot be averaged
MODEL_SECTIONS = ("task", "data", "model", "head")


@dataclasses.dataclass(frozen=True)
class Averaged:
    """What :func:`average_run` wrote: the new run directory and the checkpoints it averaged."""

    run_dir: Path
    sources: list[EpochCheckpoint]


def average_weights(checkpoints: Sequence[Path]) -> dict[str, Tensor]:
    """The element-wise mean of the checkpoints' weights, one file in memory at a time (plus the sum)."""
    if not checkpoints:
        raise CheckpointError("no checkpoints to average")
    total: dict[str, Tensor] = {}
    first: dict[str, Tensor] = {}
    for index, directory in enumerate(checkpoints):
        path = _weights_file(directory)
        try:
            tensors = load_file(str(path))
        except (SafetensorError, OSError) as exc:
            raise CheckpointError(f"{path}: unreadable weights ({exc})") from None
        if index == 0:
            first = tensors
            total = {k: v.double() for k, v in tensors.items() if v.is_floating_point()}
            continue
        _check_same_tensors(first, tensors, path, checkpoints[0])
        for key, value in tensors.items():
            if key in total:
                total[key] += value.double()
            elif not torch.equal(value, first[key]):
                raise CheckpointError(f"{path}: '{key}' ({value.dtype}) differs from {checkpoints[0]}'s and is "
                                      f"not a floating-point tensor that could be averaged")
    n = len(checkpoints)
    return {key: (total[key] / n).to(value.dtype) if key in total else value for key, value in first.items()}


def average_run(run_dir: Path, output: Path, *, last: int = 0, best: int = 0) -> Averaged:
    """Average the ``last`` most recent or ``best`` best epoch checkpoints of ``run_dir`` into ``output``."""
    run_dir, output = Path(run_dir), Path(output)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: run directory not found")
    config = config_from_dict(read_json(run_dir / "config.json"), str(run_dir / "config.json"))
    chosen = select_epochs(run_dir, build_task(config).metric, last=last, best=best)
    selection = f"last {last}" if last else f"best {best}"
    write_averaged_run(run_dir, [c.path for c in chosen], output, selection,
                       epochs=[c.epoch for c in chosen], scores=[c.score for c in chosen])
    return Averaged(output, chosen)


def write_averaged_run(run_dir: Path, checkpoints: Sequence[Path], output: Path, selection: str, *,
                       epochs: Sequence[int | None] = (), scores: Sequence[float | None] = ()) -> Path:
    """Write ``output``: ``run_dir``'s config and assets with the mean of ``checkpoints`` as its weights.

    Refuses an existing ``output`` (never overwrites a run) and checkpoints trained with different model
    sections or vocabularies; the new run is loaded once before it is moved into place."""
    run_dir, output = Path(run_dir), Path(output)
    if output.exists():
        raise DataError(f"{output}: already exists; choose a new directory for the averaged run")
    metas = [load_meta(path) for path in checkpoints]
    _check_compatible(checkpoints, metas)
    weights = average_weights(checkpoints)
    newest = max(range(len(metas)), key=lambda i: metas[i].get("loop", {}).get("update", 0))
    raw = to_dict(config_from_dict(metas[newest]["config"], str(checkpoints[newest] / META_FILE)))
    name = raw["run"].get("name") or run_dir.name
    raw["run"] = {**raw["run"], "dir": str(output), "name": f"{name} (average of {selection} epochs)"}
    sources = [{"checkpoint": str(path), "epoch": epoch, "score": score,
                "sha256": sha256_file(_weights_file(path))}
               for path, epoch, score in zip(checkpoints, _padded(epochs, len(checkpoints)),
                                             _padded(scores, len(checkpoints)))]
    averaged_from = {"run_dir": str(run_dir), "selection": selection, "checkpoints": sources}
    meta = {"config": raw, "vocab_checksums": metas[newest].get("vocab_checksums", {}), "git": git_revision(),
            "loop": metas[newest].get("loop", {}), "metrics": {}, "averaged_from": averaged_from}
    with atomic_directory(output) as tmp:
        if (run_dir / "manifest.json").is_file():
            shutil.copy2(run_dir / "manifest.json", tmp / "manifest.json")
        if (run_dir / "data").is_dir():
            shutil.copytree(run_dir / "data", tmp / "data")
        write_json(tmp / "config.json", raw)
        provenance = read_json(run_dir / "provenance.json") if (run_dir / "provenance.json").is_file() else {}
        write_json(tmp / "provenance.json", {**provenance, "averaged_from": averaged_from})
        for which in ("best", "last"):
            directory = tmp / "checkpoints" / which
            directory.mkdir(parents=True)
            save_file(weights, str(directory / MODEL_FILE), metadata={"format": "nlgkit"})
            write_json(directory / META_FILE, meta)
        load_trained(tmp, "best", "cpu")  # it loads like any run (shapes, vocabularies) before it is visible
    return output


def _weights_file(directory: Path) -> Path:
    found = find_checkpoint(directory)
    if found is None:
        raise CheckpointError(f"{directory}: no checkpoint here ({MODEL_FILE} and {META_FILE} expected)")
    return found / MODEL_FILE


def _check_compatible(checkpoints: Sequence[Path], metas: Sequence[dict[str, Any]]) -> None:
    """Every checkpoint has the first one's model sections and vocabularies (one line naming the difference)."""
    resolved = [to_dict(config_from_dict(meta["config"], str(path / META_FILE)))
                for path, meta in zip(checkpoints, metas)]
    for path, meta, config in zip(checkpoints[1:], metas[1:], resolved[1:]):
        for section in MODEL_SECTIONS:
            if config[section] != resolved[0][section]:
                raise CheckpointError(f"{path}: [{section}] differs from {checkpoints[0]}'s; only checkpoints of "
                                      f"one model can be averaged")
        if meta.get("vocab_checksums") != metas[0].get("vocab_checksums"):
            raise CheckpointError(f"{path}: vocabularies differ from {checkpoints[0]}'s")


def _check_same_tensors(first: dict[str, Tensor], tensors: dict[str, Tensor], path: Path, first_path: Path) -> None:
    if set(first) != set(tensors):
        extra, missing = sorted(set(tensors) - set(first)), sorted(set(first) - set(tensors))
        raise CheckpointError(f"{path}: other weights than {first_path} (extra {extra[:3]}, missing {missing[:3]})")
    for key, value in tensors.items():
        if value.shape != first[key].shape or value.dtype != first[key].dtype:
            raise CheckpointError(f"{path}: '{key}' is {tuple(value.shape)} {value.dtype}, but "
                                  f"{tuple(first[key].shape)} {first[key].dtype} in {first_path}")


def _padded(values: Sequence[Any], n: int) -> list[Any]:
    return list(values) + [None] * (n - len(values))

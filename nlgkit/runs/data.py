"""The data side of a run: locate (or prepare) the data directory and copy what inference needs.

A run copies the small files of its data directory (manifest, vocabularies, subword models) into
``RUN_DIR/data`` so that using the run never depends on the data directory still existing. What is in
the directory and how it is read is the task's business (``nlgkit.tasks``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from nlgkit.core.config import RunConfig
from nlgkit.core.errors import DataError
from nlgkit.tasks import Task

SPLITS = ("train", "valid", "test")


def ensure_data_dir(config: RunConfig, task: Task, log: Any = print) -> Path:
    """``data.dir``, prepared from ``[data.prepare]`` first if it does not exist yet."""
    data_dir = Path(config.data.dir)
    if (data_dir / "manifest.json").is_file():
        return data_dir
    if config.data.prepare.corpus == "none":
        raise DataError(f"{data_dir}: data directory not found (run `nlgkit prepare` first)")
    task.prepare(data_dir, log)
    return data_dir


def is_model_asset(path: Path) -> bool:
    """Files a trained model needs at inference: everything but the split files and references."""
    stem = path.name.split(".")[0]
    return path.is_file() and stem not in SPLITS


def copy_model_assets(data_dir: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(data_dir.iterdir()):
        if is_model_asset(path):
            shutil.copy2(path, target / path.name)

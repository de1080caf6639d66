"""The files of a trained run (or of a CTranslate2 export) that commands read, named so that no command writes its
output over one of them.

``translate -m RUN -o RUN/data/vocab.en.txt`` once replaced the run's vocabulary with its translations, and
``evaluate report RUN --output RUN/test.hyp.en`` its scored test output with the report: each exited 0 and left
the run broken. A command passes these files to :func:`nlgkit.core.io.check_output` beside its other inputs. New
files inside a run stay allowed (``-o RUN/newstest.hyp``, ``--output RUN/report.md``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

#: a run's top-level files besides its folders: config, provenance, summary, manifest (``*.json``), metrics
#: (``*.jsonl``) and the test outputs that reports and records score (``*.hyp.*``)
RUN_TOP_LEVEL = ("*.json", "*.jsonl", "*.hyp.*")


def model_files(model: Path) -> list[Path]:
    """Every file that loading ``model`` may read: a run's checkpoints, its ``data/`` folder (vocabularies,
    tokenizer and subword models) and its top-level records; every file of any other folder given as a model
    (a CTranslate2 export: its weights, token lists and assets)."""
    model = Path(model)
    if not model.is_dir():
        return []
    if not (model / "checkpoints").is_dir():
        return _files_under(model)
    return [*_files_under(model / "checkpoints"), *_files_under(model / "data"),
            *(path for pattern in RUN_TOP_LEVEL for path in sorted(model.glob(pattern)) if path.is_file())]


def models_as_inputs(models: Iterable[Path], option: str = "--model") -> list[tuple[str, Path]]:
    """``(what names it, path)`` for every file of every model, as :func:`~nlgkit.core.io.check_output` takes
    its inputs."""
    return [(f"{option} {model} (one of its files)", path) for model in models for path in model_files(model)]


def _files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else []

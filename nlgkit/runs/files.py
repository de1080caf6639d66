"""The files of a trained run (or of a CTranslate2 export) that commands read, named so that no command writes its
output over one of them.

``translate -m RUN -o RUN/data/vocab.en.txt`` once replaced the run's vocabulary with its translations, and
``evaluate report RUN --output RUN/test.hyp.en`` its scored test output with the report: each exited 0 and left
the run broken. A command passes these files to :func:`nlgkit.core.io.check_output` beside its other inputs. New
files inside a run stay allowed (``-o RUN/newstest.hyp``, ``--output RUN/report.md``), and so does a translation
over one that translating does not read (``-o RUN/test.hyp.en`` again).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

#: a run's top-level files that loading it reads: config, provenance, summary, manifest
MODEL_TOP_LEVEL = ("*.json",)
#: and those that reports and records read besides: metrics and the scored test outputs
RECORD_TOP_LEVEL = ("*.jsonl", "*.hyp.*")


def model_files(model: Path, records: bool = False) -> list[Path]:
    """Every file that loading ``model`` may read: a run's checkpoints, its ``data/`` folder (vocabularies,
    tokenizer and subword models) and its top-level JSON, with ``records`` its metrics and scored test outputs too
    (what ``evaluate report`` reads); every file of any other folder given as a model (a CTranslate2 export: its
    weights, token lists and assets)."""
    model = Path(model)
    if not model.is_dir():
        return []
    if not (model / "checkpoints").is_dir():
        return _files_under(model)
    patterns = MODEL_TOP_LEVEL + (RECORD_TOP_LEVEL if records else ())
    return [*_files_under(model / "checkpoints"), *_files_under(model / "data"),
            *(path for pattern in patterns for path in sorted(model.glob(pattern)) if path.is_file())]


def models_as_inputs(models: Iterable[Path], option: str = "--model", records: bool = False) -> list[tuple[str, Path]]:
    """``(what names it, path)`` for every file of every model (:func:`model_files`), as
    :func:`~nlgkit.core.io.check_output` takes its inputs."""
    return [(f"{option} {model} (one of its files)", path) for model in models
            for path in model_files(model, records)]


def _files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else []

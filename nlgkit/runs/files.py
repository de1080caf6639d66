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
from typing import Any

from nlgkit.core.config import PLUGIN_REGISTRIES
from nlgkit.core.errors import NlgkitError
from nlgkit.core.io import read_json
from nlgkit.wordvectors.tables import vocab_path

#: a run's top-level files that loading it reads: config, provenance, summary, manifest
MODEL_TOP_LEVEL = ("*.json",)
#: and those that reports and records read besides: metrics and the scored test outputs
RECORD_TOP_LEVEL = ("*.jsonl", "*.hyp.*")


def model_files(model: Path, records: bool = False) -> list[Path]:
    """Every file that loading ``model`` may read: a run's checkpoints, its ``data/`` folder (vocabularies,
    tokenizer and subword models) and its top-level JSON, with ``records`` its metrics and scored test outputs too
    (what ``evaluate report`` reads); every file of any other folder given as a model (a checkpoint, a CTranslate2
    export: its weights, token lists and assets); and the files outside it that its checkpoints' plug-ins read
    as they are built (:func:`plugin_inputs`)."""
    return [path for _, path in _named_files(Path(model), records)]


def models_as_inputs(models: Iterable[Path], option: str = "--model", records: bool = False) -> list[tuple[str, Path]]:
    """``(what names it, path)`` for every file of every model (:func:`model_files`), as
    :func:`~nlgkit.core.io.check_output` takes its inputs."""
    return [(f"{option} {model} ({what or 'one of its files'})", path) for model in models
            for what, path in _named_files(Path(model), records)]


def plugin_inputs(config: dict[str, Any]) -> list[tuple[str, Path]]:
    """The files outside a run that the plug-ins of its resolved ``config`` (as saved) read when they are built,
    with the key that names each: every setting of :func:`plugin_input_settings` (a continuous head's ``table``)
    and the files that belong to it (the table's word list), as the config names them."""
    found: list[tuple[str, Path]] = []
    for key, value in plugin_input_settings(config):
        path, *companions = with_companions(Path(value).expanduser())
        found += [(f"its {key}", path), *((f"a file of its {key}", companion) for companion in companions)]
    return found


def plugin_input_settings(config: dict[str, Any]) -> list[tuple[str, str]]:
    """``("section.name", value)`` for every setting that a plug-in of the resolved ``config`` (as saved) declares
    in ``input_files`` and that names a file: the one walk of the registries that both the files a command must not
    overwrite (:func:`plugin_inputs`) and a run record's copies (:mod:`nlgkit.runs.records`) come from. A section
    whose type is not registered names nothing: building it fails, and says so, before anything reads a file."""
    found: list[tuple[str, str]] = []
    for section, registry in PLUGIN_REGISTRIES.items():
        table = config.get(section)
        if not isinstance(table, dict) or not isinstance(table.get("type"), str):
            continue
        try:
            names = registry.config_class(table["type"]).input_files
        except NlgkitError:
            continue
        found += [(f"{section}.{name}", table[name]) for name in names
                  if isinstance(table.get(name), str) and table[name]]
    return found


def with_companions(path: Path) -> list[Path]:
    """A file and the files that belong to it (a word-vector table's word list)."""
    words = vocab_path(path)
    return [path, words] if words.is_file() else [path]


def _named_files(model: Path, records: bool) -> list[tuple[str, Path]]:
    """:func:`model_files`, each named: "" for the model's own files, the config key for one outside it."""
    if not model.is_dir():
        return []
    if not (model / "checkpoints").is_dir():
        files = _files_under(model)
    else:
        patterns = MODEL_TOP_LEVEL + (RECORD_TOP_LEVEL if records else ())
        files = [*_files_under(model / "checkpoints"), *_files_under(model / "data"),
                 *(path for pattern in patterns for path in sorted(model.glob(pattern)) if path.is_file())]
    outside = {path: what for meta in files if meta.name == "meta.json" for what, path in _checkpoint_inputs(meta)}
    return [*(("", path) for path in files), *((what, path) for path, what in outside.items() if path not in files)]


def _checkpoint_inputs(meta: Path) -> list[tuple[str, Path]]:
    """:func:`plugin_inputs` of the config a checkpoint's ``meta.json`` saved; none where it has none (loading
    that checkpoint fails first, naming it)."""
    try:
        saved = read_json(meta)
    except NlgkitError:
        return []
    config = saved.get("config") if isinstance(saved, dict) else None
    return plugin_inputs(config) if isinstance(config, dict) else []


def _files_under(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else []

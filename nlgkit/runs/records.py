"""Run records: a run directory without its weights, small enough to commit beside the table it feeds.

Run directories hold checkpoints (tens of megabytes each) and live outside the work tree, so the runs behind
a committed table can vanish with the machine that trained them. A record keeps everything the reports and
run-log summaries read — resolved config, provenance, ``metrics.jsonl``, checkpoint ``meta.json``, the test
outputs already scored (with the stamp naming what made them), the references they were scored against, the
vocabularies and the training target's word counts — and no weights, so ``--records results/runs`` regenerates a
table, and adds new rows beside old ones, after the run directories are gone. A record cannot translate or
caption: a report that needs outputs it lacks says so. A file outside the run that its config names (a continuous
head's target table) is copied into the record under ``inputs/``, and the record's config names the copy relative
to the record: a record never depends on a file outside the repository.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nlgkit.core.config import RunConfig
from nlgkit.core.errors import DataError, NlgkitError
from nlgkit.core.io import atomic_directory, read_json, sha256_file, write_json
from nlgkit.data.word_counts import training_word_counts, word_counts_name, write_word_counts
from nlgkit.runs.files import plugin_input_settings, with_companions
from nlgkit.runs.outputs import RECORD_FILE, best_meta, is_record, kept_outputs, run_config, saved_config
from nlgkit.tasks import Task, build_task

TOP_LEVEL = ("*.json", "*.jsonl", "*.hyp.*")  # config, provenance, summary, manifest, metrics, outputs, stamps
CHECKPOINTS = ("best", "best.old", "last")  # only their meta.json: progress, best epoch, stop reason
DATA = ("manifest.json", "vocab.*.txt")
# A file the run read from outside its directory (a plug-in config's ``input_files``) is copied under INPUTS_DIR
# (with its checksum in record.json) and the record's config.json names the copy relative to the record, so that a
# record never depends on a file outside the repository (nlgkit.runs.outputs.run_config resolves those paths).
INPUTS_DIR = "inputs"


def archive_run(run_dir: Path, records_dir: Path, *, replace_finished: bool = False) -> Path:
    """Write ``records_dir/<run name>`` from ``run_dir`` (replacing an older record of it, atomically).

    A record of a run trained to its end is not replaced by a run of the same name stopped early (a capped rehearsal
    on another machine, say) unless ``replace_finished``: the finished run's weights are usually gone, so its record
    is all that is left of it."""
    run_dir = Path(run_dir)
    record = Path(records_dir) / run_dir.name
    kept, new = _progress(record), _progress(run_dir)
    if kept.get("finished") and not new.get("finished") and not replace_finished:
        raise DataError(f"{record}: records a run trained to its end ({kept.get('stop_reason') or 'finished'}), which "
                        f"{run_dir} ({new.get('stop_reason') or 'not finished'}) would replace; rename that run, or "
                        "pass --replace")
    config = run_config(run_dir)
    task = build_task(config)
    data_dir = Path(config.data.dir)
    if kept_outputs(run_dir, config, "test", len(task.split_references(_prepared(task, data_dir), "test"))) is None:
        raise DataError(f"{run_dir}: no test outputs of its best checkpoint ({task.outputs_name('test')}); write "
                        "its table first (nlgkit reproduce …), which generates the test split and keeps them")
    copies = [(path, Path(path.name)) for pattern in TOP_LEVEL for path in sorted(run_dir.glob(pattern))]
    copies += [(run_dir / "checkpoints" / name / "meta.json", Path("checkpoints", name, "meta.json"))
               for name in CHECKPOINTS if (run_dir / "checkpoints" / name / "meta.json").is_file()]
    copies += [(path, Path("data", path.name)) for pattern in DATA for path in sorted((run_dir / "data").glob(pattern))]
    copies += [(path, Path("data", path.name)) for path in task.reference_files(data_dir, "test")]
    raw = saved_config(run_dir)
    inputs = _inputs(raw, run_dir)
    copies = [(source, relative) for source, relative in copies if relative != Path("config.json")]
    copies += [(path, Path(INPUTS_DIR, path.name)) for source in inputs.values() for path in with_companions(source)]

    with atomic_directory(record) as tmp:
        for source, relative in copies:
            (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tmp / relative)
        for key, source in inputs.items():  # the record's config names its own copy, relative to the record
            section, name = key.split(".")
            raw[section][name] = str(Path(INPUTS_DIR, source.name))
        write_json(tmp / "config.json", raw)
        files = [Path("config.json"), *(relative for _, relative in copies)]
        counted = _word_counts(config, data_dir)
        if counted is not None:  # what a report binning words by training frequency reads, without the corpus
            write_word_counts(tmp / "data" / word_counts_name(counted), training_word_counts(data_dir, counted))
            files.append(Path("data", word_counts_name(counted)))
        write_json(tmp / RECORD_FILE, {
            "archived_from": str(run_dir.resolve()),
            "files": {str(rel): sha256_file(tmp / rel) for rel in files},
            "inputs": {key: {"archived_from": str(source.resolve()), "sha256": sha256_file(source),
                             "kept": str(Path(INPUTS_DIR, source.name))} for key, source in inputs.items()}})
    return record


def _word_counts(config: RunConfig, data_dir: Path) -> str | None:
    """The target language whose training word counts a record keeps (reports bin words by them, as detokenised
    words whatever the vocabulary): a task whose training targets are a prepared ``train.LANG`` file."""
    lang = getattr(config.data, "tgt_lang", None)
    return str(lang) if lang and (data_dir / f"train.{lang}").is_file() else None


def _progress(run: Path) -> dict[str, Any]:
    """A run's or record's summary.json (progress, whether and why it stopped); {} where there is none."""
    path = run / "summary.json"
    return read_json(path) if path.is_file() else {}


def _inputs(raw: dict[str, Any], run_dir: Path) -> dict[str, Path]:
    """The files outside the run that its plug-ins' configs name (:func:`~nlgkit.runs.files.plugin_input_settings`),
    by config key, which must still exist: a record that named a vanished file could not be read on another
    machine."""
    found = {}
    for key, value in plugin_input_settings(raw):
        path = Path(value).expanduser()
        if not path.is_file():
            raise DataError(f"{run_dir}: {key} = {value!r}: not found; a record keeps a copy of every file its "
                            "run read, so it must exist when the run is archived")
        found[key] = path
    return found


def _prepared(task: Task, data_dir: Path) -> Path:
    """The data directory whose references the run's outputs were scored against, which must be prepared."""
    for path in task.reference_files(data_dir, "test"):
        if not path.is_file():
            raise DataError(f"{path}: not found; a record keeps the references its outputs were scored against, "
                            "so the run's data directory must be prepared")
    return data_dir


def check_record(record: Path) -> None:
    """A record is committed data: a file edited or lost since it was archived would change a table silently."""
    listed = read_json(record / RECORD_FILE).get("files", {})
    for relative, digest in listed.items():
        path = record / relative
        if not path.is_file() or sha256_file(path) != digest:
            raise DataError(f"{path}: {'changed' if path.is_file() else 'missing'} since the run was archived "
                            f"(its checksum is in {record / RECORD_FILE}); archive the run again")


def reading_record(run_dir: str | Path, record: str | Path) -> str:
    """The line a report logs when it reads ``record`` for ``run_dir`` (:func:`with_records`, and reports that
    gather every record, such as Hirasawa & Komachi's): one wording wherever a record stands in for a run."""
    return f"{run_dir}: no trained run directory; reading its record {record}"


def with_records(run_dirs: Sequence[str], records_dir: str | None,
                 log: Callable[[str], None] | None = None) -> list[str]:
    """Each run directory, or its record under ``records_dir`` when the directory has no best checkpoint
    (gone with another machine, or never trained here)."""
    if records_dir is None:
        return list(run_dirs)
    resolved = []
    for run_dir in run_dirs:
        record = Path(records_dir) / Path(run_dir).name
        try:
            best_meta(Path(run_dir))
        except NlgkitError:
            if is_record(record):
                if log:
                    log(reading_record(run_dir, record))
                run_dir = str(record)
        resolved.append(run_dir)
    return resolved

"""Run records: a run directory without its weights, small enough to commit beside the table it feeds.

Run directories hold checkpoints (tens of megabytes each) and live outside the work tree, so the runs behind
a committed table can vanish with the machine that trained them. A record keeps everything the reports and
run-log summaries read — resolved config, provenance, ``metrics.jsonl``, checkpoint ``meta.json``, the test
hypotheses (translation) or captions (captioning) already scored, the references they were scored against and
the vocabularies — and no weights, so ``--records results/runs`` regenerates a table, and adds new rows beside
old ones, after the run directories are gone. A record cannot translate or caption: a report that needs outputs
it lacks says so.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from nlgkit.core.config import RunConfig, config_from_dict
from nlgkit.core.errors import CheckpointError, DataError, NlgkitError
from nlgkit.core.io import atomic_directory, read_json, sha256_file, write_json

RECORD_FILE = "record.json"
TOP_LEVEL = ("*.json", "*.jsonl", "*.hyp.*")  # config, provenance, summary, manifest, metrics, hypotheses
CHECKPOINTS = ("best", "best.old", "last")  # only their meta.json: progress, best epoch, stop reason
DATA = ("manifest.json", "vocab.*.txt")


def best_meta(run_dir: Path) -> Path:
    """``checkpoints/best/meta.json`` (or its ``.old`` twin after a crash mid-swap); one-line errors."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: run directory not found")
    best = run_dir / "checkpoints" / "best"
    for candidate in (best, best.with_name("best.old")):
        if (candidate / "meta.json").is_file():
            return candidate / "meta.json"
    raise CheckpointError(f"{run_dir}: no best checkpoint (checkpoints/best/meta.json); train it first")


def newest_mtime(directory: Path) -> int:
    """When the newest file of a checkpoint directory was written (hypotheses older than it are stale)."""
    return max(path.stat().st_mtime_ns for path in directory.iterdir())


def is_record(run_dir: Path) -> bool:
    return (Path(run_dir) / RECORD_FILE).is_file()


def archive_run(run_dir: Path, records_dir: Path) -> Path:
    """Write ``records_dir/<run name>`` from ``run_dir`` (replacing an older record of it, atomically)."""
    run_dir = Path(run_dir)
    best = best_meta(run_dir).parent
    config_path = run_dir / "config.json"
    config = config_from_dict(read_json(config_path), str(config_path))
    refs = (_captioning_references if config.task.type == "captioning" else _translation_references)(
        run_dir, config, best)
    copies = [(path, Path(path.name)) for pattern in TOP_LEVEL for path in sorted(run_dir.glob(pattern))]
    copies += [(run_dir / "checkpoints" / name / "meta.json", Path("checkpoints", name, "meta.json"))
               for name in CHECKPOINTS if (run_dir / "checkpoints" / name / "meta.json").is_file()]
    copies += [(path, Path("data", path.name)) for pattern in DATA for path in sorted((run_dir / "data").glob(pattern))]
    copies.append((refs, Path("data", refs.name)))

    record = Path(records_dir) / run_dir.name
    with atomic_directory(record) as tmp:
        for source, relative in copies:
            (tmp / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tmp / relative)
        write_json(tmp / RECORD_FILE, {"archived_from": str(run_dir.resolve()),
                                       "files": {str(rel): sha256_file(tmp / rel) for _, rel in copies}})
    return record


def _translation_references(run_dir: Path, config: RunConfig, best: Path) -> Path:
    """The references of the test hypotheses, which must be newer than the best checkpoint."""
    tgt = config.data.tgt_lang
    hyps = run_dir / f"test.hyp.{tgt}"
    if not hyps.is_file() or hyps.stat().st_mtime_ns <= newest_mtime(best):
        raise DataError(f"{run_dir}: no test hypotheses newer than its best checkpoint ({hyps.name}); write its "
                        "table first (python -m nlgkit.experiments.reproduce …), which translates the test split and keeps them")
    return _prepared(Path(config.data.dir) / f"test.ref.{tgt}")


def _captioning_references(run_dir: Path, config: RunConfig, best: Path) -> Path:
    """The test images' records (every reference caption), once the cached test captions are the best
    checkpoint's (their stamp names it; see :func:`nlgkit.evaluate.captioning.caption_split`)."""
    from nlgkit.evaluate.captioning import cached_captions_current

    if not cached_captions_current(run_dir, config, "test"):
        raise DataError(f"{run_dir}: no test captions of its best checkpoint (test.captions.jsonl); write its table "
                        "first (python -m nlgkit.experiments.reproduce table1 …), which captions the test images and keeps them")
    return _prepared(Path(config.data.dir) / "test.jsonl")


def _prepared(refs: Path) -> Path:
    if not refs.is_file():
        raise DataError(f"{refs}: not found; a record keeps the references its outputs were scored against, so "
                        "the run's data directory must be prepared")
    return refs


def check_record(record: Path) -> None:
    """A record is committed data: a file edited or lost since it was archived would change a table silently."""
    listed = read_json(record / RECORD_FILE).get("files", {})
    for relative, digest in listed.items():
        path = record / relative
        if not path.is_file() or sha256_file(path) != digest:
            raise DataError(f"{path}: {'changed' if path.is_file() else 'missing'} since the run was archived "
                            f"(its checksum is in {record / RECORD_FILE}); archive the run again")


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
                    log(f"{run_dir}: no trained run directory; reading its record {record}")
                run_dir = str(record)
        resolved.append(run_dir)
    return resolved

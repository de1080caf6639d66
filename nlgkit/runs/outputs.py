"""A run's kept outputs of a split: which file, and whether it is still the best checkpoint's.

Outputs are expensive (a whole split searched with beam 5 or 10), so a run keeps them beside its checkpoints,
one line per item, in the file its task names (``test.hyp.en``; ``test.beam3.hyp.en`` for a search other than
the recipe's). A stamp beside them (``….json``) names what made them: the best checkpoint (the SHA-256 of its
``meta.json``, so a copy without weights still counts), the search settings and the number of items. Outputs
kept before stamps existed count while they are newer than the best checkpoint; a search setting the stamp lacks
(added to nlgkit after it) counts at its default. The same rule serves every
task, reports, run records and benchmarks; writing new outputs (which needs generation) is
:mod:`nlgkit.evaluate.outputs`.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from nlgkit.core.config import RunConfig, SearchConfig, config_from_dict, from_dict
from nlgkit.core.errors import CheckpointError, ConfigError, DataError
from nlgkit.core.io import atomic_write, read_json, read_lines, write_json
from nlgkit.tasks import build_task

RECORD_FILE = "record.json"  # what marks a run record (a run directory without weights; nlgkit.runs.records)


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


def is_record(run_dir: Path) -> bool:
    return (Path(run_dir) / RECORD_FILE).is_file()


def saved_config(run_dir: Path) -> dict[str, Any]:
    """The resolved recipe a run directory or record saved, as data: its ``config.json``, else the best
    checkpoint's."""
    config_path = Path(run_dir) / "config.json"
    return read_json(config_path) if config_path.is_file() else read_json(best_meta(run_dir))["config"]


def run_config(run_dir: Path, beam: int | None = None) -> RunConfig:
    """The resolved recipe of a run directory or record, with ``beam`` as its search beam when given."""
    raw = saved_config(run_dir)
    if is_record(run_dir):
        raw = _record_inputs(Path(run_dir), raw)
    config = config_from_dict(raw, str(Path(run_dir) / "config.json"))
    if beam is not None and beam != config.search.beam:
        config = replace(config, search=replace(config.search, beam=beam))
    return config


def _record_inputs(record: Path, raw: dict[str, Any]) -> dict[str, Any]:
    """A record's config names the copies it keeps of files outside the run (``inputs`` in its record.json)
    relative to the record; as paths from here, so that they are read wherever the record is."""
    for key in read_json(record / RECORD_FILE).get("inputs", {}):
        section, name = key.split(".")
        value = raw.get(section, {}).get(name)
        if value and not Path(value).is_absolute():
            raw[section][name] = str(record / value)
    return raw


def references_dir(run_dir: Path, config: RunConfig) -> Path:
    """Where a run's references live: its data directory, or the copy a run record keeps."""
    return Path(run_dir) / "data" if is_record(run_dir) else Path(config.data.dir)


def outputs_file(run_dir: Path, config: RunConfig, split: str) -> Path:
    """The file of a split's outputs with ``config``'s search; the name says the beam when it is not the one
    the run's recipe searches with."""
    beam = config.search.beam
    recipe_beam = run_config(run_dir).search.beam
    return Path(run_dir) / build_task(config).outputs_name(split, None if beam == recipe_beam else beam)


def _stamp(run_dir: Path, config: RunConfig, items: int) -> dict[str, Any]:
    meta = best_meta(run_dir)
    return {"checkpoint": hashlib.sha256(meta.read_bytes()).hexdigest(), "search": asdict(config.search),
            "items": items}


def _stamp_is_current(stamp: dict[str, Any], run_dir: Path, config: RunConfig, items: int, where: str) -> bool:
    """The stamp names the best checkpoint, ``config``'s search and ``items``; its search is read as a config, so
    that settings it predates take their defaults (and one it names that nlgkit does not know makes it stale)."""
    now, search = _stamp(run_dir, config, items), stamp.get("search")
    try:
        searched = from_dict(SearchConfig, search, "search", where, saved=True) if isinstance(search, dict) else None
    except ConfigError:
        return False
    return {**stamp, "search": None} == {**now, "search": None} and searched == config.search


def _stamp_file(outputs: Path) -> Path:
    return outputs.with_name(outputs.name + ".json")


def kept_outputs(run_dir: Path, config: RunConfig, split: str, items: int) -> list[str] | None:
    """The kept outputs of ``split`` when they are the best checkpoint's with ``config``'s search (None if
    missing or stale). A record's outputs are always its own: it keeps no weights that could have changed."""
    run_dir = Path(run_dir)
    path = outputs_file(run_dir, config, split)
    if not path.is_file():
        return None
    stamp = _stamp_file(path)
    if is_record(run_dir):
        current = True
    elif stamp.is_file():
        current = _stamp_is_current(read_json(stamp), run_dir, config, items, str(stamp))
    else:  # kept before stamps existed
        best = best_meta(run_dir).parent
        current = path.stat().st_mtime_ns > max(p.stat().st_mtime_ns for p in best.iterdir())
    texts = read_lines(path) if current else None
    if texts is not None and len(texts) != items:
        raise DataError(f"{path}: {len(texts)} lines for a split of {items} items (delete it to generate again)")
    return texts


def keep_outputs(run_dir: Path, config: RunConfig, split: str, texts: list[str]) -> Path:
    """Write a split's outputs and their stamp (atomically, the stamp last)."""
    path = outputs_file(run_dir, config, split)
    with atomic_write(path) as handle:
        handle.writelines(text + "\n" for text in texts)
    write_json(_stamp_file(path), _stamp(run_dir, config, len(texts)))
    return path

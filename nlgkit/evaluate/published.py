"""A published table as data, and its TOML schema (the shipped tables are in :mod:`nlgkit.experiments.papers`).

Numbers typed into code drift and cannot be checked; here every table is a file with its citation, caption,
metrics (and which way each is better) and rows, each row carrying the keys a run is matched on
(``dataset``, ``pair``, ``head``…). A cell the source text does not let us read with certainty is not guessed:
the row lists it under ``unclear = { metric = "why" }`` and it loads as ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nlgkit.core.errors import ConfigError, DataError

PAPER_FIELDS = {"id", "citation", "source", "table", "caption", "keys", "notes"}
METRIC_FIELDS = {"label", "higher_is_better", "nlgkit"}
ROW_EXTRAS = {"unclear", "note"}


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    higher_is_better: bool
    nlgkit: str | None = None  # the nlgkit quantity it compares with ("bleu", "params"…), None if none


@dataclass(frozen=True)
class PaperRow:
    keys: dict[str, Any]
    values: dict[str, float | None]  # None: printed but unreadable (see ``unclear``)
    unclear: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def label(self) -> str:
        return " ".join(str(value) for value in self.keys.values())


@dataclass(frozen=True)
class PaperTable:
    id: str
    citation: str
    source: str
    table: str
    caption: str
    keys: tuple[str, ...]
    metrics: dict[str, Metric]
    rows: tuple[PaperRow, ...]
    notes: tuple[str, ...] = ()

    def match(self, run_keys: dict[str, Any]) -> PaperRow | None:
        """The row whose every key equals the run's (strings compared case-insensitively); None if none."""
        for row in self.rows:
            if all(_same(value, run_keys.get(key)) for key, value in row.keys.items()):
                return row
        return None

    def find(self, **keys: Any) -> PaperRow:
        """The row with these key values; a DataError naming the table if there is none."""
        row = self.match(keys)
        if row is None:
            raise DataError(f"{self.id}: no row with {keys}")
        return row


def _same(paper: Any, run: Any) -> bool:
    if isinstance(paper, str) and isinstance(run, str):
        return paper.lower() == run.lower()
    return run is not None and not isinstance(run, bool) and paper == run


def parse_table(data: dict[str, Any], source: str) -> PaperTable:
    """Check the documented schema (see the module docstring) and build a :class:`PaperTable`."""
    paper = _table(data, "paper", source)
    _only(paper, PAPER_FIELDS, "[paper]", source)
    for name in PAPER_FIELDS - {"notes"}:
        if name not in paper:
            raise ConfigError(f"{source}: [paper] needs '{name}'")
    keys = tuple(paper["keys"])
    metrics = {}
    for name, spec in _table(data, "metrics", source).items():
        _only(spec, METRIC_FIELDS, f"[metrics.{name}]", source)
        if not isinstance(spec.get("higher_is_better"), bool) or not isinstance(spec.get("label"), str):
            raise ConfigError(f"{source}: [metrics.{name}] needs label (string) and higher_is_better (bool)")
        metrics[name] = Metric(name, spec["label"], spec["higher_is_better"], spec.get("nlgkit"))
    rows = []
    for number, raw in enumerate(data.get("rows", []), start=1):
        rows.append(_row(raw, keys, metrics, f"{source}: row {number}"))
    seen = set()
    for row in rows:
        key = tuple(row.keys.values())
        if key in seen:
            raise ConfigError(f"{source}: two rows with keys {row.keys}")
        seen.add(key)
    extra = set(data) - {"paper", "metrics", "rows"}
    if extra:
        raise ConfigError(f"{source}: unknown top-level key(s) {sorted(extra)}")
    return PaperTable(
        paper["id"],
        paper["citation"],
        paper["source"],
        paper["table"],
        paper["caption"],
        keys,
        metrics,
        tuple(rows),
        tuple(paper.get("notes", ())),
    )


def _row(raw: dict[str, Any], keys: tuple[str, ...], metrics: dict[str, Metric], where: str) -> PaperRow:
    _only(raw, set(keys) | set(metrics) | ROW_EXTRAS, "", where)
    missing = [key for key in keys if key not in raw]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {missing}")
    unclear = dict(raw.get("unclear", {}))
    values: dict[str, float | None] = {}
    for name in metrics:
        if name in unclear:
            if name in raw:
                raise ConfigError(f"{where}: {name} is both given and listed as unclear")
            values[name] = None
        elif name in raw:
            if isinstance(raw[name], bool) or not isinstance(raw[name], (int, float)):
                raise ConfigError(f"{where}: {name} = {raw[name]!r} is not a number")
            values[name] = raw[name]
    unknown = set(unclear) - set(metrics)
    if unknown:
        raise ConfigError(f"{where}: unclear lists unknown metric(s) {sorted(unknown)}")
    return PaperRow({key: raw[key] for key in keys}, values, unclear, raw.get("note", ""))


def _table(data: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{name}] table missing")
    return value


def _only(table: dict[str, Any], allowed: set[str], where: str, source: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{source}: {where + ' ' if where else ''}unknown field(s) {unknown}")

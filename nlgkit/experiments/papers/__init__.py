"""The papers' published tables, one TOML file per table shipped inside the package.

Their schema and the comparison with runs are general (:mod:`nlgkit.evaluate.published`,
:mod:`nlgkit.evaluate.report`); which tables exist is the business of the reproductions.
"""

from __future__ import annotations

import tomllib
from importlib import resources

from nlgkit.core.errors import ConfigError
from nlgkit.evaluate.published import PaperTable, parse_table


def available_tables() -> list[str]:
    """Ids of the shipped tables (file names without ``.toml``)."""
    folder = resources.files(__name__)
    return sorted(entry.name[: -len(".toml")] for entry in folder.iterdir() if entry.name.endswith(".toml"))


def load_table(table_id: str) -> PaperTable:
    """Load and check one shipped table; an unknown id is an error listing the available ones."""
    names = available_tables()
    if table_id not in names:
        raise ConfigError(f"unknown paper table {table_id!r} (available: {', '.join(names)})")
    text = resources.files(__name__).joinpath(f"{table_id}.toml").read_text(encoding="utf-8")
    return parse_table(tomllib.loads(text), f"{table_id}.toml")

"""Recipe files and ``--set`` overrides: TOML text → the data :mod:`nlgkit.core.config` validates.

A recipe is a TOML file; each ``--set section.key=value`` replaces one key (its value read as TOML, else as a bare
string) before validation, and an error that a ``--set`` caused names it, not only the file.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

from nlgkit.core.config import RunConfig, from_dict, validate
from nlgkit.core.errors import ConfigError


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``section.key=value``; the value is read as TOML, or as a bare string if it is not TOML."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str = "the recipe") -> dict[str, Any]:
    """Return a copy of ``data`` (read from ``source``) with each ``section.key=value`` override applied."""
    data = copy.deepcopy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for depth, part in enumerate(path[:-1], start=1):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {text!r}: {'.'.join(path[:depth])} = {child!r} in {source}, not a table")
            node = child
        node[path[-1]] = value
    return data


def load_toml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: a directory, not a recipe")
    if not path.is_file():
        raise ConfigError(f"{path}: recipe not found")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Read a recipe file, apply ``--set`` overrides and validate the result."""
    data = apply_overrides(load_toml(path), overrides or [], str(path))
    try:
        config = from_dict(RunConfig, data, "", str(path))
        validate(config, str(path))
    except ConfigError as exc:  # a key the file does not hold, or holds otherwise: say which --set put it there
        blamed = [text for text in overrides or [] if _names(str(exc), parse_override(text)[0])]
        if blamed:
            raise ConfigError(str(exc).replace(f"{path}: ", f"{path} with --set {blamed[-1]}: ", 1)) from None
        raise
    return config


def _names(message: str, key: list[str]) -> bool:
    """Whether an error message names the dotted ``key`` or one of the tables above it."""
    return any(f"'{name}'" in message or f" {name} = " in message
               for name in (".".join(key[:i]) for i in range(1, len(key) + 1)))

"""Small explicit registries: a name → (component class, config class) map per plug-in kind.

Components register themselves with a decorator in their own module; the package ``__init__`` imports
each module by name, so the set of plug-ins is visible in one place and nothing is discovered by magic.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from nlgkit.core.errors import ConfigError

C = TypeVar("C")


@dataclass(frozen=True)
class PluginConfig:
    """Base of every plug-in config: the ``type`` key selects the registered component."""

    type: str = ""

    if TYPE_CHECKING:  # a RunConfig's model / head / task is a registered subclass, its fields known at run time

        def __getattr__(self, name: str) -> Any: ...


class Registry(Generic[C]):
    """Maps a plug-in name to its component class and its frozen config dataclass."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, tuple[type[C], type[PluginConfig]]] = {}

    def register(self, name: str, config_class: type[PluginConfig]) -> Callable[[type[C]], type[C]]:
        def decorator(component: type[C]) -> type[C]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._entries[name] = (component, config_class)
            return component

        return decorator

    def names(self) -> list[str]:
        return sorted(self._entries)

    def _entry(self, name: str, where: str) -> tuple[type[C], type[PluginConfig]]:
        if name not in self._entries:
            hint = difflib.get_close_matches(name, self.names(), n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(
                f"{where}: unknown {self.kind} {name!r}{extra}; choose one of: {', '.join(self.names())}"
            )
        return self._entries[name]

    def config_class(self, name: str, where: str = "type") -> type[PluginConfig]:
        return self._entry(name, where)[1]

    def component(self, name: str, where: str = "type") -> type[C]:
        return self._entry(name, where)[0]

    def build(self, config: PluginConfig, **context: Any) -> C:
        """Instantiate the component for ``config`` via its ``from_config(config, **context)``."""
        component = self.component(config.type)
        return component.from_config(config, **context)  # type: ignore[attr-defined]

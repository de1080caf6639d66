"""The leaf registries of plug-ins: a name → (component class, config class) map per kind.

Heads, models and tasks register themselves here with a decorator in their own module, so nothing below them
(the config parser above all) ever imports a concrete plug-in. Which modules hold the built-in plug-ins is
declared once, as Python entry points in ``pyproject.toml`` (groups ``nlgkit.tasks``, ``nlgkit.models``,
``nlgkit.heads``); a registry imports them the first time it is asked for a name. A plug-in outside the
package (a test's task, a user's head) registers by being imported, or by an entry point of its own package.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from nlgkit.core.errors import ConfigError

C = TypeVar("C")


@dataclass(frozen=True)
class PluginConfig:
    """Base of every plug-in config: the ``type`` key selects the registered component."""

    type: str = ""
    #: settings that name a file the run reads from outside its directory (a run record keeps a copy of each)
    input_files: ClassVar[tuple[str, ...]] = ()
    #: settings that shape training alone, not the function the trained weights compute (dropout, the weights of
    #: auxiliary losses): a run that starts from another's weights (train.init_from) may change them
    training_only: ClassVar[tuple[str, ...]] = ("dropout", "attention_dropout")

    if TYPE_CHECKING:  # a RunConfig's model / head / task is a registered subclass, its fields known at run time

        def __getattr__(self, name: str) -> Any: ...


class Registry(Generic[C]):
    """Maps a plug-in name to its component class and its frozen config dataclass."""

    def __init__(self, kind: str, group: str = "") -> None:
        self.kind = kind
        self.group = group  # entry-point group of the installed plug-ins ("" = registered by imports alone)
        self._entries: dict[str, tuple[type[C], type[PluginConfig]]] = {}
        self._default = ""
        self._installed_loaded = False

    def register(self, name: str, config_class: type[PluginConfig],
                 default: bool = False) -> Callable[[type[C]], type[C]]:
        """Decorator: register ``component`` as ``name``; ``default`` marks the choice of a recipe that omits
        the section (recipes written before the section existed)."""

        def decorator(component: type[C]) -> type[C]:
            if name in self._entries and self._entries[name][0] is not component:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._entries[name] = (component, config_class)
            if default:
                self._default = name
            return component

        return decorator

    def _load_installed(self) -> None:
        """Import every plug-in module declared under this registry's entry-point group (once)."""
        if self._installed_loaded or not self.group:
            return
        self._installed_loaded = True
        for point in entry_points(group=self.group):
            point.load()

    def _load_named(self, name: str) -> None:
        """Import the plug-in module whose entry point is called ``name``, and no other: loading a run then
        imports its own model, head and task, not every installed one (a captioner's vision stack for a
        translation). An entry point may register other names than its own; those are found by loading all."""
        if name in self._entries or self._installed_loaded or not self.group:
            return
        for point in entry_points(group=self.group, name=name):
            point.load()

    def names(self) -> list[str]:
        self._load_installed()
        return sorted(self._entries)

    def default(self) -> str:
        """The name a recipe without this section gets."""
        self._load_installed()
        return self._default

    def _entry(self, name: str, where: str) -> tuple[type[C], type[PluginConfig]]:
        self._load_named(name)
        if name not in self._entries:
            self._load_installed()
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


# One registry per plug-in kind. The component types are left open here (the protocols live above, in their
# own packages: nlgkit.tasks.base.Task, nlgkit.models.base.Generator, nlgkit.heads.base.OutputHead).
TASKS: Registry[Any] = Registry("task", "nlgkit.tasks")
MODELS: Registry[Any] = Registry("model", "nlgkit.models")
HEADS: Registry[Any] = Registry("head", "nlgkit.heads")

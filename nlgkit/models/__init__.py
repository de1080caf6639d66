"""Generator models: one protocol (``base.Generator``: encode / step / reorder / forward), one file per model.

Each model module registers itself in ``nlgkit.core.registry.MODELS``; the built-in ones are listed as entry
points in ``pyproject.toml`` and imported when a config first asks for a model.
"""

from nlgkit.core.registry import MODELS
from nlgkit.models.base import Generator, State

__all__ = ["MODELS", "Generator", "State"]

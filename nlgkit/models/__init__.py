"""Generator models. Each module registers one architecture in ``MODELS``."""

from nlgkit.models.base import Generator, State
from nlgkit.registry import Registry

MODELS: Registry[Generator] = Registry("model")

from nlgkit.models import rnn as _rnn  # noqa: F401

__all__ = ["MODELS", "Generator", "State"]

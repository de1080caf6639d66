"""Generator models. Each module registers one architecture in ``MODELS``."""

from nlgkit.models.base import Generator, State
from nlgkit.core.registry import Registry

MODELS: Registry[Generator] = Registry("model")

# Plain imports, one per model: each module registers itself in MODELS.
from nlgkit.models import lstm_luong as _lstm_luong  # noqa: F401
from nlgkit.models import rnn as _rnn  # noqa: F401
from nlgkit.models import show_attend_tell as _show_attend_tell  # noqa: F401
from nlgkit.models import show_tell as _show_tell  # noqa: F401
from nlgkit.models import transformer as _transformer  # noqa: F401

__all__ = ["MODELS", "Generator", "State"]

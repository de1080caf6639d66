"""Loading ``torch.save`` files without ever unpickling code, and with a one-line refusal.

torch's weights-only unpickler prints a warning about a foreign file's pickle protocol before it refuses the
file, and its error advises ``weights_only=False``, which would run whatever code the file holds. A refused
file therefore gets the caller's one line alone; a file that loads passes on whatever torch had to say.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def load_weights_only(path: Path, refused: Callable[[str], Exception]) -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU; a file it refuses raises ``refused(reason)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a corrupt or foreign file
            raise refused(type(exc).__name__) from None
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return state

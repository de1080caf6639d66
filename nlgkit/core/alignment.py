"""The decoder-state entry through which a model says where in its source each step looked.

Replacing unknown words (``translate --replace-unk``) needs, for every output token, the source position the
decoder attended to most. Models and the search are independent layers, so they meet here: the search asks by
putting an empty ``ALIGNMENT`` entry (B, 0) into the encoded state; a model whose decoder attends to source
positions sees it and writes each step's attention weights (B, S) there (:func:`report`); a model that does not
leaves the empty entry, and the search says so. Nobody pays for weights that no one asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from torch import Tensor

ALIGNMENT = "alignment"


def requested(state: Mapping[str, Tensor]) -> bool:
    """Whether the search asked this state's steps for their source attention."""
    return ALIGNMENT in state


def report(new_state: MutableMapping[str, Tensor], old_state: Mapping[str, Tensor], weights: Tensor) -> None:
    """Put one step's attention over source positions (B, S) into ``new_state`` when ``old_state`` asked for it."""
    if ALIGNMENT in old_state:
        new_state[ALIGNMENT] = weights

"""PNG output shared by the analyses: matplotlib's object API (no pyplot state) and atomic writes.

``Figure`` renders through the Agg canvas without selecting a global backend, so plotting is safe inside
a CLI, a test run or a thread; the bytes go to a temporary sibling renamed into place, so an error while
drawing never leaves a truncated PNG.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nlgkit.core.io import atomic_write, check_output

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def save_png(figure: Figure, path: Path) -> None:
    """Write ``figure`` as PNG to ``path`` atomically."""
    check_output(path)
    with atomic_write(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=120, bbox_inches="tight")

"""PNG output shared by the analyses: matplotlib's object API (no pyplot state) and atomic writes.

``Figure`` renders through the Agg canvas without selecting a global backend, so plotting is safe inside
a CLI, a test run or a thread; the bytes go to a temporary sibling renamed into place, so an error while
drawing never leaves a truncated PNG.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nlgkit.core.errors import DataError
from nlgkit.core.io import atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def check_output_path(path: Path) -> None:
    """Fail before any work when ``path`` cannot be written as a file (a directory, a file as parent)."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: is a directory, expected a PNG file name")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise DataError(f"{path}: {parent} is not a directory")
            break


def save_png(figure: Figure, path: Path) -> None:
    """Write ``figure`` as PNG to ``path`` atomically."""
    check_output_path(path)
    with atomic_write(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=120, bbox_inches="tight")

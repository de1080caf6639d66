"""Which nlgkit this is: the package version and, when it runs from a git checkout, the revision.

Runs record the revision (``provenance.json``, checkpoints) and ``nlgkit --version`` prints it, so a figure
can be traced to the code that produced it. Plain ``subprocess`` calls: nothing heavy is imported, so
``--version`` answers as fast as ``--help``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import nlgkit

PACKAGE_ROOT = Path(nlgkit.__file__).resolve().parents[1]  # the checkout's root when run from a checkout


def git_revision(cwd: Path | None = None) -> dict[str, Any]:
    """Commit hash and whether the working tree had uncommitted changes (None outside a checkout)."""
    root = cwd or PACKAGE_ROOT
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def version_line(root: Path | None = None) -> str:
    """``nlgkit 0.1.0`` and, from a checkout (``root`` holds ``.git``), ``(git 1234567890, uncommitted changes)``.

    The ``.git`` check keeps an installed copy (site-packages inside some other repository, such as a virtual
    environment in a checkout) from reporting a revision that is not its own.
    """
    root = root or PACKAGE_ROOT
    line = f"nlgkit {nlgkit.__version__}"
    if not (root / ".git").exists():
        return line
    git = git_revision(root)
    if not git["commit"]:
        return line
    return f"{line} (git {git['commit'][:10]}{', uncommitted changes' if git['dirty'] else ''})"

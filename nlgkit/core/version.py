"""Which nlgkit this is: the package version and, when it runs from a git checkout, the revision.

Runs record the revision (``provenance.json``, checkpoints) and ``nlgkit --version`` prints it, so a figure
can be traced to the code that produced it. Plain ``subprocess`` calls: nothing heavy is imported, so
``--version`` answers as fast as ``--help``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import nlgkit

PACKAGE_ROOT = Path(nlgkit.__file__).resolve().parents[1]  # the checkout's root when run from a checkout


def git_revision(cwd: Path | None = None, *, tree: bool = True) -> dict[str, Any]:
    """Commit hash, whether tracked files had uncommitted changes, and the git tree of the tracked files as they were.

    ``tree`` names the code that ran even when the commit does not: a copy whose ``.git`` lags its files (a working
    tree sent to another machine) records the old commit as dirty, and its tree equals ``git rev-parse C^{tree}`` of
    the commit C that holds those files. None values outside a checkout. ``tree=False`` skips it (``--version``:
    fast, and no objects written).
    """
    root = cwd or PACKAGE_ROOT
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no") != ""
        if not tree:
            return {"commit": commit, "dirty": dirty}
        tree_hash = _working_tree(root) if dirty else _git(root, "rev-parse", "HEAD^{tree}")
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None, "tree": None}
    return {"commit": commit, "dirty": dirty, "tree": tree_hash}


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=True,
                          env=env).stdout.strip()


def _working_tree(root: Path) -> str:
    """The tree hash of HEAD with the tracked files' current contents, through a scratch index: the checkout's own
    index, refs and files stay untouched (only blob objects are added to its object store)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(root, "read-tree", "HEAD", env=env)
        _git(root, "add", "--update", "--", ":/", env=env)
        return _git(root, "write-tree", env=env)


def version_line(root: Path | None = None) -> str:
    """``nlgkit 0.1.0`` and, from a checkout (``root`` holds ``.git``), ``(git 1234567890, uncommitted changes)``.

    The ``.git`` check keeps an installed copy (site-packages inside some other repository, such as a virtual
    environment in a checkout) from reporting a revision that is not its own.
    """
    root = root or PACKAGE_ROOT
    line = f"nlgkit {nlgkit.__version__}"
    if not (root / ".git").exists():
        return line
    git = git_revision(root, tree=False)
    if not git["commit"]:
        return line
    return f"{line} (git {git['commit'][:10]}{', uncommitted changes' if git['dirty'] else ''})"

"""The CLI starts at once: no torch, scipy, matplotlib or spaCy import until a command needs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "scipy", "matplotlib", "spacy")
COMMANDS = [[], ["prepare"], ["prepare", "multi30k"], ["prepare", "flickr8k"], ["bpe"], ["embed"],
            ["embed", "random"], ["train"], ["translate"], ["caption"], ["evaluate"], ["evaluate", "norms"],
            ["evaluate", "report"], ["reproduce"], ["bench"]]


def imported_after_help(argv: list[str]) -> list[str]:
    code = (
        "import sys, json\n"
        "from nlgkit.cli.main import main\n"
        "try:\n"
        f"    main({argv + ['--help']!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Usage" in out.stdout, out.stdout[-500:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a) or "nlgkit")
def test_help_imports_no_heavy_library(argv: list[str]) -> None:
    assert imported_after_help(argv) == []


def test_loading_the_heads_imports_no_scipy() -> None:
    """Every run loads every registered head and model; only the vMF loss and score need scipy's Bessel functions."""
    code = ("import sys; from nlgkit.core.registry import HEADS, MODELS; "
            "assert 'continuous' in HEADS.names() and MODELS.names(); print('scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_translation_scoring_imports_no_pycocoevalcap() -> None:
    """A translation run loads every task's module (the registry's default) and scores BLEU each epoch, and Tables
    2-4 are built from its runs; none of it needs pycocoevalcap (101 MB of jars), so a machine reached by copying the work tree trains without it. Caption
    scores still load it when asked."""
    code = ("import sys; from nlgkit.core.registry import TASKS; from nlgkit.metrics.corpus import score_all; "
            "import nlgkit.experiments.shalev; "  # Tables 2-4's commands
            "assert 'captioning' in TASKS.names(); "
            "assert score_all(['a small dog runs'], [['a small dog runs']], ['bleu', 'chrf'])['bleu']['score'] > 99; "
            "print('pycocoevalcap' in sys.modules); "
            "score_all(['a dog'], [['a dog']], ['caption']); print('pycocoevalcap' in sys.modules)")
    # (no java on PATH: the caption scores import pycocoevalcap all the same, without 15 s of PTB and METEOR jars)
    without_java = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=without_java)
    assert out.stdout.split() == ["False", "True"]

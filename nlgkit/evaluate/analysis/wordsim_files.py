"""Where the word-similarity benchmarks live (no torch import: the CLI's help text needs these)."""

from __future__ import annotations

from pathlib import Path

BENCHMARKS: dict[str, str] = {
    "simlex999": "EN-SIMLEX-999.txt",
    "men": "EN-MEN-TR-3k.txt",
    "mturk771": "EN-MTurk-771.txt",
}
DEFAULT_DIR = Path("..") / "shared" / "data" / "wordsim"  # relative to the working directory

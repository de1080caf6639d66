"""Shared fixtures: the real data beside the checkout, and small slices of it."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MULTI30K = SHARED / "data" / "multi30k"


@pytest.fixture(scope="session")
def multi30k_source() -> Path:
    """The verbatim Multi30K files (task1/raw/*.gz) shipped beside the checkout."""
    if not (MULTI30K / "task1" / "raw" / "train.de.gz").is_file():
        pytest.skip(f"{MULTI30K} not available")
    return MULTI30K


@pytest.fixture(scope="session")
def paper(tmp_path_factory: pytest.TempPathFactory, multi30k_source: Path) -> tuple[Path, dict]:
    """Multi30K DE-EN in the paper's setting (raw files, spaCy, lowercase, min-freq 2), prepared once."""
    from nlgkit.data.prepare import prepare_multi30k

    out = tmp_path_factory.mktemp("paper") / "multi30k_de-en"
    return out, prepare_multi30k(out, "de", "en", source=str(multi30k_source))

"""Shalev et al.'s Table 3: every row's exact parameter counts, from the recipes alone (no data, no weights)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.experiments.papers import load_table
from nlgkit.experiments.table3 import ROWS, build_table3, table3_rows, verdict

ROOT = Path(__file__).resolve().parents[1]

# learned, fixed, tied. Multi30K equals the paper. IWSLT: the Multi30K body (7,351,296, worked out layer by layer
# in ../shared/papers/README.md) + 256 · (13,355 + 11,560) embeddings = 13,729,536 fixed; learned adds 513 · |V|.
EXPECTED = {
    "MSCOCO Show-and-Tell": (12_877_586, 8_018_706, 8_018_706),
    "MSCOCO Show-Attend-Tell": (20_483_859, 15_624_979, 15_624_979),
    "Multi30K DE-EN": (13_893_381, 10_870_272, 11_007_237),
    "Multi30K EN-DE": (14_898_861, 10_870_272, 11_009_197),
    "IWSLT 2014 DE-EN": (7_351_296 + 256 * 24_915 + 513 * 11_560, 7_351_296 + 256 * 24_915, 13_872_168),
    "IWSLT 2014 EN-DE": (7_351_296 + 256 * 24_915 + 513 * 13_355, 7_351_296 + 256 * 24_915, 13_873_963),
    "WMT-14 EN-DE": (36_267_520, 28_043_520, 28_075_520),
}


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    return {result["row"].label: result for result in table3_rows(load_table("shalev2020_table3"))}


def test_every_row_is_counted_exactly(rows: dict[str, dict]) -> None:
    assert list(rows) == [row.label for row in ROWS] and len(ROWS) == 7
    for label, (learned, fixed, tied) in EXPECTED.items():
        assert rows[label]["counts"] == {"learned": learned, "fixed": fixed, "tied": tied}, label


def test_heads_differ_as_in_the_paper(rows: dict[str, dict]) -> None:
    """learned − fixed is (d + 1)·|V| for the MT rows (fixed bias) and d·|V| for captioning, as in the paper."""
    for label, result in rows.items():
        ours = result["counts"]["learned"] - result["counts"]["fixed"]
        assert ours == result["paper"]["learned"] - result["paper"]["fixed"], label
    assert rows["IWSLT 2014 DE-EN"]["paper"]["learned"] - rows["IWSLT 2014 DE-EN"]["paper"]["fixed"] == 513 * 11_560
    assert rows["WMT-14 EN-DE"]["paper"]["fixed"] % 16 == 8  # no width that is a multiple of 16 reaches it


def test_verdicts(rows: dict[str, dict]) -> None:
    assert [rows[label]["verdict"] for label in EXPECTED] == [
        "no: 5,123,585 below in both rows", "no: 4,858,880 below in both rows", "yes", "yes",
        "no: 577,976 below in both rows", "no: 577,976 below in both rows", "no: 312 below in both rows"]
    assert verdict({"learned": 5, "fixed": 3}, {"learned": 4, "fixed": 2}) == "no: 1 above in both rows"
    assert verdict({"learned": 5, "fixed": 3}, {"learned": 4, "fixed": 3}) == "no"


def test_cli_writes_the_committed_table(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["reproduce", "table3", "--output", str(tmp_path / "table3.md")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "table3.md").read_text(encoding="utf-8")
    assert text == build_table3()
    assert "| IWSLT 2014 EN-DE | 11,560 → 13,355 | 20,580,651 | 21,158,627 | 13,729,536 | 14,307,512 |" in text
    assert text == (ROOT / "results" / "table3.md").read_text(encoding="utf-8"), "run `make reproduce-table3`"

"""``caption``'s inputs as other programs write them: a list saved with a byte-order mark (Windows Notepad), a link
that leads nowhere, a prefix file with bytes that are not UTF-8. Each is named for what it is, and a warning is
not an error."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nlgkit.cli.main import app

LEGACY = Path(__file__).resolve().parent / "fixtures" / "legacy_94a9d5b"  # a tiny trained captioning run
IMAGES = Path(__file__).resolve().parents[2] / "shared" / "data" / "flickr8k-1k" / "images"


@pytest.fixture()
def pictures() -> list[Path]:
    found = [IMAGES / name for name in (LEGACY / "images.txt").read_text().split()[:2]]
    if not all(path.is_file() for path in found):
        pytest.skip(f"{IMAGES} not available")
    return found


def caption(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["caption", "--model", str(LEGACY / "captioning"), "--device", "cpu", *args])


def test_a_list_with_a_byte_order_mark_captions_its_first_image(tmp_path: Path, pictures: list[Path]) -> None:
    """The mark once joined the first path ("\ufeffa.jpg: file not found")."""
    listing = tmp_path / "list.txt"
    listing.write_bytes(codecs.BOM_UTF8 + "".join(f"{path}\n" for path in pictures).encode())
    marked, plain = caption("--list", str(listing)), caption(*map(str, pictures))
    assert marked.exit_code == 0, marked.output
    assert marked.stdout == plain.stdout and len(marked.stdout.splitlines()) == 2


def test_a_link_to_nothing_is_named_as_one(tmp_path: Path, pictures: list[Path]) -> None:
    (tmp_path / "loop1.jpg").symlink_to(tmp_path / "loop2.jpg")
    (tmp_path / "loop2.jpg").symlink_to(tmp_path / "loop1.jpg")
    (tmp_path / "gone.jpg").symlink_to(tmp_path / "missing.jpg")
    result = caption(str(pictures[0]), str(tmp_path / "loop1.jpg"), str(tmp_path / "gone.jpg"))
    assert result.exit_code == 1 and result.stdout.splitlines()[1:] == ["", ""]
    for name in ("loop1.jpg", "gone.jpg"):  # (was: "file not found")
        assert f"error: {tmp_path / name}: a link to nothing (its target is missing, or the links loop)" in \
            result.stderr


def test_undecodable_bytes_in_a_prefix_file_are_a_warning_not_an_error(tmp_path: Path,
                                                                       pictures: list[Path]) -> None:
    """Replaced by U+FFFD and said as a warning, as translate says it; the command ends well (it said "error:" and
    exited 0)."""
    prefixes = tmp_path / "prefixes.txt"
    prefixes.write_bytes(b"a \xff\n\n")
    result = caption(*map(str, pictures), "--target-prefix", str(prefixes))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"warning: {prefixes}: line 1: invalid UTF-8 replaced by U+FFFD"]
    assert len(result.stdout.splitlines()) == 2

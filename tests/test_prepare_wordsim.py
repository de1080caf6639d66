"""``nlgkit prepare wordsim``: the word-similarity benchmarks copied from a folder or downloaded from a local server
(as from the public repository), line ends made Unix, every file checked before any is written; the analyses then
find them in data/wordsim."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from archive_server import serve
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.data.wordsim import BENCHMARKS, PUBLISHED_PAIRS, _shared_copy, default_dir

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "wordsim"


def cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def stand_ins(folder: Path, line_end: str = "\r\n") -> dict[str, str]:
    """Three small benchmark files with the published names (CRLF, as the repository has them); their text."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = {}
    for number, file in enumerate(BENCHMARKS.values()):
        texts[file] = f"old\tnew\t{number}.5{line_end}smart\tintelligent\t9.2{line_end}"
        (folder / file).write_bytes(texts[file].encode("utf-8"))
    return texts


def test_the_shared_copy_is_copied_byte_for_byte(tmp_path: Path) -> None:
    if not all((SHARED / file).is_file() for file in BENCHMARKS.values()):
        pytest.skip(f"{SHARED} not available")
    result = cli("prepare", "wordsim", "--source", str(SHARED), "--out", str(tmp_path / "wordsim"))
    assert result.exit_code == 0, result.output
    for file in BENCHMARKS.values():
        assert (tmp_path / "wordsim" / file).read_bytes() == (SHARED / file).read_bytes()
    manifest = json.loads((tmp_path / "wordsim" / "manifest.json").read_text())
    assert {name: entry["pairs"] for name, entry in manifest["files"].items()} == PUBLISHED_PAIRS
    assert "3,000" in result.stdout


def test_a_download_is_checked_and_written_with_unix_line_ends(tmp_path: Path) -> None:
    texts = stand_ins(tmp_path / "served")
    with serve(tmp_path / "served") as server:
        result = cli("prepare", "wordsim", "--source", server.base, "--out", str(tmp_path / "wordsim"))
    assert result.exit_code == 0, result.output
    assert sorted(path for path, _ in server.requests) == sorted(f"/{file}" for file in BENCHMARKS.values())
    for file, text in texts.items():
        assert (tmp_path / "wordsim" / file).read_text() == text.replace("\r\n", "\n")
    # two pairs are not the published file: said, not refused
    assert "EN-SIMLEX-999.txt: 2 pairs, not the published file's 999" in result.stderr


def test_a_broken_or_missing_file_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    stand_ins(tmp_path / "served")
    (tmp_path / "served" / BENCHMARKS["mturk771"]).write_text("<html>rate limited</html>\n")
    with serve(tmp_path / "served") as server:
        result = cli("prepare", "wordsim", "--source", server.base, "--out", str(tmp_path / "wordsim"))
        assert result.exit_code != 0
        assert result.output.splitlines()[-1] == (f"error: {server.base}EN-MTurk-771.txt: line 1: expected "
                                                  f"'word1<TAB>word2<TAB>score', got '<html>rate limited</html>'")
        assert [path.name for path in tmp_path.iterdir()] == ["served"]  # no folder, not even a temporary one
        (tmp_path / "served" / BENCHMARKS["men"]).unlink()
        result = cli("prepare", "wordsim", "--source", server.base, "--out", str(tmp_path / "wordsim"))
        assert result.exit_code != 0 and "EN-MEN-TR-3k.txt: HTTP 404" in result.output
    result = cli("prepare", "wordsim", "--source", str(tmp_path / "served"), "--out", str(tmp_path / "wordsim"))
    assert result.exit_code != 0
    assert result.output == (f"error: {tmp_path / 'served'}: no EN-MEN-TR-3k.txt here (a source folder holds the "
                             f"3 files of mfaruqui/eval-word-vectors' data/word-sim)\n")
    result = cli("prepare", "wordsim", "--source", str(tmp_path / "nowhere"))
    assert result.output == (f"error: {tmp_path / 'nowhere'}: word-similarity source folder not found (give a folder "
                             f"or an http(s) URL)\n")
    (tmp_path / "served" / BENCHMARKS["men"]).write_text("a\tb\t1\n")
    result = cli("prepare", "wordsim", "--source", str(tmp_path / "served"), "--out", str(tmp_path / "served"))
    assert result.exit_code != 0 and "not empty and has no manifest.json; refusing to overwrite it" in result.output
    (tmp_path / "file").touch()
    with serve(tmp_path / "served") as server:  # refused before any download
        result = cli("prepare", "wordsim", "--source", server.base, "--out", str(tmp_path / "file"))
    assert result.exit_code != 0 and server.requests == []
    assert result.output == f"error: {tmp_path / 'file'}: exists and is not a directory\n"


def test_a_new_download_replaces_the_folder_only_once_every_file_parsed(tmp_path: Path) -> None:
    texts = stand_ins(tmp_path / "served")
    out = tmp_path / "wordsim"
    assert cli("prepare", "wordsim", "--source", str(tmp_path / "served"), "--out", str(out)).exit_code == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    (tmp_path / "served" / BENCHMARKS["mturk771"]).write_bytes(b"\xff\xfe broken\n")
    with serve(tmp_path / "served") as server:
        result = cli("prepare", "wordsim", "--source", server.base, "--out", str(out))
    assert result.exit_code != 0
    assert result.output.splitlines()[-1].startswith(f"error: {server.base}EN-MTurk-771.txt: line 1: not valid UTF-8")
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before  # the old folder, whole
    assert len(before) == len(texts) + 1  # (and its manifest)


def test_the_analyses_read_what_prepare_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --data-dir the analyses read data/wordsim once it holds every file; when nothing holds them, the
    error says how to get them."""
    monkeypatch.chdir(tmp_path)
    stand_ins(tmp_path / "elsewhere", "\n")
    assert cli("prepare", "wordsim", "--source", str(tmp_path / "elsewhere")).exit_code == 0
    assert default_dir() == Path("data") / "wordsim"
    assert (tmp_path / "data" / "wordsim" / "manifest.json").is_file()
    os.remove(tmp_path / "data" / "wordsim" / BENCHMARKS["men"])
    if _shared_copy() is not None:  # incomplete: the shared copy instead
        assert default_dir() == _shared_copy()
    monkeypatch.setattr("nlgkit.data.wordsim._shared_copy", lambda: None)
    assert default_dir() == Path("data") / "wordsim"
    result = cli("evaluate", "wordsim", str(tmp_path / "no_run"))
    assert result.exit_code != 0
    assert "`nlgkit prepare wordsim` writes it to data/wordsim; --data-dir DIR names another folder" in result.output

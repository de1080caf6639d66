"""``nlgkit prepare iwslt14`` against a small archive of the real layout, served from 127.0.0.1.

The stand-in is built so that every expectation can be counted by hand: which lines are metadata, which pairs
the 20-token limit drops, which words reach the minimum count of 5.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from archive_server import serve, write_tgz
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.data.iwslt14 import prepare_iwslt14, train_lines, xml_segments
from nlgkit.data.vocab import Vocabulary

METADATA = {
    "de": ['<url>http://www.ted.com/talks/lang/de/x.html</url>', "<keywords>talks, Technik</keywords>",
           "<speaker>Jane Doe</speaker>", "<talkid>1</talkid>", "<title>Jane Doe: Ein Titel</title>",
           "<description>TED Talk Subtitles and Transcript: Beschreibung</description>",
           '<reviewer href="http://www.ted.com/r">R</reviewer>', '<translator href="http://t">T</translator>'],
    "en": ['<url>http://www.ted.com/talks/x.html</url>', "<keywords>talks, technology</keywords>",
           "<speaker>Jane Doe</speaker>", "<talkid>1</talkid>", "<title>Jane Doe: A title</title>",
           "<description>TED Talk Subtitles and Transcript: A description</description>",
           '<reviewer href="http://www.ted.com/r">R</reviewer>', '<translator href="http://t">T</translator>'],
}
# (German, English, copies): 5 × pair A reach min-freq 5; pair B's words stay at 4 (except "." and "the");
# the 20-token pair is kept, the 21-token one and the empty one are dropped.
PAIRS = [("Das Haus ist klein.", "The house is small.", 5), ("Der Hund bellt.", "The dog barks.", 4),
         (" ".join(["ja"] * 20), " ".join(["yes"] * 20), 1),
         (" ".join(["Haus"] * 21), " ".join(["house"] * 21), 1), ("", "", 1)]
SEGMENTS = {  # set → [(German, English)], the XML entities decoded
    "IWSLT14.TED.dev2010": [("Guten Morgen & willkommen.", 'Good morning & "welcome".'), ("Danke.", "Thanks.")],
    "IWSLT14.TED.tst2010": [("Eins.", "One.")],
    "IWSLT14.TED.tst2011": [("Zwei.", "Two."), (" ".join(["sehr"] * 25), " ".join(["very"] * 25))],
    "IWSLT14.TED.tst2012": [("Drei.", "Three.")],
    "IWSLT14.TEDX.dev2012": [("Vier.", "Four.")],
}


def xml(name: str, lang: str, segments: list[str]) -> str:
    escaped = [s.replace("&", "&amp;").replace('"', "&quot;") for s in segments]
    kind = "srcset" if lang == "de" else "refset"
    half = len(escaped) // 2 + 1  # two documents, segment ids restarting in each
    docs = [escaped[:half], escaped[half:]]
    body = "".join(f'<doc docid="{d}" genre="lectures">\n<url>http://www.ted.com/</url>\n<talkid>{d}</talkid>\n'
                   f"<title>Titel {d}</title>\n"
                   + "".join(f'<seg id="{i}"> {text} </seg>\n' for i, text in enumerate(doc, start=1))
                   + "</doc>\n" for d, doc in enumerate(docs) if doc)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n<{kind} setid="{name}" srclang="german">\n'
            f"{body}</{kind}>\n</mteval>\n")


def archive_files(drop_segment: str = "") -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {}
    for index, lang in enumerate(("de", "en")):
        lines = METADATA[lang] + [pair[index] for pair in PAIRS for _ in range(pair[2])] + METADATA[lang][:2]
        files[f"de-en/train.tags.de-en.{lang}"] = "\n".join(lines) + "\n"
        for name, pairs in SEGMENTS.items():
            segments = [pair[index] for pair in pairs]
            if name == drop_segment and lang == "en":
                segments = segments[:-1]
            files[f"de-en/{name}.de-en.{lang}.xml"] = xml(name, lang, segments)
    files["de-en/README"] = "IWSLT 2014 stand-in\n"
    return files


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("iwslt_mirror")
    write_tgz(root / "de-en.tgz", archive_files())
    return root


@pytest.fixture(scope="module")
def prepared(mirror: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list]:
    """de-en in the paper's setting, downloaded from the local server (with its request log)."""
    tmp = tmp_path_factory.mktemp("iwslt")
    with serve(mirror) as server:
        manifest = prepare_iwslt14(tmp / "out", "de", "en", mirror=server.base, cache_dir=tmp / "downloads")
    return tmp, manifest, server.requests


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_train_is_stripped_filtered_and_counted(prepared: tuple[Path, dict, list]) -> None:
    tmp, manifest, requests = prepared
    out = tmp / "out"
    assert requests == [("/de-en.tgz", None)]
    assert (tmp / "downloads" / "de-en.tgz").is_file() and not list((tmp / "downloads").glob("*.part"))
    assert lines(out / "train.de") == ["das haus ist klein ."] * 5 + ["der hund bellt ."] * 4 + [" ".join(["ja"] * 20)]
    assert lines(out / "train.en") == ["the house is small ."] * 5 + ["the dog barks ."] * 4 + [" ".join(["yes"] * 20)]
    assert manifest["lines"] == {"train": 10, "valid": 2, "test": 4} and manifest["train_dropped"] == 2
    assert manifest["min_freq"] == 5 and manifest["max_len"] == 20 and manifest["tokenizer"] == "spacy"
    de = Vocabulary.load(out / "vocab.de.txt")
    en = Vocabulary.load(out / "vocab.en.txt")
    # words of the dropped 21-token pair are not counted ("haus" stays at 5); 4 occurrences are not enough
    assert list(zip(de.tokens, de.counts))[4:] == [("ja", 20), (".", 9), ("das", 5), ("haus", 5), ("ist", 5),
                                                   ("klein", 5)]
    assert list(zip(en.tokens, en.counts))[4:] == [("yes", 20), (".", 9), ("the", 9), ("house", 5), ("is", 5),
                                                   ("small", 5)]
    assert manifest["vocab_size"] == {"de": 10, "en": 10}
    text = (out / "train.de").read_text(encoding="utf-8") + (out / "train.en").read_text(encoding="utf-8")
    assert "<" not in text and "subtitles" not in text and "jane" not in text


def test_valid_and_test_come_from_the_xml_sets(prepared: tuple[Path, dict, list]) -> None:
    tmp, manifest, _ = prepared
    out = tmp / "out"
    assert lines(out / "valid.ref.en") == ['good morning & "welcome".', "thanks."]
    assert lines(out / "valid.en") == ['good morning & " welcome " .', "thanks ."]
    assert lines(out / "test.ref.de") == ["eins.", "zwei.", " ".join(["sehr"] * 25), "drei."]  # not length-filtered
    assert lines(out / "test.en")[2] == " ".join(["very"] * 25)
    assert manifest["iwslt14"]["valid"] == ["IWSLT14.TED.dev2010"]
    assert manifest["iwslt14"]["test"] == ["IWSLT14.TED.tst2010", "IWSLT14.TED.tst2011", "IWSLT14.TED.tst2012"]
    assert manifest["inputs"]["train.de"]["path"].endswith("de-en.tgz#train.tags.de-en.de")
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8")) == manifest


def test_parsers_on_their_own() -> None:
    raw = "\n".join(METADATA["en"] + ["Hello.", "", "  <b>kept</b>  "]).encode()
    assert train_lines(raw, "t") == ["Hello.", "", "<b>kept</b>"]
    segments = xml_segments(xml("s", "en", ["a & b", "c", "d"]).encode(), "s.xml")
    assert segments == [(("0", "1"), "a & b"), (("0", "2"), "c"), (("1", "1"), "d")]
    with pytest.raises(DataError, match=r"bad\.xml: not valid XML"):
        xml_segments(b"<mteval><seg id='1'>a & b</seg></mteval>", "bad.xml")


def test_en_de_other_sets_and_a_local_mirror(mirror: Path, tmp_path: Path) -> None:
    manifest = prepare_iwslt14(tmp_path / "out", "en", "de", mirror=str(mirror), cache_dir=tmp_path / "dl",
                               tokenizer="none", lowercase=False, min_freq=1, max_len=0,
                               valid_sets=["IWSLT14.TEDX.dev2012"], test_sets=["IWSLT14.TED.tst2010"])
    assert not (tmp_path / "dl").exists()  # a directory mirror is read in place
    assert manifest["src_lang"] == "en" and manifest["lines"] == {"train": 11, "valid": 1, "test": 1}
    assert lines(tmp_path / "out" / "valid.de") == ["Vier."]
    assert manifest["train_dropped"] == 1  # only the empty pair without a length limit


def test_resumes_a_partial_download(mirror: Path, tmp_path: Path) -> None:
    data = (mirror / "de-en.tgz").read_bytes()
    (tmp_path / "dl").mkdir()
    (tmp_path / "dl" / "de-en.tgz.part").write_bytes(data[:1000])
    with serve(mirror) as server:
        prepare_iwslt14(tmp_path / "out", mirror=server.base, cache_dir=tmp_path / "dl", tokenizer="none")
    assert server.requests == [("/de-en.tgz", "bytes=1000-")] and server.sent == len(data) - 1000
    assert (tmp_path / "dl" / "de-en.tgz").read_bytes() == data
    # a server that cannot resume sends everything again, which replaces the partial file
    (tmp_path / "dl2").mkdir()
    (tmp_path / "dl2" / "de-en.tgz.part").write_bytes(b"x" * 1000)
    with serve(mirror, ranges=False) as server:
        prepare_iwslt14(tmp_path / "out2", mirror=server.base, cache_dir=tmp_path / "dl2", tokenizer="none")
    assert server.sent == len(data) and (tmp_path / "dl2" / "de-en.tgz").read_bytes() == data
    # a partial file longer than the archive: the server refuses the range (416), the download starts again
    (tmp_path / "dl3").mkdir()
    (tmp_path / "dl3" / "de-en.tgz.part").write_bytes(data + b"extra")
    with serve(mirror) as server:
        prepare_iwslt14(tmp_path / "out3", mirror=server.base, cache_dir=tmp_path / "dl3", tokenizer="none")
    assert [r for _, r in server.requests] == [f"bytes={len(data) + 5}-", None]
    assert (tmp_path / "dl3" / "de-en.tgz").read_bytes() == data


def test_errors(mirror: Path, tmp_path: Path) -> None:
    with serve(tmp_path) as server, pytest.raises(DataError, match=r"/de-en\.tgz: HTTP 404"):
        prepare_iwslt14(tmp_path / "out", mirror=server.base, cache_dir=tmp_path / "dl")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "de-en.tgz").write_bytes((mirror / "de-en.tgz").read_bytes()[:-100])  # truncated
    with serve(broken) as server, pytest.raises(DataError, match="not a complete .tgz archive"):
        prepare_iwslt14(tmp_path / "out", mirror=server.base, cache_dir=tmp_path / "dl")
    assert not list((tmp_path / "dl").iterdir())  # neither the archive nor a partial file is kept
    misaligned = tmp_path / "misaligned"
    write_tgz(misaligned / "de-en.tgz", archive_files(drop_segment="IWSLT14.TED.tst2011"))
    with pytest.raises(DataError, match="tst2011: the German and English segments do not pair up"):
        prepare_iwslt14(tmp_path / "out", mirror=str(misaligned), tokenizer="none")
    with pytest.raises(DataError, match="has no file IWSLT14.TED.tst2099.de-en.de.xml"):
        prepare_iwslt14(tmp_path / "out", mirror=str(mirror), tokenizer="none", test_sets=["IWSLT14.TED.tst2099"])
    with pytest.raises(ConfigError, match="German–English"):
        prepare_iwslt14(tmp_path / "out", "de", "fr", mirror=str(mirror))
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_line_break_inside_a_segment_keeps_the_references_aligned(tmp_path: Path) -> None:
    """An XML segment is one sentence wherever its text breaks lines: its BLEU reference stays one line."""
    files = archive_files()
    for lang, segments in (("de", ["Guten\nMorgen ,\r\n  willkommen.", "Danke."]),
                           ("en", ["Good\nmorning,\r\n  welcome.", "Thanks."])):
        files[f"de-en/IWSLT14.TED.dev2010.de-en.{lang}.xml"] = xml("IWSLT14.TED.dev2010", lang, segments)
    write_tgz(tmp_path / "mirror" / "de-en.tgz", files)
    manifest = prepare_iwslt14(tmp_path / "out", mirror=str(tmp_path / "mirror"), tokenizer="none")
    assert manifest["lines"]["valid"] == 2
    assert lines(tmp_path / "out" / "valid.ref.en") == ["good morning, welcome.", "thanks."]
    assert lines(tmp_path / "out" / "valid.ref.de") == ["guten morgen , willkommen.", "danke."]
    assert lines(tmp_path / "out" / "valid.en") == ["good morning, welcome.", "thanks."]


def test_cli(mirror: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    with serve(mirror) as server:
        result = runner.invoke(app, ["prepare", "iwslt14", "--pair", "en-de", "--mirror", server.base,
                                     "--downloads", str(tmp_path / "dl"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "iwslt14 en-de" in result.stdout and "vocab de" in result.stdout
    bad = runner.invoke(app, ["prepare", "iwslt14", "--mirror", str(tmp_path / "nowhere"), "--out",
                              str(tmp_path / "out2")])
    assert bad.exit_code == 2
    nowhere = tmp_path / "nowhere"
    assert bad.stderr.strip().splitlines() == [
        f"error: {nowhere / 'de-en.tgz'}: archive not found in the mirror directory {nowhere}"]

"""``nlgkit prepare wmt14`` against five small archives of WMT's layout, served from 127.0.0.1.

The sentences are real (slices of Multi30K's raw files); a few crafted pairs check the filters, and the BPE
size is small so that the merges are learned in a fraction of a second.
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest
from archive_server import serve, write_tgz
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.data.download import raw_name
from nlgkit.data.subword import BpeSegmenter
from nlgkit.data.tokenize import TextPipeline, load_pipeline
from nlgkit.data.vocab import Vocabulary
from nlgkit.data.wmt14 import keep_pair, prepare_wmt14, sgm_segments

MERGES = 100
LONG = " ".join(["word"] * 45)  # over the test's max_len of 40 pieces
CRAFTED = [("", ""), (LONG, LONG), ("one two three four five six seven eight", "eins")]


def raw_lines(source: Path, split: str, lang: str, start: int, count: int) -> list[str]:
    with gzip.open(source / "task1" / "raw" / raw_name(split, lang), "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle][start:start + count]


def sgm(lines: list[str], kind: str, lang: str) -> str:
    segs = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, start=1))
    return (f'<{kind} setid="newstest2014" srclang="any" trglang="{lang}">\n<doc sysid="ref" docid="d1" '
            f'origlang="en">\n{segs}</doc>\n</{kind}>\n')


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory, multi30k_source: Path) -> tuple[Path, dict]:
    """The five archives, and the text that went into them."""
    root = tmp_path_factory.mktemp("wmt_mirror")
    text = {lang: raw_lines(multi30k_source, "train", lang, 0, 180) for lang in ("en", "de")}
    corpora = {"europarl": ("training-parallel-europarl-v7.tgz", "training/europarl-v7.de-en"),
               "commoncrawl": ("training-parallel-commoncrawl.tgz", "commoncrawl.de-en"),
               "news-commentary": ("training-parallel-nc-v9.tgz", "training/news-commentary-v9.de-en")}
    train: dict[str, list[str]] = {"en": [], "de": []}
    for index, (archive, prefix) in enumerate(corpora.values()):
        files: dict[str, str | bytes] = {}
        for lang, pos in (("en", 0), ("de", 1)):
            lines = text[lang][60 * index:60 * (index + 1)] + [pair[pos] for pair in CRAFTED[index:index + 1]]
            train[lang] += lines
            files[f"{prefix}.{lang}"] = "\n".join(lines) + "\n"
        files[f"{prefix.replace('de-en', 'fr-en')}.fr"] = "Une autre langue.\n"  # other pairs of the archive
        if index == 1:  # one line of Common Crawl that is not UTF-8 (kept, its bad byte replaced)
            files[f"{prefix}.en"] = str(files[f"{prefix}.en"]).encode() + b"Kaffee\xe9\n"
            files[f"{prefix}.de"] = str(files[f"{prefix}.de"]) + "Kaffee\n"
            train["en"].append("Kaffee\ufffd")
            train["de"].append("Kaffee")
        write_tgz(root / archive, files)
    valid = {lang: raw_lines(multi30k_source, "valid", lang, 0, 20) for lang in ("en", "de")}
    write_tgz(root / "dev.tgz", {f"dev/newstest2013.{lang}": "\n".join(valid[lang]) + "\n" for lang in valid}
              | {"dev/newstest2013-src.en.sgm": "<srcset/>", "dev/newstest2012.en": "other\n"})
    test = {lang: raw_lines(multi30k_source, "test", lang, 0, 15) for lang in ("en", "de")}
    write_tgz(root / "test-full.tgz", {
        "test-full/newstest2014-deen-src.en.sgm": sgm(test["en"], "srcset", "en"),
        "test-full/newstest2014-deen-ref.de.sgm": sgm(test["de"], "refset", "de"),
        "test-full/newstest2014-deen-src.de.sgm": sgm(["nicht diese"] * 15, "srcset", "de"),
        "test-full/newstest2014-deen-ref.en.sgm": sgm(["not these"] * 15, "refset", "en"),
    })
    return root, {"train": train, "valid": valid, "test": test}


@pytest.fixture(scope="module")
def prepared(stand_in: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, list]:
    tmp = tmp_path_factory.mktemp("wmt")
    with serve(stand_in[0]) as server:
        manifest = prepare_wmt14(tmp / "out", mirror=server.base, cache_dir=tmp / "dl", bpe=MERGES, max_len=40)
    return tmp / "out", manifest, sorted(path for path, _ in server.requests)


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_downloads_every_archive(prepared: tuple[Path, dict, list]) -> None:
    out, manifest, requests = prepared
    assert requests == ["/dev.tgz", "/test-full.tgz", "/training-parallel-commoncrawl.tgz",
                        "/training-parallel-europarl-v7.tgz", "/training-parallel-nc-v9.tgz"]
    assert set(manifest["inputs"]) == {"europarl", "commoncrawl", "news-commentary", "dev", "test"}
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["bpe.joint.codes", "manifest.json", "vocab.en.txt", "vocab.de.txt"]
        + [f"{split}.{lang}" for split in ("train", "valid", "test") for lang in ("en", "de")]
        + [f"{split}.ref.{lang}" for split in ("valid", "test") for lang in ("en", "de")])  # no scratch left


def test_bpe_size_is_the_parameter(prepared: tuple[Path, dict, list]) -> None:
    out, manifest, _ = prepared
    codes = lines(out / "bpe.joint.codes")
    assert codes[0].startswith("#version") and len(codes) == 1 + MERGES
    assert manifest["subword"] == f"bpe-joint:{MERGES}" and manifest["tokenizer"] == "moses"
    assert not manifest["lowercase"] and manifest["joint_vocab"]


def test_train_is_tokenised_segmented_and_filtered(prepared: tuple[Path, dict, list], stand_in: tuple[Path, dict]
                                                   ) -> None:
    out, manifest, _ = prepared
    raw = stand_in[1]["train"]
    assert manifest["wmt14"]["train_raw"] == {"europarl-v7.de-en": 61, "commoncrawl.de-en": 62,
                                              "news-commentary-v9.de-en": 61}
    assert manifest["wmt14"]["invalid_utf8_lines"] == 1
    segmenter = BpeSegmenter(out / "bpe.joint.codes")
    moses = {lang: TextPipeline(lang, "moses", lowercase=False) for lang in ("en", "de")}
    expected = {"en": [], "de": []}  # worked out independently: tokenise, segment, apply the three filters
    for en, de in zip(raw["en"], raw["de"], strict=True):
        pieces = {lang: segmenter.segment(moses[lang].tokenize(text)) for lang, text in (("en", en), ("de", de))}
        if keep_pair(len(pieces["en"]), len(pieces["de"]), 40, 1.5):
            for lang, line in pieces.items():
                expected[lang].append(" ".join(line))
    assert lines(out / "train.en") == expected["en"] and lines(out / "train.de") == expected["de"]
    assert manifest["lines"]["train"] == len(expected["en"]) == len(raw["en"]) - manifest["train_dropped"]
    assert manifest["train_dropped"] >= len(CRAFTED)
    written = set(lines(out / "train.en"))
    assert "word word" not in " ".join(written) and not any(line.startswith("one two three") for line in written)
    assert "Kaffee \ufffd" in {line.replace("@@ ", "") for line in written}
    assert any("@@" in line for line in written)
    assert keep_pair(3, 2, 40, 1.5) and not keep_pair(4, 2, 40, 1.5) and not keep_pair(0, 1, 0, 0)
    assert keep_pair(41, 41, 0, 1.5) and not keep_pair(41, 41, 40, 0)


def test_joint_vocabulary_counts_both_sides(prepared: tuple[Path, dict, list]) -> None:
    out, manifest, _ = prepared
    assert (out / "vocab.en.txt").read_bytes() == (out / "vocab.de.txt").read_bytes()
    vocab = Vocabulary.load(out / "vocab.en.txt")
    counts = Counter(piece for lang in ("en", "de") for line in lines(out / f"train.{lang}") for piece in line.split())
    assert dict(zip(vocab.tokens[4:], vocab.counts[4:], strict=True)) == counts
    assert manifest["vocab_size"] == {"en": len(vocab), "de": len(vocab)}


def test_valid_and_test(prepared: tuple[Path, dict, list], stand_in: tuple[Path, dict]) -> None:
    out, manifest, _ = prepared
    data = stand_in[1]
    assert manifest["lines"]["valid"] == 20 and manifest["lines"]["test"] == 15
    for split in ("valid", "test"):
        for lang in ("en", "de"):
            assert lines(out / f"{split}.ref.{lang}") == [line.strip() for line in data[split][lang]]
            pipeline = load_pipeline(out, lang)  # what translate will use on new input
            assert lines(out / f"{split}.{lang}") == [" ".join(pipeline.encode(x)) for x in data[split][lang]]
    assert sgm_segments(b'<seg id="1">  a   b </seg>\n<p>\n', "x") == ["a b"]


def test_workers_and_direction_do_not_change_the_data(prepared: tuple[Path, dict, list], stand_in: tuple[Path, dict],
                                                      tmp_path: Path) -> None:
    _, manifest, _ = prepared
    other = prepare_wmt14(tmp_path / "out", "de", "en", mirror=str(stand_in[0]), cache_dir=tmp_path / "dl",
                          bpe=MERGES, max_len=40, workers=2)
    assert other["files"] == manifest["files"]
    assert other["src_lang"] == "de" and not (tmp_path / "dl").exists()


def test_errors(stand_in: tuple[Path, dict], tmp_path: Path) -> None:
    with serve(tmp_path) as server, pytest.raises(DataError, match=r"training-parallel-europarl-v7\.tgz: HTTP 404"):
        prepare_wmt14(tmp_path / "out", mirror=server.base, cache_dir=tmp_path / "dl")
    broken = tmp_path / "broken"
    for archive in stand_in[0].iterdir():
        (broken / archive.name).parent.mkdir(exist_ok=True)
        (broken / archive.name).write_bytes(archive.read_bytes())
    write_tgz(broken / "training-parallel-nc-v9.tgz", {"training/news-commentary-v9.de-en.en": "a\nb\n",
                                                       "training/news-commentary-v9.de-en.de": "a\n"})
    with pytest.raises(DataError, match=r"news-commentary-v9\.de-en: the \.en side has more lines"):
        prepare_wmt14(tmp_path / "out", mirror=str(broken), bpe=10)
    with pytest.raises(ConfigError, match="bpe = 0"):
        prepare_wmt14(tmp_path / "out", mirror=str(broken), bpe=0)
    with pytest.raises(ConfigError, match="English–German"):
        prepare_wmt14(tmp_path / "out", "en", "fr", mirror=str(broken))
    assert not (tmp_path / "out").exists()


def test_cli(stand_in: tuple[Path, dict], tmp_path: Path) -> None:
    runner = CliRunner()
    with serve(stand_in[0]) as server:
        result = runner.invoke(app, ["prepare", "wmt14", "--mirror", server.base, "--bpe", "20",
                                     "--downloads", str(tmp_path / "dl"), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "wmt14 en-de" in result.stdout and len(lines(tmp_path / "out" / "bpe.joint.codes")) == 21
    bad = runner.invoke(app, ["prepare", "wmt14", "--pair", "en", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and bad.stderr.strip().splitlines() == [
        "error: --pair 'en': expected SRC-TGT, e.g. de-en"]

"""``nlgkit prepare wmt14`` against five small archives of WMT's layout, served from 127.0.0.1.

The sentences are real (slices of Multi30K's raw files); a few crafted pairs check the filters, and the BPE
size is small so that the merges are learned in a fraction of a second.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
from archive_server import serve, write_tgz
from helpers import model_for
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.config import config_from_dict, to_dict
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import write_json
from nlgkit.data.download import raw_name
from nlgkit.data.prepare import prepare_parallel
from nlgkit.data.subword import BpeSegmenter
from nlgkit.data.tokenize import TextPipeline, load_pipeline
from nlgkit.data.vocab import Vocabulary
from nlgkit.data.wmt14 import keep_pair, prepare_wmt14, sgm_segments
from nlgkit.data.word_counts import check_side_counts
from nlgkit.experiments.shalev_vectors import analyse_run
from nlgkit.runs.checkpoint import save_checkpoint
from nlgkit.runs.data import copy_model_assets

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


def side_counts(out: Path, lang: str) -> Counter[str]:
    """Each piece's count in one side's training file, worked out from the file itself."""
    return Counter(piece for line in lines(out / f"train.{lang}") for piece in line.split())


def test_joint_vocabulary_is_saved_once_per_side_with_that_sides_counts(prepared: tuple[Path, dict, list]) -> None:
    out, manifest, _ = prepared
    vocabs = {lang: Vocabulary.load(out / f"vocab.{lang}.txt") for lang in ("en", "de")}
    assert vocabs["en"].tokens == vocabs["de"].tokens  # one joint list: the same ids on both sides
    counts = {lang: side_counts(out, lang) for lang in ("en", "de")}
    both = counts["en"] + counts["de"]
    assert set(vocabs["en"].tokens[4:]) == set(both)
    assert vocabs["en"].tokens[4:] == sorted(both, key=lambda piece: (-both[piece], piece))  # ids by both sides
    for lang, vocab in vocabs.items():
        assert dict(zip(vocab.tokens[4:], vocab.counts[4:], strict=True)) == {
            piece: counts[lang][piece] for piece in both}  # 0 for a piece only the other side has
        assert 0 in vocab.counts[4:]
    assert manifest["vocab_size"] == {"en": len(vocabs["en"]), "de": len(vocabs["de"])}
    assert manifest["joint_vocab"] and manifest["vocab_counts"] == "per language"


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


# -- frequency analyses of a run on the joint vocabulary ------------------------------------------------------


@pytest.fixture(scope="module")
def wmt_run(prepared: tuple[Path, dict, list], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An (untrained) en-de run on the prepared stand-in, its data copied as training copies it. The norm of a
    word's target vector falls as its German training count grows, that of its source vector as its English one
    does: ranked by the right side's counts, each ρ is exactly -1."""
    out = prepared[0]
    root = tmp_path_factory.mktemp("wmt_run") / "run"
    config = config_from_dict({
        "data": {"dir": str(out), "src_lang": "en", "tgt_lang": "de"},
        "model": {"type": "rnn", "embedding_dim": 8, "encoder_dim": 10, "decoder_dim": 12, "attention_dim": 7,
                  "pre_output_dim": 9},
        "head": {"type": "learned"}})
    copy_model_assets(out, root / "data")
    vocabs = {lang: Vocabulary.load(root / "data" / f"vocab.{lang}.txt") for lang in ("en", "de")}
    model = model_for(config, vocabs["en"], vocabs["de"])
    with torch.no_grad():
        for weight, lang in ((model.head.weight, "de"), (model.src_embed.weight, "en")):
            counts = side_counts(out, lang)
            weight.zero_()
            weight[:, 0] = 1.0 / (1.0 + torch.tensor([counts[piece] for piece in vocabs[lang].tokens]))
    meta = {"config": to_dict(config), "vocab_checksums": {lang: vocab.checksum() for lang, vocab in vocabs.items()}}
    save_checkpoint(root / "checkpoints" / "best", model, meta)
    return root


def analyse(*args: str | Path) -> dict:
    result = CliRunner().invoke(app, ["evaluate", *(str(arg) for arg in args), "--device", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_frequency_analyses_of_a_joint_vocabulary_count_the_target_side(prepared: tuple[Path, dict, list],
                                                                        wmt_run: Path) -> None:
    out = prepared[0]
    counts = {lang: side_counts(out, lang) for lang in ("en", "de")}
    sets = analyse("norms", wmt_run, "--vectors", "tgt_output", "--vectors", "src_input")["sets"]
    # every piece either side has, less those the target (source) side never has: the German (English) ones
    assert sets["tgt_output"] == {"rho": pytest.approx(-1.0), "pvalue": pytest.approx(0.0, abs=1e-30),
                                  "words": len(counts["de"])}
    assert sets["src_input"]["rho"] == pytest.approx(-1.0) and sets["src_input"]["words"] == len(counts["en"])
    assert len(counts["de"]) < len(counts["en"] + counts["de"])

    # reference tokens of test.de by their German training count: a piece only English has is "never seen"
    tokens = Counter()
    vocab = set(counts["en"] + counts["de"])
    for line in lines(out / "test.de"):
        for piece in line.split():
            count = counts["de"][piece]
            tokens["<unk>" if piece not in vocab else "<1" if count < 1 else "[1,3)" if count < 3 else ">=3"] += 1
    assert tokens["<1"] > 0  # what joint counts would have put in a seen bin
    (run,) = analyse("confidence", wmt_run, "--data-dir", out, "--bins", "1,3")["runs"].values()
    assert {b["bin"]: b["tokens"] for b in run["bins"]} == {**{label: tokens[label] for label in (
        "<1", "[1,3)", ">=3", "<unk>")}, "</s>": len(lines(out / "test.de"))}


def test_a_joint_vocabulary_counting_both_sides_together_is_refused(prepared: tuple[Path, dict, list],
                                                                    wmt_run: Path, tmp_path: Path) -> None:
    """A directory prepared before each side was counted apart (its manifest without ``vocab_counts``): every
    frequency analysis stops with a one-line error, never ranks by both languages' counts."""
    old = tmp_path / "old_run"
    shutil.copytree(wmt_run, old)
    manifest = json.loads((old / "data" / "manifest.json").read_text(encoding="utf-8"))
    write_json(old / "data" / "manifest.json", {k: v for k, v in manifest.items() if k != "vocab_counts"})
    for command in (["norms", old], ["geometry", old], ["confidence", old, "--data-dir", prepared[0]]):
        result = CliRunner().invoke(app, ["evaluate", *(str(arg) for arg in command), "--device", "cpu"])
        errors = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(errors) == 1, result.output
        assert "count both languages" in errors[0] and "nlgkit prepare wmt14" in errors[0]
    with pytest.raises(DataError, match="count both languages"):
        analyse_run(old, {})
    assert analyse("neighbours", old, "--query", "ein")  # what no count reads still works


def test_a_corpus_prepared_like_the_joint_one_says_how_its_copies_count(prepared: tuple[Path, dict, list],
                                                                        stand_in: tuple[Path, dict],
                                                                        tmp_path: Path) -> None:
    text = stand_in[1]["valid"]
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            (tmp_path / f"{split}.{lang}").write_text("\n".join(text[lang]) + "\n", encoding="utf-8")
    manifest = prepare_parallel(tmp_path / "out", *(str(tmp_path / split) for split in ("train", "valid", "test")),
                                "en", "de", like=prepared[0])
    assert manifest["joint_vocab"] and manifest["vocab_counts"] == "per language"
    check_side_counts(tmp_path / "out")

"""The data layer: paper-setting Multi30K vocabularies, manifests, downloads, subwords and errors."""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sentencepiece import sentencepiece_model_pb2
from typer.testing import CliRunner

from nlgkit.cli.bpe import app as bpe_app
from nlgkit.cli.prepare import app as prepare_app
from nlgkit.core.errors import ConfigError, DataError, NlgkitError
from nlgkit.core.io import atomic_directory, sha256_file
from nlgkit.data.download import fetch_multi30k, raw_name
from nlgkit.data.prepare import prepare_multi30k, prepare_parallel
from nlgkit.data.tokenize import TextPipeline, load_pipeline
from nlgkit.data.vocab import Vocabulary

RAW = Path("task1") / "raw"


def count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory: pytest.TempPathFactory, multi30k_source: Path) -> Path:
    """First 400 / 50 / 50 lines of Multi30K de-en as plain files ``{split}.{lang}`` in the returned dir."""
    root = tmp_path_factory.mktemp("small")
    for split, count in (("train", 400), ("valid", 50), ("test", 50)):
        for lang in ("de", "en"):
            with gzip.open(multi30k_source / RAW / raw_name(split, lang), "rt", encoding="utf-8") as handle:
                lines = [next(handle) for _ in range(count)]
            (root / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
    return root


def parallel(small: Path, out: Path, **options) -> dict:
    return prepare_parallel(out, str(small / "train"), str(small / "valid"), str(small / "test"), "de", "en",
                            **options)


# -- paper setting ---------------------------------------------------------------------------------------


def test_paper_vocabulary_sizes(paper: tuple[Path, dict]) -> None:
    out, manifest = paper
    assert len(Vocabulary.load(out / "vocab.de.txt")) == 7853
    assert len(Vocabulary.load(out / "vocab.en.txt")) == 5893
    assert manifest["vocab_size"] == {"de": 7853, "en": 5893}


def test_paper_manifest_and_files(paper: tuple[Path, dict], multi30k_source: Path) -> None:
    out, manifest = paper
    assert manifest == json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["corpus"] == "multi30k" and manifest["source"] == str(multi30k_source)
    assert (manifest["src_lang"], manifest["tgt_lang"]) == ("de", "en")
    assert {k: manifest[k] for k in ("tokenizer", "lowercase", "min_freq", "max_len", "subword")} == {
        "tokenizer": "spacy", "lowercase": True, "min_freq": 2, "max_len": 0, "subword": "none"}
    assert manifest["lines"] == {"train": 29000, "valid": 1014, "test": 1000}
    assert manifest["nlgkit_version"]
    expected = {f"{split}.{lang}" for split in ("train", "valid", "test") for lang in ("de", "en")}
    expected |= {f"{split}.ref.{lang}" for split in ("valid", "test") for lang in ("de", "en")}
    expected |= {"vocab.de.txt", "vocab.en.txt"}
    assert set(manifest["files"]) == expected
    for name, digest in manifest["files"].items():
        assert sha256_file(out / name) == digest, name
    for split, count in manifest["lines"].items():
        for lang in ("de", "en"):
            assert count_lines(out / f"{split}.{lang}") == count
            if split != "train":
                assert count_lines(out / f"{split}.ref.{lang}") == count
    assert Vocabulary.load(out / "vocab.de.txt").checksum() == manifest["files"]["vocab.de.txt"]
    assert not list(out.parent.glob(".*")), "temporary directories left behind"


def test_paper_text_forms(paper: tuple[Path, dict]) -> None:
    out, _ = paper
    first = (out / "train.en").read_text(encoding="utf-8").splitlines()[0]
    assert first == "two young , white males are outside near many bushes ."
    for line in (out / "train.de").read_text(encoding="utf-8").splitlines():
        assert line and line == " ".join(line.split())
    ref = (out / "test.ref.en").read_text(encoding="utf-8").splitlines()[0]
    assert ref == ref.lower() and " ." not in ref  # raw text, only lowercased
    vocab = Vocabulary.load(out / "vocab.en.txt")
    assert vocab.counts[4] == max(vocab.counts) and vocab.counts[-1] >= 2


def test_pipeline_round_trip_spacy(paper: tuple[Path, dict]) -> None:
    out, _ = paper
    en = load_pipeline(out, "en")
    assert en.encode("A man in a blue shirt.") == ["a", "man", "in", "a", "blue", "shirt", "."]
    assert en.decode(en.encode("A man, in a blue shirt.")) == "a man, in a blue shirt."
    with pytest.raises(DataError, match="fr"):
        load_pipeline(out, "fr")


# -- vocabulary ------------------------------------------------------------------------------------------


def test_vocabulary_build_save_load(tmp_path: Path) -> None:
    vocab = Vocabulary.build({"b": 3, "a": 3, "c": 5, "rare": 1, " ": 2}, min_freq=2)
    assert vocab.tokens == ["<unk>", "<pad>", "<s>", "</s>", "c", "a", "b", " "]
    assert (vocab.unk_index, vocab.pad_index, vocab.bos_index, vocab.eos_index) == (0, 1, 2, 3)
    assert vocab.counts[:4] == [0, 0, 0, 0] and vocab.counts[4] == 5
    assert vocab.encode(["a", "zzz"]) == [5, 0] and vocab.decode([4, 3]) == ["c", "</s>"]
    vocab.save(tmp_path / "v.txt")
    loaded = Vocabulary.load(tmp_path / "v.txt")
    assert loaded == vocab and len(loaded) == 8
    assert loaded.checksum() == sha256_file(tmp_path / "v.txt")


def test_vocabulary_malformed(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("<unk>\t0\n<pad>\t0\n<s>\t0\n</s>\t0\nhello 3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.txt: line 5"):
        Vocabulary.load(path)
    path.write_text("hello\t3\n", encoding="utf-8")
    with pytest.raises(DataError, match="special"):
        Vocabulary.load(path)


# -- download --------------------------------------------------------------------------------------------


@pytest.fixture
def http_base(multi30k_source: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A local HTTP server on a random port serving the shared task1/raw directory."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(multi30k_source / RAW))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_download_matches_directory(http_base: str, multi30k_source: Path, tmp_path: Path) -> None:
    fetched = fetch_multi30k(http_base, ("de", "en"), tmp_path / "dl")
    local = fetch_multi30k(str(multi30k_source), ("de", "en"), tmp_path / "unused")
    for split in ("train", "valid", "test"):
        for lang in ("de", "en"):
            assert fetched[split][lang].read_bytes() == local[split][lang].read_bytes()
    assert not (tmp_path / "unused").exists()
    assert not list((tmp_path / "dl").glob(".*")), "partial downloads left behind"

    options = {"tokenizer": "none", "min_freq": 1}
    via_url = prepare_multi30k(tmp_path / "url", "de", "en", source=http_base, **options)
    via_dir = prepare_multi30k(tmp_path / "dir", "de", "en", source=str(multi30k_source), **options)
    assert {k: v for k, v in via_url["files"].items() if not k.startswith("raw/")} == via_dir["files"]
    assert via_url["inputs"]["train.de"]["sha256"] == via_dir["inputs"]["train.de"]["sha256"]
    assert (tmp_path / "url" / "raw" / "train.de.gz").is_file()


def test_download_errors(http_base: str, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=rf"{http_base}nowhere/train\.de\.gz: HTTP 404"):
        fetch_multi30k(http_base + "nowhere/", ("de", "en"), tmp_path)
    with pytest.raises(DataError, match="not found"):
        fetch_multi30k(str(tmp_path / "missing"), ("de", "en"), tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"train\.de\.gz: file not found"):
        fetch_multi30k(str(tmp_path / "empty"), ("de", "en"), tmp_path)


# -- subwords --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("subword, marker", [("bpe:300", "@@"), ("bpe-joint:300", "@@"), ("spm:400", "▁")])
def test_subword_round_trip(small_corpus: Path, tmp_path: Path, subword: str, marker: str) -> None:
    manifest = parallel(small_corpus, tmp_path / "d", tokenizer="none", subword=subword, min_freq=1)
    kind = subword.split(":")[0]
    expected = {"bpe": "bpe.{lang}.codes", "bpe-joint": "bpe.joint.codes", "spm": "spm.{lang}.model"}[kind]
    assert manifest["subword_files"] == {lang: expected.format(lang=lang) for lang in ("de", "en")}
    assert marker in (tmp_path / "d" / "train.en").read_text(encoding="utf-8")
    for lang in ("de", "en"):
        pipeline = load_pipeline(tmp_path / "d", lang)
        vocab = Vocabulary.load(tmp_path / "d" / f"vocab.{lang}.txt")
        for line in (small_corpus / f"train.{lang}").read_text(encoding="utf-8").splitlines()[:100]:
            pieces = pipeline.encode(line)
            assert pipeline.decode(pieces) == " ".join(line.lower().split())
            assert vocab.unk_index not in vocab.encode(pieces)


def test_joint_bpe_learns_one_set_of_merges_from_both_languages(small_corpus: Path, tmp_path: Path) -> None:
    parallel(small_corpus, tmp_path / "joint", tokenizer="none", subword="bpe-joint:300", min_freq=1)
    parallel(small_corpus, tmp_path / "apart", tokenizer="none", subword="bpe:300", min_freq=1)
    joint = (tmp_path / "joint" / "bpe.joint.codes").read_text(encoding="utf-8")
    apart = {lang: (tmp_path / "apart" / f"bpe.{lang}.codes").read_text(encoding="utf-8") for lang in ("de", "en")}
    assert joint not in apart.values()  # merges of the concatenated text, not of one side
    # the joint merges segment both sides: a word frequent on only one side is merged for the other too
    de_words = set((small_corpus / "train.de").read_text(encoding="utf-8").lower().split())
    en_words = set((small_corpus / "train.en").read_text(encoding="utf-8").lower().split())
    shared = {line.replace(" ", "").replace("</w>", "") for line in joint.splitlines()[1:]}
    assert shared & {w for w in de_words - en_words} and shared & {w for w in en_words - de_words}


def test_max_len_filters_train_only(small_corpus: Path, tmp_path: Path) -> None:
    manifest = parallel(small_corpus, tmp_path / "d", tokenizer="none", max_len=10)
    kept = manifest["lines"]["train"]
    assert 0 < kept < 400 and manifest["train_dropped"] == 400 - kept
    assert manifest["lines"]["valid"] == manifest["lines"]["test"] == 50
    for lang in ("de", "en"):
        lines = (tmp_path / "d" / f"train.{lang}").read_text(encoding="utf-8").splitlines()
        assert len(lines) == manifest["lines"]["train"] and max(len(x.split()) for x in lines) <= 10


# -- errors ----------------------------------------------------------------------------------------------


def test_parallel_mismatched_lines(small_corpus: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.de").write_text("a\nb\nc\n", encoding="utf-8")
    (bad / "train.en").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.de has 3 lines but .*train\.en has 2"):
        prepare_parallel(tmp_path / "out", str(bad / "train"), str(small_corpus / "valid"),
                         str(small_corpus / "test"), "de", "en")
    assert not (tmp_path / "out").exists()


def test_parallel_non_utf8(small_corpus: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.de").write_bytes(b"gut\nschlecht \xff\n")
    (bad / "train.en").write_text("good\nbad\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.de: line 2: not valid UTF-8"):
        prepare_parallel(tmp_path / "out", str(bad / "train"), str(small_corpus / "valid"),
                         str(small_corpus / "test"), "de", "en", tokenizer="none")


def test_parallel_carriage_return_inside_a_line(small_corpus: Path, tmp_path: Path) -> None:
    """spaCy makes a token of a carriage return inside a line: it is whitespace, never in the token files, and
    is not counted into the vocabulary (which could not save it one per line: a ValueError, a traceback)."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.de").write_bytes(b"ein hund\rbellt\nein hund\r\n")
    (bad / "train.en").write_bytes(b"a dog\rbarks\na dog\n")
    manifest = prepare_parallel(tmp_path / "out", str(bad / "train"), str(small_corpus / "valid"),
                                str(small_corpus / "test"), "de", "en", min_freq=1)
    assert manifest["lines"]["train"] == 2
    assert (tmp_path / "out" / "train.de").read_text(encoding="utf-8") == "ein hund bellt\nein hund\n"
    assert "\r" not in Vocabulary.load(tmp_path / "out" / "vocab.de.txt").tokens


def test_unknown_language_and_options(small_corpus: Path, tmp_path: Path, multi30k_source: Path) -> None:
    with pytest.raises(ConfigError, match="'xx'"):
        prepare_multi30k(tmp_path / "o", "de", "xx", source=str(multi30k_source))
    with pytest.raises(ConfigError, match="'zz'"):  # spaCy's rules load with the first line (detokenising needs none)
        TextPipeline("zz", "spacy").tokenize("a line")
    with pytest.raises(ConfigError, match="'zz'"):  # ... and preparing data checks them before reading anything
        prepare_multi30k(tmp_path / "o", "de", "zz", source=str(multi30k_source))
    with pytest.raises(ConfigError, match="subword"):
        parallel(small_corpus, tmp_path / "o", subword="bpe:many")
    with pytest.raises(ConfigError, match="tokenizer"):
        parallel(small_corpus, tmp_path / "o", tokenizer="nltk")
    assert not (tmp_path / "o").exists()


def test_refuses_to_overwrite_foreign_directory(small_corpus: Path, tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me", encoding="utf-8")
    with pytest.raises(NlgkitError, match="refusing"):
        parallel(small_corpus, tmp_path / "mine", tokenizer="none")
    assert (tmp_path / "mine" / "thesis.tex").read_text(encoding="utf-8") == "keep me"
    parallel(small_corpus, tmp_path / "d", tokenizer="none")
    parallel(small_corpus, tmp_path / "d", tokenizer="none", min_freq=1)  # a data dir is replaced
    assert json.loads((tmp_path / "d" / "manifest.json").read_text(encoding="utf-8"))["min_freq"] == 1


# -- CLI -------------------------------------------------------------------------------------------------


def assert_one_line_error(result) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output


def test_cli_prepare(small_corpus: Path, tmp_path: Path, multi30k_source: Path) -> None:
    runner = CliRunner()
    args = ["parallel", "--train", str(small_corpus / "train"), "--valid", str(small_corpus / "valid"),
            "--test", str(small_corpus / "test"), "--src", "de", "--tgt", "en", "--tokenizer", "moses"]
    result = runner.invoke(prepare_app, [*args, "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert "400" in result.stdout and "vocab de" in result.stdout

    bad_out = ["--out", str(tmp_path / "e")]
    assert_one_line_error(runner.invoke(prepare_app, [*args, *bad_out, "--subword", "x:1"]))
    missing = ["--train", str(tmp_path / "nope")] + args[3:]
    assert_one_line_error(runner.invoke(prepare_app, ["parallel", *missing, *bad_out]))
    assert_one_line_error(runner.invoke(prepare_app, ["multi30k", "--pair", "de-xx", *bad_out]))
    assert_one_line_error(runner.invoke(prepare_app, ["multi30k", "--pair", "deen", *bad_out]))
    assert not (tmp_path / "e").exists()

    result = runner.invoke(prepare_app, ["multi30k", "--pair", "en-fr", "--source", str(multi30k_source),
                                         "--tokenizer", "none", "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["lines"]["train"] == 29000 and manifest["tgt_lang"] == "fr"


@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_cli_bpe(small_corpus: Path, tmp_path: Path, kind: str) -> None:
    runner = CliRunner()
    text = tmp_path / "train.tok"
    text.write_text((small_corpus / "train.en").read_text(encoding="utf-8").lower(), encoding="utf-8")
    codes = tmp_path / "codes"
    learn = ["learn", "--input", str(text), "--output", str(codes), "--symbols", "300", "--type", kind]
    result = runner.invoke(bpe_app, learn)
    assert result.exit_code == 0, result.output
    out = tmp_path / "pieces"
    apply = ["apply", "--codes", str(codes), "--input", str(text)]
    result = runner.invoke(bpe_app, [*apply, "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert count_lines(out) == count_lines(text)
    result = runner.invoke(bpe_app, ["apply", "--codes", str(codes)], input="a man rides a bicycle .\n")
    assert result.exit_code == 0 and len(result.stdout.split()) >= 6

    assert_one_line_error(runner.invoke(bpe_app, ["apply", "--codes", str(tmp_path / "none")]))
    assert_one_line_error(runner.invoke(bpe_app, [*learn[:-1], "wordpiece"]))


def test_bpe_names_a_bad_codes_file_a_cut_sentencepiece_model_and_an_empty_input(small_corpus: Path,
                                                                                  tmp_path: Path) -> None:
    """subword-nmt wrote its own two lines and exited on a bad codes file (the file unnamed); SentencePiece loads a
    model cut at a piece's end as a smaller one and segmented with it silently (exit 0); learning from empty input
    blamed the output file."""
    runner = CliRunner()
    text = tmp_path / "train.tok"
    text.write_text((small_corpus / "train.en").read_text(encoding="utf-8").lower(), encoding="utf-8")
    model = tmp_path / "spm.model"
    assert runner.invoke(bpe_app, ["learn", "--input", str(text), "--output", str(model), "--symbols", "300",
                                   "--type", "spm"]).exit_code == 0
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    whole = model.read_bytes()
    pieces = sentencepiece_model_pb2.ModelProto(pieces=proto.pieces[:200]).SerializeToString()
    assert whole.startswith(pieces)  # (the pieces come first in the file)
    cut = tmp_path / "cut.model"  # the file cut at the end of its 200th piece
    cut.write_bytes(pieces)
    bad_codes, empty_codes, empty_text = tmp_path / "bad.codes", tmp_path / "empty.codes", tmp_path / "empty.tok"
    bad_codes.write_text("#version: 0.2\na b\nthree word line\n", encoding="utf-8")
    empty_codes.write_bytes(b"")
    empty_text.write_text("\n  \n", encoding="utf-8")
    for argv, message in (
            (["apply", "--codes", str(cut), "--input", str(text)],
             f"{cut}: a damaged SentencePiece model (200 pieces and no trainer_spec or normalizer_spec; truncated?)"),
            (["apply", "--codes", str(bad_codes), "--input", str(text)],
             f"{bad_codes}: not a subword-nmt codes file (line 3: 'three word line' is not two subword units)"),
            (["apply", "--codes", str(empty_codes), "--input", str(text)], f"{empty_codes}: empty"),
            (["learn", "--input", str(empty_text), "--output", str(tmp_path / "c"), "--type", "spm"],
             f"{empty_text}: no text to learn from (empty or blank lines only)")):
        result = runner.invoke(bpe_app, argv)
        assert_one_line_error(result)
        assert message in result.stderr, (argv, result.stderr)
    assert not (tmp_path / "c").exists()


def test_atomic_directory_swaps_in_only_a_complete_directory(tmp_path: Path) -> None:
    """Prepared data, feature caches and run records are written through it: an interrupted write leaves the
    previous directory whole and no temporary beside it."""
    target = tmp_path / "out"
    with atomic_directory(target) as tmp:
        (tmp / "a.txt").write_text("first")
    with pytest.raises(RuntimeError), atomic_directory(target) as tmp:
        (tmp / "a.txt").write_text("second")
        raise RuntimeError("interrupted")
    assert (target / "a.txt").read_text() == "first" and [p.name for p in tmp_path.iterdir()] == ["out"]
    with atomic_directory(target) as tmp:
        (tmp / "b.txt").write_text("third")
    assert [p.name for p in target.iterdir()] == ["b.txt"] and [p.name for p in tmp_path.iterdir()] == ["out"]

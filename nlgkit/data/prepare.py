"""Build a data directory: token files, BLEU references, vocabularies and a manifest.

Everything is written into a temporary sibling directory that is renamed into place at the end, so a bad
input or a crash never leaves a half-written data directory that ``train`` would trust. The manifest
records every option, line counts and a sha256 for every file so a run can prove which data it used.

Layout of ``out_dir``::

    train.{lang} valid.{lang} test.{lang}   one sentence per line, model tokens joined by single spaces
    valid.ref.{lang} test.ref.{lang}        the raw sentences (lowercased if ``lowercase``): BLEU references
    vocab.{lang}.txt                        token<TAB>count, from train only
    bpe.{lang}.codes | spm.{lang}.model     when a subword model is used (learned on train only)
    raw/                                    downloaded Multi30K files (URL sources only)
    manifest.json
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nlgkit import __version__
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import atomic_directory, read_lines, sha256_file, write_json
from nlgkit.data.download import MULTI30K_LANGS, default_source, fetch_multi30k, is_url
from nlgkit.data.like import (
    copy_like_assets,
    like_manifest,
    like_options,
    like_pipelines,
    like_record,
    unknown_shares,
)
from nlgkit.data.subword import learn, load_segmenter, parse_subword, subword_filename
from nlgkit.data.tokenize import TextPipeline, check_tokenizer
from nlgkit.data.vocab import Vocabulary

SPLITS = ("train", "valid", "test")
MANIFEST_FORMAT = 1

Corpus = dict[str, dict[str, list[str]]]  # split → lang → raw lines


def prepare_multi30k(out_dir: Path, src_lang: str, tgt_lang: str, source: str = "", tokenizer: str = "spacy",
                     lowercase: bool = True, min_freq: int = 2, max_len: int = 0,
                     subword: str = "none") -> dict[str, Any]:
    """Prepare Multi30K task 1 (train 29,000 / valid 1,014 / test 2016 Flickr 1,000); return the manifest."""
    for lang in (src_lang, tgt_lang):
        if lang not in MULTI30K_LANGS:
            raise ConfigError(f"Multi30K has no language {lang!r} (choose from {', '.join(MULTI30K_LANGS)})")
    options = check_options(src_lang, tgt_lang, tokenizer, lowercase, min_freq, max_len, subword)
    resolved = source or default_source()
    with staging(Path(out_dir)) as tmp:
        files = fetch_multi30k(resolved, (src_lang, tgt_lang), tmp / "raw")
        corpus = read_corpus(files, src_lang, tgt_lang)
        inputs = {f"{split}.{lang}": describe_raw_input(resolved, path)
                  for split, by_lang in files.items() for lang, path in by_lang.items()}
        return build_directory(tmp, corpus, "multi30k", resolved, inputs, src_lang, tgt_lang, options)


def prepare_parallel(out_dir: Path, train_prefix: str, valid_prefix: str, test_prefix: str, src_lang: str,
                     tgt_lang: str, tokenizer: str = "spacy", lowercase: bool = True, min_freq: int = 2,
                     max_len: int = 0, subword: str = "none", like: Path | None = None) -> dict[str, Any]:
    """Prepare a user's corpus from ``{prefix}.{lang}`` files (optionally ``.gz``); return the manifest.

    With ``like`` (a prepared directory of the same pair), the text options, subword models and vocabularies are
    that directory's (:mod:`nlgkit.data.like`), so a model trained there can be fine-tuned here; the text options
    given are then not used.
    """
    if like is not None:
        parent = like_manifest(like, src_lang, tgt_lang)
        options = check_options(src_lang, tgt_lang, **like_options(parent, max_len))
    else:
        options = check_options(src_lang, tgt_lang, tokenizer, lowercase, min_freq, max_len, subword)
    prefixes = {"train": train_prefix, "valid": valid_prefix, "test": test_prefix}
    files = {split: {lang: _find_side(prefix, lang) for lang in (src_lang, tgt_lang)}
             for split, prefix in prefixes.items()}
    corpus = read_corpus(files, src_lang, tgt_lang)
    inputs = {f"{split}.{lang}": {"path": str(path.resolve()), "sha256": sha256_file(path)}
              for split, by_lang in files.items() for lang, path in by_lang.items()}
    source = " ".join(f"{split}={prefix}" for split, prefix in prefixes.items())
    with staging(Path(out_dir)) as tmp:
        return build_directory(tmp, corpus, "parallel", source, inputs, src_lang, tgt_lang, options, like=like)


# ---------------------------------------------------------------------------------------------------------


def check_options(src_lang: str, tgt_lang: str, tokenizer: str, lowercase: bool, min_freq: int, max_len: int,
                   subword: str) -> dict[str, Any]:
    if src_lang == tgt_lang:
        raise ConfigError(f"source and target language are both {src_lang!r}")
    for lang in (src_lang, tgt_lang):
        check_tokenizer(tokenizer, lang)
    if isinstance(min_freq, bool) or not isinstance(min_freq, int) or min_freq < 1:
        raise ConfigError(f"min_freq = {min_freq!r}: must be a positive integer")
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 0:
        raise ConfigError(f"max_len = {max_len!r}: must be 0 (no limit) or a positive integer")
    parse_subword(subword)
    return {"tokenizer": tokenizer, "lowercase": bool(lowercase), "min_freq": min_freq, "max_len": max_len,
            "subword": subword.strip()}


def _find_side(prefix: str, lang: str) -> Path:
    plain = Path(f"{prefix}.{lang}").expanduser()
    for path in (plain, plain.with_name(plain.name + ".gz")):
        if path.is_file():
            return path
    if plain.is_dir():
        raise DataError(f"{plain}: a directory, not a file (nor is there a {plain.name}.gz)")
    raise DataError(f"{plain}: file not found (nor {plain.name}.gz)")


def read_corpus(files: dict[str, dict[str, Path]], src_lang: str, tgt_lang: str) -> Corpus:
    corpus: Corpus = {}
    for split in SPLITS:
        src, tgt = files[split][src_lang], files[split][tgt_lang]
        corpus[split] = {src_lang: read_lines(src), tgt_lang: read_lines(tgt)}
        n_src, n_tgt = len(corpus[split][src_lang]), len(corpus[split][tgt_lang])
        if n_src != n_tgt:
            raise DataError(f"{src} has {n_src} lines but {tgt} has {n_tgt}: the two sides must be aligned")
        if n_src == 0:
            raise DataError(f"{src}: no lines")
    return corpus


def describe_raw_input(source: str, path: Path) -> dict[str, str]:
    where = source.rstrip("/") + "/" + path.name if is_url(source) else str(path.resolve())
    return {"path": where, "sha256": sha256_file(path)}


def _write_lines(path: Path, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(f"{line}\n" for line in lines)


def build_directory(out: Path, corpus: Corpus, corpus_name: str, source: str, inputs: dict[str, Any],
                    src_lang: str, tgt_lang: str, options: dict[str, Any],
                    side_files: dict[str, dict[str, list[str]]] | None = None,
                    extra: dict[str, Any] | None = None, like: Path | None = None) -> dict[str, Any]:
    """Tokenise, segment, filter and write ``corpus`` into ``out``; return the manifest.

    ``side_files`` (suffix → split → one line per raw line) are written as ``{split}.{suffix}`` and filtered
    with the training pairs, so they stay aligned (e.g. the image of each pair); ``extra`` joins the manifest.
    With ``like``, that prepared directory's pipelines, subword models and vocabularies are used instead of
    learned ones, and the manifest says how many tokens they do not know.
    """
    langs = (src_lang, tgt_lang)
    if like is None:
        pipelines = {lang: TextPipeline(lang, options["tokenizer"], options["lowercase"]) for lang in langs}
    else:
        pipelines = like_pipelines(like, langs)
    # keep_space: whitespace tokens are counted for the vocabulary (below) but never written
    tokens = {split: {lang: list(pipelines[lang].tokenize_many(corpus[split][lang], keep_space=True))
                      for lang in langs} for split in SPLITS}

    kind, size = parse_subword(options["subword"])
    if like is None:
        subword_files = _learn_subwords(out, tokens, pipelines, kind, size, langs)
    pieces = {split: {lang: [pipelines[lang].segment(t) for t in tokens[split][lang]] for lang in langs}
              for split in SPLITS}

    # Training pairs: drop empty ones (nothing to learn) and, with max_len, over-long ones.
    max_len = options["max_len"]
    n_raw = len(pieces["train"][src_lang])
    lengths = [[len(pieces["train"][lang][i]) for lang in langs] for i in range(n_raw)]
    keep = [i for i, pair in enumerate(lengths) if min(pair) > 0 and (not max_len or max(pair) <= max_len)]
    if not keep:
        raise DataError(f"no training pairs left after filtering (max_len = {max_len})")

    if like is None:
        vocabs = {}
        for lang in langs:
            counter: Counter[str] = Counter()
            for i in keep:
                # Without subword, count the tokenizer's full output, whitespace tokens included: this is what
                # the reference pipeline (torchtext Field + spaCy) counted, and it gives the paper's
                # vocabulary sizes (Multi30K de-en: 7,853 / 5,893). Those few entries never occur in the files.
                # (a carriage return inside a line is one such token for spaCy: it cannot be saved one per line)
                counter.update(t for t in (tokens["train"][lang][i] if kind == "none" else pieces["train"][lang][i])
                               if "\r" not in t)
            vocabs[lang] = Vocabulary.build(counter, options["min_freq"])
            vocabs[lang].save(out / f"vocab.{lang}.txt")
    else:
        parent = like_manifest(like, src_lang, tgt_lang)
        subword_files, vocabs = copy_like_assets(like, out, parent, langs)
        # copies of a joint vocabulary say how their counts were made, as the parent's manifest does (a frequency
        # analysis refuses a joint vocabulary counting both sides together: nlgkit.data.word_counts)
        extra = {**(extra or {}), "like": like_record(like, langs),
                 "unknown_token_share": unknown_shares(pieces, vocabs, keep),
                 **{key: parent[key] for key in ("joint_vocab", "vocab_counts") if key in parent}}

    for lang in langs:
        _write_lines(out / f"train.{lang}", [" ".join(pieces["train"][lang][i]) for i in keep])
        for split in ("valid", "test"):
            _write_lines(out / f"{split}.{lang}", [" ".join(p) for p in pieces[split][lang]])
            refs = [line.strip() for line in corpus[split][lang]]
            if options["lowercase"]:
                refs = [ref.lower() for ref in refs]
            _write_lines(out / f"{split}.ref.{lang}", refs)

    for suffix, by_split in (side_files or {}).items():
        _write_lines(out / f"train.{suffix}", [by_split["train"][i] for i in keep])
        for split in ("valid", "test"):
            _write_lines(out / f"{split}.{suffix}", by_split[split])

    files = {p.relative_to(out).as_posix(): sha256_file(p) for p in sorted(out.rglob("*")) if p.is_file()}
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "nlgkit_version": __version__,
        "corpus": corpus_name,
        "source": source,
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        **options,
        "lines": {"train": len(keep), **{split: len(corpus[split][src_lang]) for split in ("valid", "test")}},
        "train_dropped": n_raw - len(keep),
        "vocab_size": {lang: len(vocabs[lang]) for lang in langs},
        "subword_files": subword_files,
        "inputs": inputs,
        "files": files,
        **(extra or {}),
    }
    write_json(out / "manifest.json", manifest)
    return manifest


def _learn_subwords(out: Path, tokens: dict[str, dict[str, list[list[str]]]], pipelines: dict[str, TextPipeline],
                    kind: str, size: int, langs: tuple[str, str]) -> dict[str, str]:
    """Learn the subword models on the training tokens into ``out`` and give each pipeline its segmenter;
    return the model file of each language."""
    subword_files: dict[str, str] = {}
    if kind == "none":
        return subword_files
    # joint BPE (Pappas et al.): one model learned on both sides' training text, used by both languages
    groups = [langs] if kind == "bpe-joint" else [(lang,) for lang in langs]
    for group in groups:
        name = subword_filename(kind, group[0])
        train_text = (" ".join(t for t in toks if not t.isspace())
                      for lang in group for toks in tokens["train"][lang])
        learn(kind, train_text, out / name, size)
        for lang in group:
            pipelines[lang].segmenter = load_segmenter(kind, out / name)
            subword_files[lang] = name
    return subword_files


@contextlib.contextmanager
def staging(out_dir: Path) -> Iterator[Path]:
    """Yield an empty temporary sibling of ``out_dir``; swap it in on success, delete it on failure."""
    out_dir = out_dir.expanduser()
    if out_dir.exists():
        if not out_dir.is_dir():
            raise DataError(f"{out_dir}: exists and is not a directory")
        if any(out_dir.iterdir()) and not (out_dir / "manifest.json").is_file():
            raise DataError(f"{out_dir}: not empty and has no manifest.json; refusing to overwrite it")
    with atomic_directory(out_dir) as tmp:
        yield tmp

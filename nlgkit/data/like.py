"""Preparing a corpus like another prepared directory: its tokenizer, lowercasing, subword models and vocabularies.

A trained model reads token ids of the vocabularies it was trained with. To fine-tune it on another corpus
(``train.init_from``) that corpus must be tokenised, segmented and indexed exactly as the model's data directory
was, never with subword models and vocabularies of its own (fairseq-preprocess's ``--srcdict``/``--tgtdict``,
OpenNMT's ``-src_vocab``): ``nlgkit prepare parallel --like DATA_DIR`` copies those files byte for byte and
reports how many of the new corpus's tokens the old vocabularies do not know.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from nlgkit.core.errors import DataError
from nlgkit.core.io import read_json, sha256_file
from nlgkit.data.tokenize import TextPipeline, load_pipeline
from nlgkit.data.vocab import Vocabulary

# what a directory prepared --like another takes from that directory's manifest
SHARED_OPTIONS = ("tokenizer", "lowercase", "min_freq", "subword")


def like_manifest(like: Path, src_lang: str, tgt_lang: str) -> dict[str, Any]:
    """The manifest of the directory to prepare like, checked to be a prepared translation directory of the same
    language pair in the same direction (a one-line error naming it otherwise)."""
    where = Path(like) / "manifest.json"
    if not where.is_file():
        raise DataError(f"--like {like}: no manifest.json there (not a directory written by `nlgkit prepare`)")
    manifest = read_json(where)
    missing = [key for key in ("src_lang", "tgt_lang", *SHARED_OPTIONS) if key not in manifest]
    if missing:
        raise DataError(f"{where}: missing {', '.join(missing)} (not a translation data directory)")
    if (manifest["src_lang"], manifest["tgt_lang"]) != (src_lang, tgt_lang):
        raise DataError(f"{where}: prepared for {manifest['src_lang']}-{manifest['tgt_lang']}, not "
                        f"{src_lang}-{tgt_lang}: its vocabularies index the other sides")
    return manifest


def like_options(manifest: dict[str, Any], max_len: int) -> dict[str, Any]:
    """The preparation options of a directory prepared like ``manifest``'s: its text options, the caller's
    length filter (which changes no token)."""
    return {**{key: manifest[key] for key in SHARED_OPTIONS}, "max_len": max_len}


def like_pipelines(like: Path, langs: tuple[str, str]) -> dict[str, TextPipeline]:
    """Each language's text pipeline as ``like`` prepared it, its subword models included."""
    return {lang: load_pipeline(Path(like), lang) for lang in langs}


def copy_like_assets(like: Path, out: Path, manifest: dict[str, Any],
                     langs: tuple[str, str]) -> tuple[dict[str, str], dict[str, Vocabulary]]:
    """Copy ``like``'s subword models and vocabularies into ``out`` byte for byte; return the subword files by
    language (as a manifest lists them) and the vocabularies."""
    subword_files: dict[str, str] = dict(manifest.get("subword_files", {}))
    for name in sorted(set(subword_files.values())):
        _copy(Path(like) / name, out / name)
    vocabs = {}
    for lang in langs:
        name = f"vocab.{lang}.txt"
        _copy(Path(like) / name, out / name)
        vocabs[lang] = Vocabulary.load(out / name)
    return subword_files, vocabs


def _copy(source: Path, target: Path) -> None:
    if not source.is_file():
        raise DataError(f"{source}: file not found (the manifest beside it lists it)")
    shutil.copyfile(source, target)


def like_record(like: Path, langs: tuple[str, str]) -> dict[str, Any]:
    """What the new manifest says of the directory it was prepared like: where, and the checksums of its manifest
    and vocabularies (so a run can tell later that the ids are the same)."""
    like = Path(like)
    return {"dir": str(like.resolve()), "manifest_sha256": sha256_file(like / "manifest.json"),
            "vocab_sha256": {lang: sha256_file(like / f"vocab.{lang}.txt") for lang in langs}}


def unknown_shares(pieces: dict[str, dict[str, list[list[str]]]], vocabs: dict[str, Vocabulary],
                   keep: list[int]) -> dict[str, dict[str, float]]:
    """Per split and language, the share of tokens the vocabulary maps to ``<unk>`` (training pairs: those kept)."""
    shares: dict[str, dict[str, float]] = {}
    for split, by_lang in pieces.items():
        shares[split] = {}
        for lang, lines in by_lang.items():
            chosen = [lines[i] for i in keep] if split == "train" else lines
            total = sum(len(line) for line in chosen)
            unknown = sum(token not in vocabs[lang] for line in chosen for token in line)
            shares[split][lang] = round(unknown / total, 6) if total else 0.0
    return shares

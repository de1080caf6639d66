"""Subword segmentation: subword-nmt BPE (``bpe:N``) and SentencePiece (``spm:N``).

Both work on already tokenised, space-separated text and are learned on the training split only, so the
validation and test sets never influence the segmentation. A segmenter turns tokens into pieces and back.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import atomic_write, require_file

SUBWORD_KINDS = ("bpe", "bpe-joint", "spm")  # bpe-joint: one set of merges learned on both languages
BPE_SEPARATOR = "@@"


def parse_subword(spec: str) -> tuple[str, int]:
    """``none`` → ("none", 0); ``bpe:N`` / ``bpe-joint:N`` / ``spm:N`` → (kind, N) with N > 0."""
    spec = spec.strip()
    if spec == "none":
        return "none", 0
    kind, _, size = spec.partition(":")
    if kind not in SUBWORD_KINDS or not size.isdigit() or int(size) <= 0:
        raise ConfigError(f"subword = {spec!r}: expected none, bpe:N, bpe-joint:N or spm:N with N a positive integer")
    return kind, int(size)


def subword_filename(kind: str, lang: str) -> str:
    """Where a data directory keeps the learned model for ``lang`` (joint BPE: one file for both)."""
    if kind == "bpe-joint":
        return "bpe.joint.codes"
    return f"bpe.{lang}.codes" if kind == "bpe" else f"spm.{lang}.model"


class Segmenter(Protocol):
    def segment(self, tokens: list[str]) -> list[str]: ...

    def desegment(self, pieces: list[str]) -> list[str]: ...


class BpeSegmenter:
    """subword-nmt codes: non-final pieces end with ``@@``."""

    def __init__(self, codes: str | Path) -> None:
        from subword_nmt.apply_bpe import BPE

        codes = Path(codes)
        said = io.StringIO()  # subword-nmt writes a bad line to stderr and exits
        try:
            if codes.is_file() and codes.stat().st_size == 0:
                raise DataError(f"{codes}: empty (a subword-nmt codes file has a merge per line)")
            with open(codes, encoding="utf-8") as handle, contextlib.redirect_stderr(said):
                self._bpe = BPE(handle, separator=BPE_SEPARATOR)
        except FileNotFoundError:
            raise DataError(f"{codes}: BPE codes not found") from None
        except (UnicodeDecodeError, ValueError, IndexError) as exc:
            raise DataError(f"{codes}: not a subword-nmt codes file ({exc})") from None
        except SystemExit:
            found = re.search(r"invalid line (\d+) in BPE codes file: (.*)", said.getvalue())
            where = f"line {found[1]}: {found[2]!r} is not two subword units" if found else said.getvalue().strip()
            raise DataError(f"{codes}: not a subword-nmt codes file ({where})") from None

    def segment(self, tokens: list[str]) -> list[str]:
        return self._bpe.segment_tokens(tokens)

    def desegment(self, pieces: list[str]) -> list[str]:
        text = " ".join(pieces).replace(f"{BPE_SEPARATOR} ", "")
        return text.removesuffix(BPE_SEPARATOR).split()  # a hypothesis may stop inside a word


class SpmSegmenter:
    """A SentencePiece model; word starts are marked with ``▁``."""

    def __init__(self, model: str | Path) -> None:
        import sentencepiece as spm

        model = Path(model)
        require_file(model, "SentencePiece model")
        try:
            self._sp = spm.SentencePieceProcessor(model_file=str(model))
        except (RuntimeError, OSError) as exc:
            raise DataError(f"{model}: not a SentencePiece model ({' '.join(str(exc).split())})") from None
        if (damage := _spm_damage(self._sp.serialized_model_proto())) is not None:
            raise DataError(f"{model}: a damaged SentencePiece model ({damage}; truncated?)")

    def segment(self, tokens: list[str]) -> list[str]:
        return self._sp.encode(" ".join(tokens), out_type=str) if tokens else []

    def desegment(self, pieces: list[str]) -> list[str]:
        return self._sp.decode_pieces(list(pieces)).split()


def _spm_damage(serialized: bytes) -> str | None:
    """What a model cut short lacks (None: whole). SentencePiece loads a file cut at a piece's end as a smaller
    model, without its trainer and normaliser settings, and segments with it silently; its trainer always writes
    both after the pieces, and as many pieces as ``vocab_size`` under its default hard limit."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]  # (generated, no stubs)
    proto.ParseFromString(serialized)
    missing = [name for name in ("trainer_spec", "normalizer_spec") if not proto.HasField(name)]
    if missing:
        return f"{len(proto.pieces):,} pieces and no {' or '.join(missing)}"
    wanted = proto.trainer_spec.vocab_size
    if proto.trainer_spec.hard_vocab_limit and len(proto.pieces) != wanted:
        return f"{len(proto.pieces):,} pieces of the {wanted:,} it was trained with"
    return None


def load_segmenter(kind: str, path: str | Path) -> Segmenter:
    return BpeSegmenter(path) if kind in ("bpe", "bpe-joint") else SpmSegmenter(path)


def sniff_segmenter(path: str | Path) -> Segmenter:
    """Load a codes file of either kind: SentencePiece models are binary, BPE codes are text."""
    path = Path(path)
    require_file(path, "codes file")
    with open(path, "rb") as handle:
        head = handle.read(64)
    try:
        head.decode("utf-8")
        is_text = b"\x00" not in head
    except UnicodeDecodeError:
        is_text = False
    return BpeSegmenter(path) if is_text else SpmSegmenter(path)


def learn_bpe(lines: Iterable[str], codes_path: str | Path, symbols: int, min_frequency: int = 2) -> None:
    """Learn ``symbols`` merge operations with subword-nmt and write the codes file atomically."""
    from subword_nmt.learn_bpe import learn_bpe as _learn

    text = io.StringIO("".join(f"{line}\n" for line in lines))
    # subword-nmt draws a tqdm progress bar and notes on sys.stderr; keep the CLI's output clean
    try:
        with atomic_write(codes_path) as out, contextlib.redirect_stderr(io.StringIO()):
            _learn(text, out, symbols, min_frequency=min_frequency)
    except ValueError:  # subword-nmt fails on max() of no pairs
        raise DataError(f"cannot learn BPE codes ({codes_path}): no input word has two or more characters") from None


def learn_spm(lines: Iterable[str], model_path: str | Path, vocab_size: int,
              model_type: str = "unigram") -> None:
    """Train a SentencePiece model of (at most) ``vocab_size`` pieces; written atomically to ``model_path``.

    ``hard_vocab_limit=False`` lets a small corpus yield fewer pieces rather than fail; every character of
    the training text is covered so a round trip on training-like text is lossless.
    """
    import sentencepiece as spm

    model_path = Path(model_path)
    model_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".spm-", dir=model_path.parent) as tmp:
        corpus = Path(tmp) / "input.txt"
        with open(corpus, "w", encoding="utf-8") as handle:
            count = 0
            for line in lines:
                handle.write(f"{line}\n")
                count += 1
        if count == 0:
            raise DataError("cannot learn a SentencePiece model from empty input")
        prefix = Path(tmp) / "model"
        try:
            spm.SentencePieceTrainer.train(
                input=str(corpus),
                model_prefix=str(prefix),
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=1.0,
                hard_vocab_limit=False,
                bos_id=-1,
                eos_id=-1,
                num_threads=4,  # fixed, not cpu_count(): the model must not depend on the machine
                minloglevel=2,
            )
        except RuntimeError as exc:
            raise DataError(f"SentencePiece training failed: {' '.join(str(exc).split())}") from None
        os.replace(f"{prefix}.model", model_path)


def learn(kind: str, lines: Iterable[str], path: str | Path, size: int) -> None:
    """Learn a ``kind`` (:data:`SUBWORD_KINDS`) model of ``size`` merges / pieces from tokenised lines."""
    if kind in ("bpe", "bpe-joint"):
        learn_bpe(lines, path, size)
    elif kind == "spm":
        learn_spm(lines, path, size)
    else:
        raise ConfigError(f"unknown subword type {kind!r} (expected one of: {', '.join(SUBWORD_KINDS)})")


__all__ = [
    "BpeSegmenter",
    "Segmenter",
    "SpmSegmenter",
    "learn",
    "learn_bpe",
    "learn_spm",
    "load_segmenter",
    "parse_subword",
    "sniff_segmenter",
    "subword_filename",
]

"""Raw text ↔ model tokens, one :class:`TextPipeline` per language.

``encode`` is what ``prepare`` applies to the corpus and ``translate`` applies to user input, so both see
exactly the same tokenisation; ``decode`` turns model output back into readable text. The options live in
the data directory's ``manifest.json``, and :func:`load_pipeline` rebuilds the pipeline from them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import read_json
from nlgkit.data.moses import IMPORT_LOCK, detokenizer_class
from nlgkit.data.subword import Segmenter, load_segmenter, parse_subword, subword_filename

TOKENIZERS = ("spacy", "moses", "none")


@functools.cache
def spacy_tokenizer(lang: str) -> Any:
    """The rule-based tokenizer of ``spacy.blank(lang)`` (no trained model needed, same rules as one)."""
    import spacy

    try:
        return spacy.blank(lang).tokenizer
    except (ImportError, ValueError, KeyError) as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"language {lang!r}: spaCy has no tokenizer for it ({reason})") from None


@functools.cache
def moses_tokenizer(lang: str) -> Any:
    with IMPORT_LOCK:  # not while nlgkit.data.moses holds the package back
        from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


@functools.cache
def moses_detokenizer(lang: str) -> Any:
    """sacremoses' detokenizer, without compiling its tokenizer's expressions (:mod:`nlgkit.data.moses`)."""
    return detokenizer_class()(lang=lang)


def check_tokenizer(name: str, lang: str, load: bool = True) -> None:
    """Fail early (ConfigError) on an unknown tokenizer or a language it cannot handle (``load``: try loading
    spaCy's rules for ``lang``; without, only names are checked)."""
    if name not in TOKENIZERS:
        raise ConfigError(f"tokenizer = {name!r}: expected one of {', '.join(TOKENIZERS)}")
    if not lang or not lang.isalpha() or not lang.isascii():
        raise ConfigError(f"language {lang!r}: expected a language code such as en or de")
    if name == "spacy" and load:
        spacy_tokenizer(lang)


class TextPipeline:
    """tokenise → lowercase → subword, and back.

    Whitespace tokens (spaCy emits one for a double space or a no-break space) are dropped by default
    because token files join tokens with single spaces; ``tokenize(..., keep_space=True)`` returns them for
    callers that must count exactly what the tokenizer produced.
    """

    def __init__(self, lang: str, tokenizer: str = "spacy", lowercase: bool = True,
                 segmenter: Segmenter | None = None) -> None:
        # spaCy loads on the first line tokenised: detokenising (validation, outputs) never needs it
        check_tokenizer(tokenizer, lang, load=False)
        self.lang = lang
        self.tokenizer = tokenizer
        self.lowercase = lowercase
        self.segmenter = segmenter

    def __repr__(self) -> str:
        sub = type(self.segmenter).__name__ if self.segmenter else "none"
        return (f"TextPipeline({self.lang!r}, tokenizer={self.tokenizer!r}, lowercase={self.lowercase}, "
                f"subword={sub})")

    # -- forward ---------------------------------------------------------------------------------------

    def _words(self, line: str) -> list[str]:
        if self.tokenizer == "spacy":
            return [t.text for t in spacy_tokenizer(self.lang)(line)]
        if self.tokenizer == "moses":
            return moses_tokenizer(self.lang).tokenize(line, escape=False)
        return line.split()

    def _finish(self, words: list[str], keep_space: bool) -> list[str]:
        if not keep_space:
            words = [w for w in words if w and not w.isspace()]
        if self.lowercase:
            words = [w.lower() for w in words]
        return words

    def tokenize(self, line: str, keep_space: bool = False) -> list[str]:
        """Tokenise and lowercase (no subword)."""
        return self._finish(self._words(line.strip()), keep_space)

    def tokenize_many(self, lines: Iterable[str], keep_space: bool = False) -> Iterator[list[str]]:
        """:meth:`tokenize` over many lines; spaCy's ``pipe`` makes this several times faster."""
        if self.tokenizer == "spacy":
            docs = spacy_tokenizer(self.lang).pipe((line.strip() for line in lines), batch_size=1000)
            for doc in docs:
                yield self._finish([t.text for t in doc], keep_space)
        else:
            for line in lines:
                yield self.tokenize(line, keep_space)

    def segment(self, tokens: list[str]) -> list[str]:
        """Split tokens into subword pieces (identity without a subword model)."""
        tokens = [t for t in tokens if t and not t.isspace()]
        return self.segmenter.segment(tokens) if self.segmenter else tokens

    def encode(self, line: str) -> list[str]:
        """Raw text → the tokens a model reads (as written to ``train.{lang}``)."""
        return self.segment(self.tokenize(line))

    # -- backward --------------------------------------------------------------------------------------

    def desegment(self, pieces: list[str]) -> list[str]:
        return self.segmenter.desegment(list(pieces)) if self.segmenter else list(pieces)

    def detokenize(self, tokens: list[str]) -> str:
        if self.tokenizer == "none":
            return " ".join(tokens)
        return moses_detokenizer(self.lang).detokenize(tokens)

    def decode(self, pieces: list[str]) -> str:
        """Model tokens → readable text (undo subword, then detokenise)."""
        return self.detokenize(self.desegment(pieces))


def load_pipeline(data_dir: Path, lang: str) -> TextPipeline:
    """Rebuild the pipeline ``prepare`` used for ``lang`` from ``data_dir/manifest.json``."""

    data_dir = Path(data_dir)
    manifest = read_json(data_dir / "manifest.json")
    where = data_dir / "manifest.json"
    try:
        langs = (manifest["src_lang"], manifest["tgt_lang"])
        tokenizer, lowercase, subword = manifest["tokenizer"], manifest["lowercase"], manifest["subword"]
    except (KeyError, TypeError) as exc:
        raise DataError(f"{where}: missing key {exc}") from None
    if lang not in langs:
        raise DataError(f"{where}: no language {lang!r} in this data directory (only {' and '.join(langs)})")
    kind, _ = parse_subword(subword)
    segmenter = None if kind == "none" else load_segmenter(kind, data_dir / subword_filename(kind, lang))
    return TextPipeline(lang, tokenizer, bool(lowercase), segmenter)

"""IWSLT 2014 German–English (TED talks): the archive fairseq's ``prepare-iwslt14.sh`` uses, as a data directory.

The archive (``de-en.tgz``, from WIT3's 2014-01 release; fairseq keeps a copy since WIT3 went offline) holds
``train.tags.de-en.{de,en}`` — one sentence per line between metadata lines — and the dev/test sets as XML
(``IWSLT14.TED.dev2010.de-en.de.xml``, ...). Here:

* train = ``train.tags`` without its metadata lines (``<url>``, ``<keywords>``, ``<speaker>``, ``<talkid>``,
  ``<title>``, ``<description>``, ``<reviewer>``, ``<translator>`` and any ``<doc>`` line; torchtext's IWSLT
  loader drops the same ones; fairseq's script keeps the text of title and description);
* valid = ``IWSLT14.TED.dev2010``, test = ``IWSLT14.TED.tst2010`` + ``tst2011`` + ``tst2012``
  (the TED test sets of 2010–2012, concatenated); both are the ``<seg>`` texts of the XML files, entities
  decoded, checked to pair up segment by segment. Other sets of the archive can be chosen (fairseq's test
  also takes ``TED.dev2010`` and ``TEDX.dev2012``).

Shalev et al.'s appendix setting is the default: lowercase, spaCy tokens, words seen at least 5 times in
train, training pairs of at most 20 tokens (valid and test are kept whole, so BLEU is on the full sets).
"""

from __future__ import annotations

import hashlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import decode_lines
from nlgkit.data.archives import DEFAULT_CACHE, locate_archive, read_members
from nlgkit.data.prepare import Corpus, build_directory, check_options, staging

DEFAULT_URL = "http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz"  # fairseq's prepare-iwslt14.sh
LANGS = ("de", "en")
VALID_SETS = ("IWSLT14.TED.dev2010",)
TEST_SETS = ("IWSLT14.TED.tst2010", "IWSLT14.TED.tst2011", "IWSLT14.TED.tst2012")
# Lines of train.tags that describe a talk rather than translate it.
METADATA = re.compile(r"^\s*</?\s*(url|keywords|speaker|talkid|title|description|reviewer|translator|doc)\b",
                      re.IGNORECASE)


def prepare_iwslt14(out_dir: Path, src_lang: str = "de", tgt_lang: str = "en", mirror: str = "",
                    cache_dir: Path = DEFAULT_CACHE, tokenizer: str = "spacy", lowercase: bool = True,
                    min_freq: int = 5, max_len: int = 20, subword: str = "none",
                    valid_sets: Sequence[str] = VALID_SETS, test_sets: Sequence[str] = TEST_SETS,
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Download (or find in ``mirror``) the IWSLT 2014 de-en archive and prepare it; return the manifest."""
    if {src_lang, tgt_lang} != set(LANGS):
        raise ConfigError(f"IWSLT 2014 here is German–English: --pair de-en or en-de, not {src_lang}-{tgt_lang}")
    options = check_options(src_lang, tgt_lang, tokenizer, lowercase, min_freq, max_len, subword)
    sets = {"valid": _check_sets(valid_sets, "valid"), "test": _check_sets(test_sets, "test")}
    if set(sets["valid"]) & set(sets["test"]):
        raise ConfigError(f"IWSLT 2014: {', '.join(sorted(set(sets['valid']) & set(sets['test'])))} is both a "
                          f"valid and a test set")
    archive, where = locate_archive(DEFAULT_URL, mirror, cache_dir, log)
    wanted = {f"train.{lang}": f"train.tags.de-en.{lang}" for lang in LANGS}
    wanted |= {f"{name}.{lang}": f"{name}.de-en.{lang}.xml" for names in sets.values() for name in names
               for lang in LANGS}
    raw = read_members(archive, wanted)
    corpus: Corpus = {"train": {lang: train_lines(raw[f"train.{lang}"], f"{archive}:{wanted[f'train.{lang}']}")
                                for lang in LANGS}}
    for split, names in sets.items():
        corpus[split] = {lang: [] for lang in LANGS}
        for name in names:
            sides = {lang: xml_segments(raw[f"{name}.{lang}"], f"{archive}:{wanted[f'{name}.{lang}']}")
                     for lang in LANGS}
            if [key for key, _ in sides["de"]] != [key for key, _ in sides["en"]]:
                raise DataError(f"{archive}: {name}: the German and English segments do not pair up "
                                f"({len(sides['de'])} and {len(sides['en'])} segments)")
            for lang in LANGS:
                corpus[split][lang] += [text for _, text in sides[lang]]
    n_de, n_en = len(corpus["train"]["de"]), len(corpus["train"]["en"])
    if n_de != n_en:
        raise DataError(f"{archive}: train.tags.de-en.de has {n_de} sentences but .en has {n_en} (after "
                        f"dropping metadata lines): the two sides must be aligned")
    inputs = {key: {"path": f"{where}#{member}", "sha256": hashlib.sha256(raw[key]).hexdigest()}
              for key, member in wanted.items()}
    extra = {"iwslt14": {"archive": where, "train": "train.tags.de-en", "valid": list(sets["valid"]),
                         "test": list(sets["test"])}}
    with staging(Path(out_dir)) as tmp:
        return build_directory(tmp, corpus, "iwslt14", where, inputs, src_lang, tgt_lang, options, extra=extra)


def _check_sets(names: Sequence[str], split: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in names if name.strip())
    if not names:
        raise ConfigError(f"IWSLT 2014 {split} sets: name at least one (e.g. {VALID_SETS[0]})")
    for name in names:
        if not re.fullmatch(r"IWSLT14\.TEDX?\.(dev|tst)20\d\d", name):
            raise ConfigError(f"IWSLT 2014 {split} set {name!r}: expected a name such as IWSLT14.TED.tst2010")
    return names


def train_lines(raw: bytes, name: str) -> list[str]:
    """``train.tags`` → its sentences: every metadata line dropped, the rest stripped (empty lines kept, so the
    two sides stay aligned; ``prepare`` drops empty pairs)."""
    return [line.strip() for line in decode_lines(raw, name) if not METADATA.match(line)]


def xml_segments(raw: bytes, name: str) -> list[tuple[tuple[str, str], str]]:
    """The ``<seg>`` texts of an IWSLT XML file, each keyed by (document id, segment id), in file order."""
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as exc:
        raise DataError(f"{name}: not valid XML ({exc})") from None
    segments = []
    for number, doc in enumerate(root.iter("doc")):
        doc_id = doc.get("docid", str(number))
        for seg in doc.iter("seg"):
            # whitespace collapsed (as sacreBLEU reads them): a line break inside a segment would split its reference
            segments.append(((doc_id, seg.get("id", "")), " ".join("".join(seg.itertext()).split())))
    if not segments:
        raise DataError(f"{name}: no <doc> with <seg> elements")
    return segments

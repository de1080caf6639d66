"""WMT-14 English–German: the standard training corpora, newstest2013 (valid), newstest2014 (test), joint BPE.

The training data is the WMT-14 constrained set that Gehring et al.'s ConvS2S (and fairseq's
``prepare-wmt14en2de.sh --icml17``) use: Europarl v7, Common Crawl and News Commentary v9. Valid is
newstest2013 (plain text from WMT's ``dev.tgz``), test the full newstest2014 (the ``<seg>`` texts of
``test-full.tgz``'s SGML, read as sacreBLEU reads them).

The corpus is too large to hold in memory as tokens, so this is a streaming pipeline, not
:func:`nlgkit.data.prepare.build_directory`'s: pass 1 tokenises the training text into scratch files while
counting words; one BPE model (subword-nmt, ``bpe`` merges, the paper's 32k by default) is learned from the
word counts of both languages; pass 2 segments the pairs, drops empty ones, ones longer than ``max_len``
pieces and ones whose lengths differ by more than ``max_ratio`` (fairseq's ``clean-corpus-n.perl -ratio 1.5
1 250``), writes them and counts each side's pieces. The vocabulary is joint (one list for both languages, its
ids ordered by both sides' counts together), as in fairseq's ``--joined-dictionary``; it is written as
``vocab.en.txt`` and ``vocab.de.txt``, each with that language's counts (a piece only the other side has counts
0), so that an analysis ranking the target's words by training frequency (Shalev et al.'s Fig. 2) counts the
target side only. ``workers`` processes tokenise and segment chunks in order, so the output does not depend on
their number.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import itertools
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from nlgkit import __version__
from nlgkit.core.errors import ConfigError, DataError
from nlgkit.core.io import atomic_write, decode_lines, sha256_file, write_json
from nlgkit.data.archives import DEFAULT_CACHE, extract_members, locate_archive, read_members
from nlgkit.data.prepare import MANIFEST_FORMAT, check_options, staging
from nlgkit.data.subword import BpeSegmenter, subword_filename
from nlgkit.data.tokenize import TextPipeline
from nlgkit.data.vocab import SPECIALS, Vocabulary
from nlgkit.data.word_counts import SIDE_COUNTS

ARCHIVES = {  # the public URLs of fairseq's prepare-wmt14en2de.sh --icml17
    "europarl": "http://statmt.org/wmt13/training-parallel-europarl-v7.tgz",
    "commoncrawl": "http://statmt.org/wmt13/training-parallel-commoncrawl.tgz",
    "news-commentary": "http://statmt.org/wmt14/training-parallel-nc-v9.tgz",
    "dev": "http://data.statmt.org/wmt17/translation-task/dev.tgz",
    "test": "http://statmt.org/wmt14/test-full.tgz",
}
TRAIN_CORPORA = (("europarl", "europarl-v7.de-en"), ("commoncrawl", "commoncrawl.de-en"),
                 ("news-commentary", "news-commentary-v9.de-en"))
VALID_SET, TEST_SET = "newstest2013", "newstest2014"
LANGS = ("en", "de")
CHUNK_LINES = 10_000
SEG = re.compile(r"<seg[^>]*>(.*)</seg>")

T = TypeVar("T")
R = TypeVar("R")


def prepare_wmt14(out_dir: Path, src_lang: str = "en", tgt_lang: str = "de", mirror: str = "",
                  cache_dir: Path = DEFAULT_CACHE, tokenizer: str = "moses", lowercase: bool = False,
                  bpe: int = 32_000, min_freq: int = 1, max_len: int = 250, max_ratio: float = 1.5,
                  workers: int = 1, log: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Download (or find in ``mirror``) WMT-14 en-de and prepare it; return the manifest."""
    if {src_lang, tgt_lang} != set(LANGS):
        raise ConfigError(f"WMT-14 here is English–German: --pair en-de or de-en, not {src_lang}-{tgt_lang}")
    if isinstance(bpe, bool) or not isinstance(bpe, int) or bpe < 1:
        raise ConfigError(f"bpe = {bpe!r}: the number of BPE merges must be a positive integer")
    if not max_ratio >= 0:
        raise ConfigError(f"max_ratio = {max_ratio!r}: must be 0 (no limit) or positive")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers = {workers!r}: must be a positive integer")
    options = check_options(src_lang, tgt_lang, tokenizer, lowercase, min_freq, max_len, f"bpe-joint:{bpe}")
    archives = {key: locate_archive(url, mirror, cache_dir, log) for key, url in ARCHIVES.items()}
    inputs = {key: {"path": where, "sha256": sha256_file(path)} for key, (path, where) in archives.items()}
    with staging(Path(out_dir)) as tmp:
        scratch = tmp / "scratch"
        stats: dict[str, Any] = {"invalid_utf8_lines": 0, "train_raw": {}}
        tokenised = _tokenise_train(archives, scratch, options, workers, stats, log)
        codes = tmp / subword_filename("bpe-joint", src_lang)
        log(f"learning {bpe:,} BPE merges on both languages")
        learn_bpe_from_counts(stats.pop("word_counts"), codes, bpe)
        pieces: dict[str, Counter[str]] = {lang: Counter() for lang in LANGS}
        kept, dropped = _segment_train(tokenised, codes, tmp, options, max_ratio, workers, pieces)
        shutil.rmtree(scratch)
        if not kept:
            raise DataError(f"no training pairs left after filtering (max_len = {max_len}, max_ratio = {max_ratio})")
        lines = {"train": kept, **_write_eval_sets(archives, codes, tmp, options)}
        vocabs = side_vocabularies(pieces, min_freq)
        for lang, vocab in vocabs.items():
            vocab.save(tmp / f"vocab.{lang}.txt")
        files = {p.relative_to(tmp).as_posix(): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest: dict[str, Any] = {
            "format": MANIFEST_FORMAT, "nlgkit_version": __version__, "corpus": "wmt14",
            "source": mirror or "public URLs", "src_lang": src_lang, "tgt_lang": tgt_lang, **options,
            "max_ratio": max_ratio, "joint_vocab": True, "vocab_counts": SIDE_COUNTS, "lines": lines,
            "train_dropped": dropped,
            "vocab_size": {lang: len(vocabs[lang]) for lang in (src_lang, tgt_lang)},
            "subword_files": {lang: codes.name for lang in LANGS}, "inputs": inputs, "files": files,
            "wmt14": {"train": [name for _, name in TRAIN_CORPORA], "valid": VALID_SET, "test": TEST_SET, **stats},
        }
        write_json(tmp / "manifest.json", manifest)
        return manifest


# -- pass 1: tokenise ----------------------------------------------------------------------------------------


def _tokenise_train(archives: dict[str, tuple[Path, str]], scratch: Path, options: dict[str, Any], workers: int,
                    stats: dict[str, Any], log: Callable[[str], None]) -> dict[str, Path]:
    """Tokenise every training corpus into ``scratch/train.tok.{lang}``; the word counts go to ``stats``."""
    out = {lang: scratch / f"train.tok.{lang}" for lang in LANGS}
    words: Counter[str] = Counter()
    scratch.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        handles = {lang: stack.enter_context(open(out[lang], "w", encoding="utf-8", newline="\n")) for lang in LANGS}
        for key, name in TRAIN_CORPORA:
            archive = archives[key][0]
            log(f"tokenising {name} ({archive.name})")
            raw = extract_members(archive, {lang: f"{name}.{lang}" for lang in LANGS}, scratch / key)
            jobs = ((options["tokenizer"], options["lowercase"], chunk)
                    for chunk in _chunks(_aligned(raw, f"{archive}: {name}", stats)))
            count = 0
            for chunk in ordered_map(_tokenise_chunk, jobs, workers):
                for lang in LANGS:
                    for line in chunk[lang]:
                        words.update(line.split())
                    handles[lang].writelines(f"{line}\n" for line in chunk[lang])
                count += len(chunk[LANGS[0]])
            stats["train_raw"][name] = count
            shutil.rmtree(scratch / key)
    stats["word_counts"] = words
    return out


def _aligned(files: dict[str, Path], name: str, stats: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The lines of both sides in step (UTF-8; a bad byte becomes U+FFFD and is counted, keeping the pairs)."""
    with open(files["en"], "rb") as en, open(files["de"], "rb") as de:
        for number, (line_en, line_de) in enumerate(itertools.zip_longest(en, de), start=1):
            if line_en is None or line_de is None:
                longer = "de" if line_en is None else "en"
                raise DataError(f"{name}: the .{longer} side has more lines than the other (which ends at line "
                                f"{number - 1}); the two sides must be aligned")
            yield {"en": _decode(line_en, stats), "de": _decode(line_de, stats)}


def _decode(line: bytes, stats: dict[str, Any]) -> str:
    try:
        return line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        stats["invalid_utf8_lines"] += 1
        return line.decode("utf-8", errors="replace").rstrip("\r\n")


def _chunks(pairs: Iterable[dict[str, str]]) -> Iterator[dict[str, list[str]]]:
    chunk: dict[str, list[str]] = {lang: [] for lang in LANGS}
    for pair in pairs:
        for lang in LANGS:
            chunk[lang].append(pair[lang])
        if len(chunk[LANGS[0]]) == CHUNK_LINES:
            yield chunk
            chunk = {lang: [] for lang in LANGS}
    if chunk[LANGS[0]]:
        yield chunk


def _tokenise_chunk(job: tuple[str, bool, dict[str, list[str]]]) -> dict[str, list[str]]:
    """(tokenizer, lowercase, lines per language) → tokens joined by spaces (runs in a worker)."""
    tokenizer, lowercase, chunk = job
    out = {}
    for lang, lines in chunk.items():
        pipeline = TextPipeline(lang, tokenizer, lowercase)
        out[lang] = [" ".join(tokens) for tokens in pipeline.tokenize_many(lines)]
    return out


def ordered_map(fn: Callable[[T], R], jobs: Iterable[T], workers: int) -> Iterator[R]:
    """``map(fn, jobs)`` over ``workers`` processes, in order, with a bounded number of jobs in flight (so a
    corpus is never read into memory ahead of the writer)."""
    if workers <= 1:
        yield from map(fn, jobs)
        return
    with ProcessPoolExecutor(workers) as pool:
        pending: collections.deque[Future[R]] = collections.deque()
        for job in jobs:
            pending.append(pool.submit(fn, job))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


# -- BPE, pass 2: segment and filter -------------------------------------------------------------------------


def learn_bpe_from_counts(counts: Counter[str], codes: Path, merges: int) -> None:
    """subword-nmt merges learned from word counts (its ``--dict-input``), written atomically."""
    from subword_nmt.learn_bpe import learn_bpe

    if not counts:
        raise DataError("cannot learn BPE: the training text has no words")
    words = io.StringIO("".join(f"{word} {count}\n" for word, count in sorted(counts.items())))
    with atomic_write(codes) as out, contextlib.redirect_stderr(io.StringIO()):  # its progress notes
        learn_bpe(words, out, merges, min_frequency=2, is_dict=True)


@functools.cache
def _segmenter(codes: str) -> BpeSegmenter:
    return BpeSegmenter(codes)


def _segment_chunk(job: tuple[str, dict[str, list[str]]]) -> dict[str, list[list[str]]]:
    """(codes file, tokenised lines per language) → BPE pieces (runs in a worker)."""
    codes, chunk = job
    segmenter = _segmenter(codes)
    return {lang: [segmenter.segment(line.split()) for line in lines] for lang, lines in chunk.items()}


def keep_pair(n_src: int, n_tgt: int, max_len: int, max_ratio: float) -> bool:
    """clean-corpus-n.perl's test: both sides non-empty, at most ``max_len`` long, length ratio ≤ ``max_ratio``
    (0 turns a limit off)."""
    if min(n_src, n_tgt) == 0 or (max_len and max(n_src, n_tgt) > max_len):
        return False
    return not max_ratio or max(n_src, n_tgt) / min(n_src, n_tgt) <= max_ratio


def _segment_train(tokenised: dict[str, Path], codes: Path, out: Path, options: dict[str, Any], max_ratio: float,
                   workers: int, pieces: dict[str, Counter[str]]) -> tuple[int, int]:
    """Write the kept training pairs as BPE pieces; count each side's pieces; return (kept, dropped)."""
    kept = dropped = 0
    with contextlib.ExitStack() as stack:
        handles = {lang: stack.enter_context(open(out / f"train.{lang}", "w", encoding="utf-8", newline="\n"))
                   for lang in LANGS}
        en, de = (stack.enter_context(open(tokenised[lang], encoding="utf-8")) for lang in ("en", "de"))
        pairs = ({"en": line_en.rstrip("\n"), "de": line_de.rstrip("\n")} for line_en, line_de in zip(en, de))
        jobs = ((str(codes), chunk) for chunk in _chunks(pairs))
        for chunk in ordered_map(_segment_chunk, jobs, workers):
            for en_pieces, de_pieces in zip(chunk["en"], chunk["de"], strict=True):
                if not keep_pair(len(en_pieces), len(de_pieces), options["max_len"], max_ratio):
                    dropped += 1
                    continue
                kept += 1
                for lang, line in (("en", en_pieces), ("de", de_pieces)):
                    pieces[lang].update(line)
                    handles[lang].write(" ".join(line) + "\n")
    return kept, dropped


def side_vocabularies(pieces: dict[str, Counter[str]], min_freq: int) -> dict[str, Vocabulary]:
    """The joint vocabulary once per language: its entries and ids from both sides' counts together (kept at
    ``min_freq`` of those), each copy with one side's counts (0 for a piece only the other side has)."""
    both: Counter[str] = Counter()
    for counts in pieces.values():
        both.update(counts)
    joint = Vocabulary.build(both, min_freq)
    words = joint.tokens[len(SPECIALS):]
    return {lang: Vocabulary(joint.tokens, [0] * len(SPECIALS) + [counts[word] for word in words])
            for lang, counts in pieces.items()}


# -- valid and test ------------------------------------------------------------------------------------------


def sgm_segments(raw: bytes, name: str) -> list[str]:
    """The ``<seg>`` texts of a WMT SGML file, whitespace collapsed (as sacreBLEU reads them)."""
    segments = [" ".join(match.group(1).split()) for line in decode_lines(raw, name)
                if (match := SEG.search(line))]
    if not segments:
        raise DataError(f"{name}: no <seg> lines")
    return segments


def _write_eval_sets(archives: dict[str, tuple[Path, str]], codes: Path, out: Path,
                     options: dict[str, Any]) -> dict[str, int]:
    """valid (newstest2013) and test (newstest2014): BPE pieces and the raw references; return line counts."""
    dev, test = archives["dev"][0], archives["test"][0]
    dev_raw = read_members(dev, {lang: f"{VALID_SET}.{lang}" for lang in LANGS})
    # newstest2014's en-de sides: the "src" file of the source language, the "ref" file of the target (fairseq)
    test_names = {lang: f"{TEST_SET}-deen-{'src' if lang == 'en' else 'ref'}.{lang}.sgm" for lang in LANGS}
    test_raw = read_members(test, test_names)
    sides = {"valid": {lang: decode_lines(dev_raw[lang], f"{dev}:{VALID_SET}.{lang}") for lang in LANGS},
             "test": {lang: sgm_segments(test_raw[lang], f"{test}:{test_names[lang]}") for lang in LANGS}}
    counts = {}
    for split, by_lang in sides.items():
        if len(by_lang["en"]) != len(by_lang["de"]):
            raise DataError(f"{split} ({VALID_SET if split == 'valid' else TEST_SET}): {len(by_lang['en'])} English "
                            f"but {len(by_lang['de'])} German sentences")
        for lang, lines in by_lang.items():
            pipeline = TextPipeline(lang, options["tokenizer"], options["lowercase"], _segmenter(str(codes)))
            refs = [line.strip().lower() if options["lowercase"] else line.strip() for line in lines]
            _write(out / f"{split}.{lang}", (" ".join(pipeline.encode(line)) for line in lines))
            _write(out / f"{split}.ref.{lang}", refs)
        counts[split] = len(by_lang["en"])
    return counts


def _write(path: Path, lines: Iterable[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(f"{line}\n" for line in lines)

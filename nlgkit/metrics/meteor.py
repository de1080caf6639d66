"""METEOR 1.5 through the jar that pycocoevalcap ships, for captions and for translations into any language.

pycocoevalcap's ``Meteor`` hard-codes ``-l en`` and starts java inside its own package directory. Here the
same jar is started by absolute path from a temporary working directory, so nothing can be written next to
a (possibly read-only) install, and its stdio protocol is pycocoevalcap's own ``compute_score``.

The options per target language follow what the shipped jar really contains (``unzip -l``, and the jar's
own messages): Snowball stemmers for da de en es fi fr hu it nl no pt ro ru sv tr (none for Czech), WordNet
synonyms for English only, and — in pycocoevalcap's copy — only the English paraphrase table
(``data/paraphrase-en.gz``); another language's table is used only if one is found next to the jar.
Meteor's own tokeniser (``-norm``) exists for en cz de es fr ru; other languages are tokenised with
sacrebleu's 13a tokeniser and lowercased (``-lower``), as Meteor's README asks for them.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Self

from pycocoevalcap.meteor import meteor as _coco_meteor

from nlgkit.core.errors import ConfigError, NlgkitError

METEOR_JAR = Path(_coco_meteor.__file__).resolve().parent / _coco_meteor.METEOR_JAR
# Meteor's codes; ``cs`` is accepted for Czech.
NORM_LANGS = ("en", "cz", "de", "es", "fr", "ru")  # -norm works; Meteor ships tuned "rank" parameters
RANK_LANGS = ("en", "cz", "de", "es", "fr")  # the rest use Meteor's language-independent parameters
LI_LANGS = ("da", "fi", "hu", "it", "nl", "no", "pt", "ro", "sv", "tr")  # -norm refused by Meteor
STEM_LANGS = ("da", "de", "en", "es", "fi", "fr", "hu", "it", "nl", "no", "pt", "ro", "ru", "sv", "tr")
PARAPHRASE_LANGS = ("en", "cz", "de", "es", "fr", "ru")  # Meteor's default modules include paraphrase
ALIASES = {"cs": "cz", "se": "sv"}


def java_missing() -> str | None:
    """Why java-based metrics cannot run here, or None when a ``java`` executable is on PATH."""
    if shutil.which("java") is None:
        return "no 'java' executable on PATH (METEOR 1.5 and the Stanford PTB tokenizer are Java programs)"
    return None


@dataclass(frozen=True)
class MeteorVariant:
    """Which METEOR is computed for a language: reported next to every score, since they differ."""

    lang: str
    modules: tuple[str, ...]
    norm: bool  # Meteor's tokeniser + lowercasing; otherwise 13a tokens + lowercasing
    params: str  # "rank" (tuned per language) or "li" (language-independent)
    default_modules: bool  # modules are Meteor's own default for the language (no -m given)

    def options(self) -> list[str]:
        """Command-line options for ``meteor-1.5.jar - - -stdio``."""
        options = ["-l", self.lang, "-norm" if self.norm else "-lower"]
        if not self.default_modules:
            options += ["-m", " ".join(self.modules)]
        return options

    def signature(self) -> str:
        tokenizer = "meteor-norm" if self.norm else "13a+lower"
        return f"METEOR 1.5|lang:{self.lang}|modules:{'+'.join(self.modules)}|params:{self.params}|tok:{tokenizer}"


def meteor_variant(lang: str) -> MeteorVariant:
    """The best METEOR the shipped jar supports for ``lang`` (ISO 639-1 code; unknown codes: exact only)."""
    code = ALIASES.get(lang.lower(), lang.lower())
    if not code.isalpha():
        raise ConfigError(f"METEOR language {lang!r}: expected a language code such as en, de or fr")
    modules = ["exact"]
    if code in STEM_LANGS:
        modules.append("stem")
    if code == "en":
        modules.append("synonym")
    if code in PARAPHRASE_LANGS and (METEOR_JAR.parent / "data" / f"paraphrase-{code}.gz").is_file():
        modules.append("paraphrase")
    known = code in NORM_LANGS or code in LI_LANGS
    default = tuple(modules) == _meteor_default_modules(code)
    return MeteorVariant(
        lang=code if known else "other",
        modules=tuple(modules),
        norm=code in NORM_LANGS,
        params="rank" if code in RANK_LANGS else "li",
        default_modules=default,
    )


def _meteor_default_modules(code: str) -> tuple[str, ...]:
    """What Meteor 1.5 itself loads for a language without ``-m`` (printed by the jar in file mode)."""
    if code == "en":
        return ("exact", "stem", "synonym", "paraphrase")
    if code == "cz":
        return ("exact", "paraphrase")
    if code in PARAPHRASE_LANGS:
        return ("exact", "stem", "paraphrase")
    return ("exact", "stem") if code in LI_LANGS else ("exact",)


class _MeteorProcess(_coco_meteor.Meteor):
    """pycocoevalcap's Meteor (its ``compute_score`` protocol) with our command line and working directory."""

    def __init__(self, options: list[str], workdir: str, stderr: IO[bytes]) -> None:  # no super(): -l en
        self.meteor_cmd = ["java", "-jar", "-Xmx2G", str(METEOR_JAR), "-", "-", "-stdio", *options]
        self._stderr = stderr
        self.meteor_p = subprocess.Popen(
            self.meteor_cmd, cwd=workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self.lock = threading.Lock()

    def error_text(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "no message"

    def close(self) -> None:
        if self.meteor_p.stdin is not None:
            self.meteor_p.stdin.close()
        self.meteor_p.kill()
        self.meteor_p.wait()

    def __del__(self) -> None:
        """Nothing: :meth:`close` is called explicitly. (The parent's ``__del__`` takes the lock, which a
        failed ``compute_score`` leaves held, and would hang at garbage collection.)"""


def _clean(text: str) -> str:
    """``|||`` separates fields in Meteor's protocol: drop it from every segment (pycocoevalcap does for hyps)."""
    return " ".join(text.replace("|||", " ").split())


class MeteorSession:
    """METEOR jar processes kept open for several systems, one per variant.

    The jar's JIT warms up on the first thousand segments (1.8 s there, 0.5 s for each later system of a
    thousand lines on an AMD EPYC): a report that scores thirty systems pays the warm-up once. Each system is
    its own ``EVAL``, aggregated from its own segments' statistics, so its score is the one a fresh process gives.
    """

    def __init__(self) -> None:
        self._open: dict[MeteorVariant, _MeteorProcess] = {}
        self._resources = ExitStack()  # the jars, their stderr files and working directories, closed in reverse

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every jar and remove their working directories."""
        self._open.clear()
        self._resources.close()

    def _process(self, variant: MeteorVariant) -> _MeteorProcess:
        if variant not in self._open:
            workdir = self._resources.enter_context(tempfile.TemporaryDirectory(prefix="nlgkit-meteor-"))
            stderr = self._resources.enter_context(tempfile.TemporaryFile(dir=workdir))  # noqa: SIM115 (the stack)
            self._open[variant] = _MeteorProcess(variant.options(), workdir, stderr)
            self._resources.callback(self._open[variant].close)
        return self._open[variant]

    def score(
        self, hyps: Sequence[str], refs: Sequence[Sequence[str]], variant: MeteorVariant
    ) -> tuple[float, list[float]]:
        """Corpus METEOR (0–1, from the jar's aggregated statistics) and segment scores; ``refs[i]`` are the
        references of ``hyps[i]`` (METEOR keeps the best-matching one)."""
        if len(hyps) != len(refs):
            raise ValueError("hyps and refs differ in length")
        if any(not segment_refs for segment_refs in refs):
            raise ValueError("every segment needs at least one reference")
        if not variant.norm:
            from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

            tokenize = Tokenizer13a()
            hyps = [tokenize(line) for line in hyps]
            refs = [[tokenize(line) for line in segment_refs] for segment_refs in refs]
        gts = {i: [_clean(ref) for ref in segment_refs] for i, segment_refs in enumerate(refs)}
        res = {i: [_clean(hyp)] for i, hyp in enumerate(hyps)}
        process = self._process(variant)
        try:
            score, scores = process.compute_score(gts, res)
        except (ValueError, BrokenPipeError) as exc:  # java died: stdout ended or stdin closed
            message = f"METEOR failed: {process.error_text()} ({exc})"
            self.close()  # the failed jar's protocol lock stays held: no later system may reuse it
            raise NlgkitError(message) from None
        return float(score), [float(value) for value in scores]


def run_meteor(
    hyps: Sequence[str], refs: Sequence[Sequence[str]], variant: MeteorVariant
) -> tuple[float, list[float]]:
    """:meth:`MeteorSession.score` in a jar of its own."""
    with MeteorSession() as session:
        return session.score(hyps, refs, variant)


def meteor_score(
    hyps: Sequence[str], ref_streams: Sequence[Sequence[str]], lang: str = "en", session: MeteorSession | None = None
) -> dict[str, Any]:
    """METEOR of a translation, as ``{"available", "score" (×100), "signature"}`` or with a ``reason``; in
    ``session``'s jar when one is given (several systems), else in one of its own."""
    variant = meteor_variant(lang)
    missing = java_missing()
    if missing:
        return {"available": False, "reason": missing, "signature": variant.signature()}
    refs = [list(segment_refs) for segment_refs in zip(*ref_streams, strict=True)]
    score, _ = session.score(hyps, refs, variant) if session else run_meteor(hyps, refs, variant)
    return {"available": True, "score": 100.0 * score, "signature": variant.signature()}

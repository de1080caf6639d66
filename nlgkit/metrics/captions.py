"""Captioning scores as the COCO caption evaluation computes them: BLEU-1..4, METEOR, ROUGE-L and CIDEr-D.

Every score comes from pycocoevalcap's own scorers on text tokenised by its Stanford PTB tokenizer
(lowercased, punctuation dropped), as its ``COCOEvalCap`` does, and is reported ×100 as captioning papers
do (Shalev et al., Table 1). pycocoevalcap's ``PTBTokenizer`` writes its input file into its own package
directory, which fails on a read-only install; so the same jar, class, flags and punctuation list are run
here on a file in a temporary directory (the output is identical; the tests check it).

Without java, METEOR is reported unavailable and BLEU, ROUGE-L and CIDEr are computed on a documented
fallback tokenisation (lowercase; tokens are runs of letters/digits, possibly joined by hyphens; all other
characters are separators), labelled in the output: those numbers are not comparable with PTB-based ones.
SPICE is never computed: it needs Stanford CoreNLP 3.6.0 and its models, which pycocoevalcap downloads on
first use (into its package directory); nlgkit works offline and does not fake it.
"""

from __future__ import annotations

import copy
import importlib.metadata
import re
import subprocess
import tempfile
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.tokenizer import ptbtokenizer as _ptb

from nlgkit.core.errors import DataError, NlgkitError
from nlgkit.metrics.meteor import METEOR_JAR, MeteorSession, java_missing, meteor_variant, run_meteor

PTB_JAR = Path(_ptb.__file__).resolve().parent / _ptb.STANFORD_CORENLP_3_4_1_JAR
CAPTION_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "SPICE")
FALLBACK_TOKENIZER = "fallback: lowercase, tokens = \\w+(-\\w+)*, punctuation dropped"
_WORD = re.compile(r"\w+(?:-\w+)*")
# The scores of the last few inputs scored in this process: a table scored again (a report and its record, the
# same captions under another layout) costs no second PTB and METEOR run (8 s of paraphrase table per jar). The
# scores are a function of the captions, references, ``meteor`` and whether java is there; callers get copies.
_RECENT: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_RECENT_SIZE = 8


def _coco_version() -> str:
    try:
        return importlib.metadata.version("pycocoevalcap")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def segment_refs(ref_streams: Sequence[Sequence[str]]) -> list[list[str]]:
    """Reference streams (one file per reference) → the references of each segment, blank ones dropped
    (an image with fewer captions leaves a blank line in the later streams)."""
    per_segment = [[ref for ref in refs if ref.strip()] for refs in zip(*ref_streams, strict=True)]
    for number, refs in enumerate(per_segment, start=1):
        if not refs:
            raise DataError(f"segment {number}: every reference is empty")
    return per_segment


def ptb_tokenize(texts: Sequence[str]) -> list[str]:
    """pycocoevalcap's PTB tokenisation of each text, without writing inside its package directory."""
    keep = [i for i, text in enumerate(texts) if text.strip()]
    out = [""] * len(texts)
    if not keep:
        return out
    # str.split() also removes the line separators java would honour (\u2028, \x0b, \x85, …)
    sentences = "\n".join(" ".join(texts[i].split()) for i in keep)
    command = ["java", "-cp", str(PTB_JAR), "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines"]
    with tempfile.TemporaryDirectory(prefix="nlgkit-ptb-") as workdir:
        (Path(workdir) / "captions.txt").write_bytes(sentences.encode("utf-8"))
        done = subprocess.run(
            [*command, "-lowerCase", "captions.txt"], cwd=workdir, capture_output=True, check=False
        )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"]
        raise NlgkitError(f"PTB tokenizer failed: {message[-1]}")
    lines = done.stdout.decode("utf-8").split("\n")
    if len(lines) < len(keep) or any(line.strip() for line in lines[len(keep) :]):
        raise NlgkitError(f"PTB tokenizer returned {len(lines)} lines for {len(keep)} texts")
    for i, line in zip(keep, lines, strict=False):
        out[i] = " ".join(word for word in line.rstrip().split(" ") if word not in _ptb.PUNCTUATIONS)
    return out


def fallback_tokenize(texts: Sequence[str]) -> list[str]:
    """The no-java tokenisation (see the module docstring); used only when java is missing."""
    return [" ".join(_WORD.findall(text.lower())) for text in texts]


def spice_unavailable() -> dict[str, Any]:
    """SPICE's entry: never computed here, with the reason."""
    corenlp = METEOR_JAR.parents[1] / "spice" / "lib" / "stanford-corenlp-3.6.0.jar"
    if corenlp.is_file():
        reason = "not run by nlgkit: pycocoevalcap's SPICE writes caches into its package directory"
    else:
        reason = (
            "SPICE needs Stanford CoreNLP 3.6.0 and its models (spice/lib/stanford-corenlp-3.6.0*.jar), which "
            "pycocoevalcap downloads from nlp.stanford.edu on first use; nlgkit works offline"
        )
    return {"available": False, "reason": reason}


def caption_scores(hyps: Sequence[str], refs: Sequence[Sequence[str]], meteor: bool = True,
                   session: MeteorSession | None = None) -> dict[str, Any]:
    """Score one caption per image (``hyps[i]``) against that image's captions (``refs[i]``).

    ``meteor=False`` leaves out METEOR (a Java run of several seconds): validation during training does. A
    ``session`` scores it in a jar already open: English METEOR loads its paraphrase table for 8 s at start.

    Returns ``{"tokenizer": …, "scores": {name: {"available", "score" (×100), "signature"} or
    {"available": False, "reason"}}}`` with the names of :data:`CAPTION_METRICS`.
    """
    if len(hyps) != len(refs):
        raise DataError(f"{len(hyps)} captions but references for {len(refs)} images")
    if not hyps:
        raise DataError("no captions to score")
    if any(not image_refs for image_refs in refs):
        raise DataError("every image needs at least one reference caption")
    missing = java_missing()
    key = (tuple(hyps), tuple(tuple(image_refs) for image_refs in refs), meteor, missing)
    if key not in _RECENT:
        _RECENT[key] = _caption_scores(hyps, refs, meteor, session, missing)
        while len(_RECENT) > _RECENT_SIZE:
            _RECENT.popitem(last=False)
    _RECENT.move_to_end(key)
    return copy.deepcopy(_RECENT[key])


def _caption_scores(hyps: Sequence[str], refs: Sequence[Sequence[str]], meteor: bool,
                    session: MeteorSession | None, missing: str | None) -> dict[str, Any]:
    if missing:
        tokenizer = f"{FALLBACK_TOKENIZER} ({missing})"
    else:
        tokenizer = "PTB (Stanford CoreNLP 3.4.1), lowercase, punctuation dropped"
    texts = list(hyps) + [ref for image_refs in refs for ref in image_refs]
    tokens = fallback_tokenize(texts) if missing else ptb_tokenize(texts)
    res = {i: [tokens[i]] for i in range(len(hyps))}
    gts, offset = {}, len(hyps)
    for i, image_refs in enumerate(refs):
        gts[i] = tokens[offset : offset + len(image_refs)]
        offset += len(image_refs)

    tok = "fallback" if missing else "ptb"
    coco = f"pycocoevalcap {_coco_version()}"
    scores: dict[str, dict[str, Any]] = {}
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    for n, value in enumerate(bleu, start=1):
        scores[f"BLEU-{n}"] = _entry(value, f"{coco} BLEU-{n}|ref-len:closest|tok:{tok}")
    if missing or not meteor:
        scores["METEOR"] = {"available": False, "reason": missing or "not requested"}
    else:
        variant = meteor_variant("en")
        hyp_tokens, ref_tokens = [res[i][0] for i in res], [gts[i] for i in res]
        meteor_score, _ = (session.score(hyp_tokens, ref_tokens, variant) if session
                           else run_meteor(hyp_tokens, ref_tokens, variant))
        scores["METEOR"] = _entry(meteor_score, f"{coco} {variant.signature()}|pre-tok:{tok}")
    rouge, _ = Rouge().compute_score(gts, res)
    scores["ROUGE-L"] = _entry(rouge, f"{coco} ROUGE-L|beta:1.2|tok:{tok}")
    cider, per_image = Cider().compute_score(gts, res)
    scores["CIDEr"] = _entry(cider, f"{coco} CIDEr-D|n:4|sigma:6|idf:these refs|tok:{tok}")
    scores["SPICE"] = spice_unavailable()
    # CIDEr-D of the corpus is the mean of these (×100), so resampling them tests it exactly
    return {"tokenizer": tokenizer, "scores": scores, "per_image_cider": [100.0 * float(v) for v in per_image]}


def _entry(value: float, signature: str) -> dict[str, Any]:
    return {"available": True, "score": 100.0 * float(value), "signature": signature}

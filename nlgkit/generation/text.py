"""A translation hypothesis as its output text, the same for both engines (``translate --engine torch|ct2``) and
for ``nlgkit serve``.

Tokens become words through the target vocabulary; with ``--replace-unk`` each ``<unk>`` is replaced through the
hypothesis's alignment (:class:`nlgkit.generation.unknowns.UnknownReplacement`); subwords are undone and the words
detokenised unless told not to; with ``--report-align`` each line ends in `` ||| SRC-TGT`` pairs (OpenNMT's
``-report_align``, fast_align's format) and with ``--token-scores`` in its tokens' log-scores, both of which index
the tokens of ``--no-detokenize`` output; with ``--json`` a line is one JSON record holding them all (the answer of
``nlgkit serve``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nlgkit.core.errors import DataError
from nlgkit.data.vocab import Vocabulary
from nlgkit.generation.output import output_lines, token_scores_field
from nlgkit.generation.unknowns import UnknownReplacement
from nlgkit.search import Hypothesis


@dataclass(frozen=True)
class TargetText:
    """Writes hypotheses of a model whose target vocabulary is ``vocab`` as output lines."""

    vocab: Vocabulary
    detokenizer: Callable[[list[str]], str]
    detokenize: bool = True
    replace_unknown: UnknownReplacement | None = None
    report_alignment: bool = False  # each output line ends in its SRC-TGT pairs
    report_token_scores: bool = False  # each output line ends in its tokens' log-scores (the EOS's last)
    as_json: bool = False  # one JSON record per line (:meth:`record`) instead of text

    @classmethod
    def build(cls, vocab: Vocabulary, detokenizer: Callable[[list[str]], str], *, detokenize: bool = True,
              phrase_table: Mapping[str, str] | None = None, report_alignment: bool = False,
              report_token_scores: bool = False, as_json: bool = False) -> TargetText:
        """With a ``phrase_table`` (empty: copy the source token), ``<unk>`` outputs are replaced; alignments and
        token scores index output tokens, so text lines report them only undetokenised (a DataError otherwise),
        JSON records beside the tokens."""
        for flag, on in (("--report-align: alignments index", report_alignment),
                         ("--token-scores: scores are those of", report_token_scores)):
            if on and detokenize and not as_json:
                raise DataError(f"{flag} output tokens, so only with --no-detokenize (or --json)")
        replace = None if phrase_table is None else UnknownReplacement(vocab.tokens[vocab.unk_index], phrase_table)
        return cls(vocab, detokenizer, detokenize, replace, report_alignment, report_token_scores, as_json)

    @property
    def needs_alignment(self) -> bool:
        """Whether the search must track each token's source position."""
        return self.replace_unknown is not None or self.report_alignment

    def words(self, tokens: list[int], alignment: list[int] | None = None, source: Sequence[str] = ()) -> list[str]:
        """A hypothesis's output tokens as words, before detokenisation (unknown words replaced when asked, from
        ``source`` through ``alignment``): what alignments index."""
        words = self.vocab.decode(tokens)
        if self.replace_unknown is not None:
            words = self.replace_unknown.words(words, alignment, list(source))
        return words

    def text(self, tokens: list[int], alignment: list[int] | None = None, source: Sequence[str] = ()) -> str:
        """A hypothesis's tokens as output text (:meth:`words`, subwords undone and detokenised unless told not
        to)."""
        return self._joined(self.words(tokens, alignment, source))

    def _joined(self, words: list[str]) -> str:
        return self.detokenizer(words) if self.detokenize else " ".join(words)

    def lines(self, results: Sequence[list[Hypothesis]], sources: Sequence[Sequence[str] | None], nbest: int,
              first_index: int = 0) -> list[str]:
        """The output lines of ``results`` (:func:`nlgkit.generation.output.output_lines`, or one JSON record per
        line), each hypothesis of ``results[i]`` written from the source tokens ``sources[i]`` the model read
        (None: no source)."""
        if self.as_json:
            return [json.dumps(self.record(rendered, nbest), ensure_ascii=False)
                    for rendered in self.texts(results, sources)]

        def text(i: int, hypothesis: Hypothesis) -> str:
            return self.text(hypothesis.tokens, hypothesis.alignment, sources[i] or ())

        def pairs(i: int, hypothesis: Hypothesis) -> str:
            """``SRC-TGT`` pairs, 0-based (fast_align's format)."""
            aligned = aligned_pairs(hypothesis.alignment, len(sources[i] or ()))
            return " ".join(f"{source}-{target}" for source, target in aligned)

        extras = [pairs] * self.report_alignment + [token_scores_field] * self.report_token_scores
        return output_lines(results, nbest, text, first_index, extras)

    def texts(self, results: Sequence[list[Hypothesis]],
              sources: Sequence[Sequence[str] | None]) -> list[list[Rendered]]:
        """Each result's hypotheses with their text (for callers that want scores and text apart)."""
        rendered = []
        for hypotheses, source in zip(results, sources, strict=True):
            words = [self.words(h.tokens, h.alignment, source or ()) for h in hypotheses]
            rendered.append([Rendered(self._joined(w), h, list(source or ()), w) for h, w in zip(hypotheses, words)])
        return rendered

    def record(self, rendered: Sequence[Rendered], nbest: int, scores: bool = True) -> dict[str, Any]:
        """One line's answer as a JSON object (``translate --json``, ``nlgkit serve``): the best hypothesis's
        ``text`` (and ``score``); with alignments the line's ``source_tokens`` and the hypothesis's ``tokens``
        and ``alignment`` ([source, output] positions); with token scores its ``tokens`` and ``token_scores``;
        with nbest > 1 every hypothesis's record in ``nbest``. A line without a source gets empty values."""
        fields = [name for name, on in (("tokens", self.report_alignment or self.report_token_scores),
                                        ("alignment", self.report_alignment),
                                        ("token_scores", self.report_token_scores)) if on]

        def one(r: Rendered) -> dict[str, Any]:
            values = {"text": r.text, "score": round(float(r.hypothesis.score), 4), "tokens": r.words,
                      "alignment": [list(pair) for pair in r.pairs()],
                      "token_scores": [round(v, 4) for v in r.hypothesis.token_scores or []]}
            return {name: values[name] for name in ["text", *["score"] * scores, *fields]}

        hypotheses = [one(r) for r in rendered]
        best: dict[str, Any] = dict(hypotheses[0]) if hypotheses else {
            "text": "", **({"score": None} if scores else {}), **{name: [] for name in fields}}
        if self.report_alignment:
            best["source_tokens"] = rendered[0].source if rendered else []
        if nbest > 1:
            best["nbest"] = hypotheses
        return best


@dataclass(frozen=True)
class Rendered:
    """A hypothesis with the text written for it, the source tokens the model read and its output tokens as words
    (``hypothesis.alignment[j]``, when kept, is the source position of ``words[j]``)."""

    text: str
    hypothesis: Hypothesis
    source: list[str]
    words: list[str]

    def pairs(self) -> list[tuple[int, int]]:
        """(source, output) token positions (:func:`aligned_pairs`)."""
        return aligned_pairs(self.hypothesis.alignment, len(self.source))


def aligned_pairs(alignment: list[int] | None, source_length: int) -> list[tuple[int, int]]:
    """(source, output) token positions, 0-based, of an output whose token j attended to source position
    ``alignment[j]`` most; tokens aligned to the source's end marker (``source_length``) are left out."""
    return [(source, target) for target, source in enumerate(alignment or []) if source < source_length]

"""A translation hypothesis as its output text, the same for both engines (``translate --engine torch|ct2``).

Tokens become words through the target vocabulary; with ``--replace-unk`` each ``<unk>`` is replaced through the
hypothesis's alignment (:class:`nlgkit.generation.unknowns.UnknownReplacement`); subwords are undone and the words
detokenised unless told not to; with ``--report-align`` each line ends in `` ||| SRC-TGT`` pairs (OpenNMT's
``-report_align``, fast_align's format), which index the tokens of ``--no-detokenize`` output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

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
    keep_alignment: bool = False  # each hypothesis keeps its alignment for the caller (serve's "align")

    @classmethod
    def build(cls, vocab: Vocabulary, detokenizer: Callable[[list[str]], str], *, detokenize: bool = True,
              phrase_table: Mapping[str, str] | None = None, report_alignment: bool = False,
              report_token_scores: bool = False) -> TargetText:
        """With a ``phrase_table`` (empty: copy the source token), ``<unk>`` outputs are replaced; alignments and
        token scores are reported only over undetokenised output (a DataError otherwise)."""
        for flag, on in (("--report-align: alignments index", report_alignment),
                         ("--token-scores: scores are those of", report_token_scores)):
            if on and detokenize:
                raise DataError(f"{flag} output tokens, so only with --no-detokenize")
        replace = None if phrase_table is None else UnknownReplacement(vocab.tokens[vocab.unk_index], phrase_table)
        return cls(vocab, detokenizer, detokenize, replace, report_alignment, report_token_scores)

    @property
    def needs_alignment(self) -> bool:
        """Whether the search must track each token's source position."""
        return self.replace_unknown is not None or self.report_alignment or self.keep_alignment

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
        words = self.words(tokens, alignment, source)
        return self.detokenizer(words) if self.detokenize else " ".join(words)

    def lines(self, results: Sequence[list[Hypothesis]], sources: Sequence[Sequence[str] | None], nbest: int,
              first_index: int = 0) -> list[str]:
        """The output lines of ``results`` (:func:`nlgkit.generation.output.output_lines`), each hypothesis of
        ``results[i]`` written from the source tokens ``sources[i]`` the model read (None: no source)."""
        def text(i: int, hypothesis: Hypothesis) -> str:
            return self.text(hypothesis.tokens, hypothesis.alignment, sources[i] or ())

        def pairs(i: int, hypothesis: Hypothesis) -> str:
            """``SRC-TGT`` pairs, 0-based; tokens aligned to the source's end marker are left out."""
            aligned = Rendered("", hypothesis, list(sources[i] or ()), []).pairs()
            return " ".join(f"{source}-{target}" for source, target in aligned)

        extras = [pairs] * self.report_alignment + [token_scores_field] * self.report_token_scores
        return output_lines(results, nbest, text, first_index, extras)

    def texts(self, results: Sequence[list[Hypothesis]],
              sources: Sequence[Sequence[str] | None]) -> list[list[Rendered]]:
        """Each result's hypotheses with their text (for callers that want scores and text apart)."""
        return [[Rendered(self.text(h.tokens, h.alignment, source or ()), h, list(source or ()),
                          self.words(h.tokens, h.alignment, source or ()))
                 for h in hypotheses]
                for hypotheses, source in zip(results, sources, strict=True)]


@dataclass(frozen=True)
class Rendered:
    """A hypothesis with the text written for it, the source tokens the model read and its output tokens as words
    (``hypothesis.alignment[j]``, when kept, is the source position of ``words[j]``)."""

    text: str
    hypothesis: Hypothesis
    source: list[str]
    words: list[str]

    def pairs(self) -> list[tuple[int, int]]:
        """(source, output) token positions, 0-based; tokens aligned to the source's end marker left out."""
        return [(source, target) for target, source in enumerate(self.hypothesis.alignment or [])
                if source < len(self.source)]

"""Text in the target language, read as the training targets were: the prefixes of ``translate --target-prefix``,
the phrases of ``--constraints`` and the references of ``--score-reference``, alike for both engines (nlgkit's
search and CTranslate2).

The run's target tokenizer (split on spaces when the input is pretokenised) is loaded only when first needed: a
spaCy model takes seconds to load, and most translations never read target text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.data.vocab import Vocabulary
from nlgkit.generation.decode import never_ids, target_ids
from nlgkit.generation.output import SearchOptions, cut_tokens
from nlgkit.search import Hypothesis
from nlgkit.search.constrained import missing_phrases, unmeetable


@dataclass
class TargetReader:
    vocab: Vocabulary
    load_tokenizer: Callable[[], Callable[[str], list[str]]]
    pretokenized: bool = False

    @functools.cached_property
    def tokenize(self) -> Callable[[str], list[str]]:
        """Text → target tokens."""
        return str.split if self.pretokenized else self.load_tokenizer()

    def prefix(self, text: str, warn: Callable[[str], None], where: str) -> list[int]:
        """A ``--target-prefix`` line's target word ids (a special token written in the text is an unknown word:
        ``target_ids``). A word outside the target vocabulary can only be forced as ``<unk>``: a warning naming
        ``where`` says which, and the line is still translated."""
        tokens = self.tokenize(text)
        ids = target_ids(self.vocab, tokens)
        if unknown := self._unknown(tokens, ids):
            warn(f"{where}: target prefix {text.strip()!r}: {unknown} not in the target vocabulary, forced as <unk>")
        return ids

    def prefixes(self, lines: Sequence[str], warn: Callable[[str], None], name: str,
                 first_number: int = 1) -> list[list[int]]:
        """Each line's prefix (:meth:`prefix`), warnings naming ``name: line N`` from ``first_number``."""
        return [self.prefix(line, warn, f"{name}: line {number}")
                for number, line in enumerate(lines, start=first_number)]

    def phrase_lines(self, lines: Sequence[str], warn: Callable[[str], None], name: str,
                     first_number: int = 1, options: SearchOptions | None = None) -> list[list[list[int]]]:
        """Each line's phrases (:meth:`phrases`, checked against ``options``), warnings and errors naming
        ``name: line N`` from ``first_number``."""
        return [self.phrases(line, warn, f"{name}: line {number}", options)
                for number, line in enumerate(lines, start=first_number)]

    def warn_unmet(self, found: Sequence[Sequence[Hypothesis]], phrases: Sequence[list[list[int]]],
                   warn: Callable[[str], None], name: str, numbers: Sequence[int],
                   show: Callable[[list[int]], str]) -> None:
        """A warning naming ``name: line N`` (N from ``numbers``, one per input) for each input whose best output
        lacks some of its constraint ``phrases`` (the search returned it at the length limit), and the phrases it
        lacks, written by ``show`` as outputs are: such an output is written, as any other, but a user who asked for
        the phrases is told."""
        for number, hypotheses, wanted in zip(numbers, found, phrases, strict=True):
            if hypotheses and wanted and (missing := missing_phrases(hypotheses[0].tokens, wanted)):
                shown = ", ".join(repr(show(list(phrase))) for phrase in missing)
                warn(f"{name}: line {number}: its output lacks constraint {shown} (the search reached the length "
                     "limit first: phrases that clash with each other, the target prefix or the n-gram ban)")

    def _unknown(self, tokens: list[str], ids: list[int]) -> str:
        """The tokens that became ``<unk>``, quoted and comma-separated ("" when none)."""
        return ", ".join(repr(token) for token, i in zip(tokens, ids, strict=True) if i == self.vocab.unk_index)

    def references(self, references: Sequence[str], lines: int, *, name: str, first_number: int,
                   references_name: str, max_tokens: int, warn: Callable[[str], None]) -> list[list[str]]:
        """The tokens of each reference, cut to ``max_tokens`` with a warning naming its line; a DataError when
        there is not one reference per input line (read them before the input, so that this comes first)."""
        if len(references) != lines:
            raise DataError(f"{references_name}: {len(references)} lines for the {lines} lines of {name}")
        return [cut_tokens(self.tokenize(reference), max_tokens, warn, f"{name}: reference of line {number}")
                for number, reference in enumerate(references, start=first_number)]

    def phrases(self, line: str, warn: Callable[[str], None], where: str,
                options: SearchOptions | None = None) -> list[list[int]]:
        """A ``--constraints`` line's phrases (tab-separated; an empty line: none) as target word ids. A phrase
        with a word outside the target vocabulary cannot be output as written (only as ``<unk>``), so it is left
        out with a warning naming ``where``, and the line is still translated. A phrase that the search under
        ``options`` could never output (``no_repeat_ngram_size`` forbids an n-gram it repeats; :func:`unmeetable`)
        is the user's contradiction, not the text's: a ConfigError naming ``where``, the phrase and why."""
        found = []
        for phrase in (part for part in line.split("\t") if part.strip()):
            tokens = self.tokenize(phrase)
            ids = target_ids(self.vocab, tokens)
            if unknown := self._unknown(tokens, ids):
                warn(f"{where}: constraint {phrase.strip()!r} left out: {unknown} not in the target vocabulary")
            elif ids:
                if options is not None and (reason := unmeetable(
                        ids, self.vocab.eos_index, never_ids(self.vocab, options.no_unk), options.no_repeat_ngram_size,
                        show=lambda words: repr(" ".join(self.vocab.decode(words))))):
                    raise ConfigError(f"{where}: constraint {phrase.strip()!r} can never be met: {reason}")
                found.append(ids)
        return found

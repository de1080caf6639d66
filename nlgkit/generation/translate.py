"""Translating text lines with a trained run: tokenise like ``prepare``, search, detokenise.

Awkward input has defined behaviour: an empty (or whitespace-only) line gives an empty output line, and
a line longer than ``max_input_tokens`` tokens is cut to that length with a warning naming the line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nlgkit.core.errors import DataError
from nlgkit.core.io import require_readable
from nlgkit.generation.decode import ReferenceScore, generate, once, score_references
from nlgkit.generation.output import SearchOptions, cut_tokens, placed
from nlgkit.generation.targets import TargetReader
from nlgkit.generation.text import Rendered, TargetText
from nlgkit.runs.loading import TrainedRun
from nlgkit.search import Hypothesis

# a line's source tokens (as the model read them) and the task's source built from them; None: no source
Read = tuple[list[str], Any] | None


class Translator:
    """A translation run ready for text: its tokenizer and detokenizer are loaded once, so that a stream of
    small groups (``translate --buffer-size``) costs no more than one large batch per line. With a
    ``phrase_table`` (empty: copy), each ``<unk>`` of an output is replaced from the source token its step attended
    to; with ``report_alignment``, each output line ends in `` ||| SRC-TGT …`` pairs, with ``report_token_scores``
    in its tokens' log-scores (:class:`TargetText`). ``on_batch(done, total)``: after each search batch, the lines of
    the call searched so far and all of them (empty lines are not searched)."""

    def __init__(self, run: TrainedRun, options: SearchOptions, *, pretokenized: bool = False,
                 detokenize: bool = True, max_input_tokens: int = 400,
                 warn: Callable[[str], None] = print, phrase_table: Mapping[str, str] | None = None,
                 report_alignment: bool = False, report_token_scores: bool = False, as_json: bool = False,
                 on_batch: Callable[[int, int], None] | None = None) -> None:
        if max_input_tokens <= 0:
            raise DataError(f"--max-input-tokens = {max_input_tokens}: must be positive")
        try:
            self.text_input = run.task.text_input(run.assets, run.vocabs)
        except DataError as exc:
            raise DataError(f"{run.checkpoint}: `nlgkit translate` needs a model that reads text ({exc})") from None
        self.run, self.options, self.warn, self.on_batch = run, options, warn, on_batch
        self.pretokenized, self.max_input_tokens = pretokenized, max_input_tokens
        self.limit_warning = once(warn)  # generate's min_len warning: once for all the groups of a stream
        self.targets = TargetReader(run.tgt_vocab, lambda: run.task.target_tokenizer(run.assets), pretokenized)
        self.output = TargetText.build(run.tgt_vocab, run.detokenizer(), detokenize=detokenize,
                                       phrase_table=phrase_table, report_alignment=report_alignment,
                                       report_token_scores=report_token_scores, as_json=as_json)

    def lines(self, lines: list[str], name: str = "<stdin>", first_number: int = 1,
              images: Sequence[Path] | None = None, prefixes: Sequence[str] | None = None,
              constraints: Sequence[str] | None = None, constraints_name: str = "constraints",
              prefixes_name: str = "target prefix") -> list[str]:
        """The output lines for ``lines`` (numbered from ``first_number`` in warnings): one per input line,
        ``nbest`` per line with n-best output. ``images``: the image of each line (multimodal models); a line
        whose image is missing or unreadable gets an empty output line and a warning naming both. ``prefixes``:
        the text each line's outputs must start with (tokenised as the training targets; empty: none).
        ``constraints``: each line's phrases (tab-separated) that its outputs must contain (``TargetReader.phrases``;
        a line whose output lacks some, returned at its length limit, gets a warning: ``TargetReader.warn_unmet``).
        Warnings on them name ``prefixes_name`` and ``constraints_name``."""
        read = self._read(lines, name, first_number, images)
        phrases = self._phrases(constraints, len(lines), first_number, constraints_name)
        results = self._search(read, first_number, self._prefix_ids(prefixes, len(lines), first_number, prefixes_name),
                               phrases)
        if phrases is not None:
            self.targets.warn_unmet(results, phrases, self.warn, constraints_name,
                                    range(first_number, first_number + len(lines)), self.output.text)
        return self.output.lines(results, self._tokens(read), self.options.nbest, first_number - 1)

    @staticmethod
    def _tokens(read: list[Read]) -> list[list[str] | None]:
        return [line[0] if line is not None else None for line in read]

    def texts(self, lines: list[str], name: str = "<stdin>", first_number: int = 1,
              images: Sequence[Path] | None = None, prefix_ids: Sequence[list[int]] | None = None,
              phrase_ids: Sequence[list[list[int]]] | None = None) -> list[list[Rendered]]:
        """Each line's hypotheses, best first, with the text :meth:`lines` writes for each (none for an empty line
        or a line whose image is missing): for callers that want scores and text apart (``nlgkit serve``). Its
        prefixes and constraint phrases come as target word ids (``TargetReader.prefix`` / ``phrases``), read
        by the caller when a request comes, so that a batch does not tokenise them again."""
        read = self._read(lines, name, first_number, images)
        found = self._search(read, first_number, None if prefix_ids is None else list(prefix_ids),
                             None if phrase_ids is None else list(phrase_ids))
        return self.output.texts(found, self._tokens(read))

    def _search(self, read: list[Read], first_number: int,
                prefixes: list[list[int]] | None = None,
                constraints: list[list[list[int]]] | None = None) -> list[list[Hypothesis]]:
        todo = [i for i, line in enumerate(read) if line is not None]
        run = self.run
        with run.computing():
            found = generate(run.model, run.task, [read[i][1] for i in todo],  # type: ignore[index]
                             run.tgt_vocab, device=run.device, item_ids=[first_number - 1 + i for i in todo],
                             alignment=self.output.needs_alignment,
                             prefixes=[prefixes[i] for i in todo] if prefixes is not None else None,
                             constraints=[constraints[i] for i in todo] if constraints is not None else None,
                             on_batch=self.on_batch, warn=self.limit_warning,
                             **self.options.search_kwargs())
        return placed(read, found)

    def _prefix_ids(self, prefixes: Sequence[str] | None, count: int, first_number: int,
                    name: str) -> list[list[int]] | None:
        """Each prefix's target word ids, tokenised as the training targets were (split on spaces when
        pretokenised); unknown words are ``<unk>`` (``TargetReader.prefix``; warnings name ``name``)."""
        if prefixes is None:
            return None
        return self.targets.prefixes(self._each_line(prefixes, count, "prefix"), self.warn, name, first_number)

    def _phrases(self, constraints: Sequence[str] | None, count: int, first_number: int,
                 name: str) -> list[list[list[int]]] | None:
        """Each line's constraint phrases as target word ids (``TargetReader.phrases``; warnings name ``name``)."""
        if constraints is None:
            return None
        return self.targets.phrase_lines(self._each_line(constraints, count, "constraint"), self.warn, name,
                                         first_number, self.options)

    @staticmethod
    def _each_line(values: Sequence[str], count: int, what: str) -> Sequence[str]:
        """``values``, checked to be one per input line (the caller names the file when they are not)."""
        if len(values) != count:
            raise ValueError(f"{len(values)} {what} lines for {count} lines")
        return values

    @property
    def probabilities(self) -> bool:
        """Whether the model's scores are log-probabilities (so that a perplexity means something)."""
        return self.run.model.head.normalized

    def reference_scores(self, lines: list[str], references: list[str], name: str = "<stdin>",
                         first_number: int = 1, images: Sequence[Path] | None = None,
                         references_name: str = "references") -> list[ReferenceScore | None]:
        """The model's log-score of each line's reference (``translate --score-reference``), tokenised as the
        training targets were (or split on spaces when pretokenised); None where the line gets no source
        (empty, or its image missing), as :meth:`lines` leaves such a line empty."""
        targets = self.targets.references(references, len(lines), name=name, first_number=first_number,
                                          references_name=references_name, max_tokens=self.max_input_tokens,
                                          warn=self.warn)
        run = self.run
        sources = self.sources(lines, name, first_number, images)
        todo = [i for i, source in enumerate(sources) if source is not None]
        with run.computing():
            found = score_references(run.model, run.task, [sources[i] for i in todo], [targets[i] for i in todo],
                                     run.tgt_vocab, batch_size=self.options.batch_size, device=run.device)
        scores: list[ReferenceScore | None] = [None] * len(lines)
        for i, score in zip(todo, found, strict=True):
            scores[i] = score
        return scores

    def sources(self, lines: list[str], name: str, first_number: int,
                images: Sequence[Path] | None) -> list[Any]:
        """Each line as the task's source (None for an empty line or a line whose image is missing)."""
        return [line[1] if line is not None else None for line in self._read(lines, name, first_number, images)]

    def _read(self, lines: list[str], name: str, first_number: int, images: Sequence[Path] | None) -> list[Read]:
        """Each line's source tokens and source (None for an empty line or a line whose image is missing)."""
        run = self.run
        attach = self.text_input.attach_image
        if images is not None:
            if attach is None:
                raise DataError(f"{run.checkpoint}: this model's task ({run.config.task.type}) reads no images")
            if len(images) != len(lines):
                raise DataError(f"{name}: {len(lines)} lines but {len(images)} images")
        read: list[Read] = []
        for i, (number, line) in enumerate(enumerate(lines, start=first_number)):
            tokens = cut_tokens(line.split() if self.pretokenized else self.text_input.tokenize(line),
                                self.max_input_tokens, self.warn, f"{name}: line {number}")
            if not tokens:
                read.append(None)
            elif images is None or attach is None:
                read.append((tokens, self.text_input.encode(tokens)))
            else:
                try:
                    if images[i] == Path():
                        raise DataError("no image named for this line")
                    read.append((tokens, attach(tokens, images[i])))
                except DataError as exc:
                    self.warn(f"{name}: line {number}: {exc}; its output line is left empty")
                    read.append(None)
        return read


def translate_lines(run: TrainedRun, lines: list[str], options: SearchOptions, *, name: str = "<stdin>",
                    pretokenized: bool = False, detokenize: bool = True, max_input_tokens: int = 400,
                    warn: Callable[[str], None] = print) -> list[str]:
    """The output lines for ``lines``: one per input line (``nbest`` per line with n-best output)."""
    translator = Translator(run, options, pretokenized=pretokenized, detokenize=detokenize,
                            max_input_tokens=max_input_tokens, warn=warn)
    return translator.lines(lines, name)


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")


def read_image_list(spec: Path) -> list[Path]:
    """``translate --images``: a directory (its image files in name order, one per input line) or a file
    naming one image per line (relative to the file's folder; an empty line names none)."""
    if spec.is_dir():
        files = sorted(p for p in spec.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        if not files:
            raise DataError(f"{spec}: no image files ({', '.join(IMAGE_SUFFIXES)}) in this directory")
        return files
    require_readable(spec, "image list or directory")
    try:
        names = spec.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{spec}: not UTF-8 text (byte {exc.start}): expected one image path per line") from None
    return [spec.parent / name.strip() if name.strip() else Path() for name in names]

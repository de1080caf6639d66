"""Translating with a CTranslate2 export (``nlgkit translate --engine ct2``): the run's text pipeline around
CTranslate2's beam search.

Text goes through the exported run's own tokenizer, subword model and vocabulary (``task.text_input``), and back
through its detokenizer, so both engines see the same source ids and print the same kind of text; awkward input
behaves as with ``nlgkit translate`` (one output line per input line; empty line → empty output; a line longer
than ``max_input_tokens`` is cut with a warning).

The search is set up to be nlgkit's (:mod:`nlgkit.search.beam`), which CTranslate2's follows closely: each step
ranks the best 2·beam candidates, EOS ones within the top beam finish, a sentence stops with beam finished
hypotheses, and scores are log-probabilities / length**length_penalty with the EOS counted in the length
(``return_end_token``); an empty output is allowed (``min_decoding_length`` is ``min_len``, 0 by default, and at
most the call's limit: a sentence whose limit is below ``min_len`` is cut there, with generate's warning, once a
stream), and each sentence has nlgkit's own length limit ``max_len_a · (source tokens + 1) + max_len_b``.
CTranslate2 takes one limit per call, so a batch runs with its largest and returns every finished hypothesis: a sentence that
stopped before its own limit searched exactly as it would have with it; the few that did not are searched again
with their own limit.

Padding and BOS are never output. nlgkit masks them after normalising; CTranslate2 can only suppress them before
(its softmax then leaves out their mass, which shifts every step's scores by log(1 − p(pad) − p(BOS)) and can
reorder near-tied beams of a barely trained model). So the search runs unsuppressed, which a softmax head that has
learnt to give them no mass does not notice, and a sentence whose hypotheses contain one of them is searched again
with them suppressed. What remains different is arithmetic (CTranslate2's kernels, and int8 when asked for).

``min_len`` and ``no_repeat_ngram_size`` are CTranslate2's own options, masked the same way before its softmax: the
outputs keep them and greedy ones are nlgkit's, but scores are renormalised over the words allowed, so beams of a
constrained search can part from nlgkit's (whose scores stay the model's log-probabilities, as fairseq's).

``--target-prefix`` is CTranslate2's ``target_prefix``: outputs start with it, and the length limit leaves room for
one more token, as in nlgkit. CTranslate2 scores (and ranks) only the words after the prefix, nlgkit the whole
output, so greedy outputs are nlgkit's and beams may part. ``--replace-unk`` and ``--report-align`` read the
alignment CTranslate2 returns (``return_attention``): the last layer's cross-attention averaged over its heads, as
nlgkit's Transformer gives it (an export written before nlgkit recorded that aligns by the first head only, and is
refused for them: export it again).

CTranslate2's search returns one score per output, so ``--token-scores`` and ``--score-reference`` force the outputs
(the references) through its ``score_batch``: each token's log-probability under the model, the EOS's last when the
output ended with one, as nlgkit's forced decoding gives them. A token score is then the model's, also for a prefix's
tokens and under ``min_len`` / ``no_repeat_ngram_size`` (nlgkit's search reports the same), and the second pass costs
one decoder run over each output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.errors import ConfigError, DataError
from nlgkit.data.vocab import BOS, EOS, PAD
from nlgkit.export.ct2 import ALIGNMENT, ExportedModel, ctranslate2_module, engine_messages, load_export
from nlgkit.generation.decode import ReferenceScore, length_limits, min_len_warning, once, target_ids
from nlgkit.generation.output import SearchOptions, cut_tokens, placed
from nlgkit.generation.targets import TargetReader
from nlgkit.generation.text import Rendered, TargetText
from nlgkit.models.transformer import TransformerConfig
from nlgkit.search import Hypothesis


class CT2Translator:
    """An exported model ready for text, with the interface of :class:`nlgkit.generation.translate.Translator`
    (``on_batch(done, total)`` too: after each batch, the sentences searched so far, empty lines not counted)."""

    def __init__(self, export: ExportedModel, options: SearchOptions, *, compute_type: str = "default",
                 device: str = "cpu", threads: int = 0, pretokenized: bool = False, detokenize: bool = True,
                 max_input_tokens: int = 400, warn: Callable[[str], None] = print,
                 phrase_table: Mapping[str, str] | None = None, report_alignment: bool = False,
                 report_token_scores: bool = False, as_json: bool = False,
                 on_batch: Callable[[int, int], None] | None = None) -> None:
        if max_input_tokens <= 0:
            raise DataError(f"--max-input-tokens = {max_input_tokens}: must be positive")
        ct2 = ctranslate2_module()
        name, _, index = device.partition(":")
        if name not in ("auto", "cpu", "cuda") or (index and not index.isdigit()):
            raise ConfigError(f"--device {device!r}: the ct2 engine runs on auto, cpu, cuda or cuda:N")
        try:
            with engine_messages(warn):  # (a compute type the device lacks: the one CTranslate2 computes in instead)
                self.engine = ct2.Translator(str(export.directory), device=name, device_index=int(index or 0),
                                             compute_type=compute_type,
                                             intra_threads=threads or torch.get_num_threads())
        except (RuntimeError, ValueError) as exc:
            reason = " ".join(str(exc).split())
            raise ConfigError(f"{export.directory}: CTranslate2 cannot load it ({reason})") from None
        self.export, self.options, self.warn, self.on_batch = export, options, warn, on_batch
        self.limit_warning = once(warn)  # the min_len warning, as the Translator's: once a stream
        self.pretokenized, self.max_input_tokens = pretokenized, max_input_tokens
        self.text_input = export.task.text_input(export.assets, export.vocabs)
        self.targets = TargetReader(export.tgt_vocab, lambda: export.task.target_tokenizer(export.assets),
                                    pretokenized)
        self.output = TargetText.build(export.tgt_vocab, export.task.detokenizer(export.assets),
                                       detokenize=detokenize, phrase_table=phrase_table,
                                       report_alignment=report_alignment,
                                       report_token_scores=report_token_scores, as_json=as_json)
        self._check_alignment()
        model = export.config.model
        self.max_positions = model.max_positions if isinstance(model, TransformerConfig) else 1024

    @property
    def probabilities(self) -> bool:
        """True: every head that exports is a softmax over the vocabulary, whose scores are log-probabilities."""
        return True

    def lines(self, lines: list[str], name: str = "<stdin>", first_number: int = 1,
              images: Sequence[Path] | None = None, prefixes: Sequence[str] | None = None,
              prefixes_name: str = "target prefix") -> list[str]:
        """The output lines for ``lines``: one per input line (``nbest`` per line with n-best output);
        ``prefixes``: the text each line's outputs start with (tokenised as the training targets; warnings on them
        name ``prefixes_name``)."""
        read = self._read(lines, name, first_number, images)
        found = self._search_read(read, self._prefix_ids(prefixes, first_number, prefixes_name))
        return self.output.lines(found, read, self.options.nbest, first_number - 1)

    def texts(self, lines: list[str], name: str = "<stdin>", first_number: int = 1,
              images: Sequence[Path] | None = None,
              prefix_ids: Sequence[list[int]] | None = None) -> list[list[Rendered]]:
        """Each line's hypotheses, best first, with the text :meth:`lines` writes for each (``nlgkit serve``, which
        reads each line's prefix as target word ids when the request comes: ``TargetReader.prefix``)."""
        read = self._read(lines, name, first_number, images)
        return self.output.texts(self._search_read(read, None if prefix_ids is None else list(prefix_ids)), read)

    def _prefix_ids(self, prefixes: Sequence[str] | None, first_number: int, name: str) -> list[list[int]] | None:
        """Each line's prefix as target word ids (``TargetReader.prefixes``; warnings name ``name``)."""
        return None if prefixes is None else self.targets.prefixes(prefixes, self.warn, name, first_number)

    def reference_scores(self, lines: list[str], references: list[str], name: str = "<stdin>",
                         first_number: int = 1, images: Sequence[Path] | None = None,
                         references_name: str = "references") -> list[ReferenceScore | None]:
        """The model's log-score of each line's reference (``translate --engine ct2 --score-reference``), as
        :meth:`nlgkit.generation.translate.Translator.reference_scores` gives it, through CTranslate2's
        ``score_batch``."""
        tokens = self.targets.references(references, len(lines), name=name, first_number=first_number,
                                         references_name=references_name, max_tokens=self.max_input_tokens,
                                         warn=self.warn)
        read = self._read(lines, name, first_number, images)
        todo = [i for i, words in enumerate(read) if words]
        sources = [self.text_input.encode(read[i]) for i in todo]  # type: ignore[arg-type]
        targets = [target_ids(self.export.tgt_vocab, tokens[i]) for i in todo]
        unk = self.export.tgt_vocab.unk_index
        scores: list[ReferenceScore | None] = [None] * len(lines)
        for i, target, log_probs in zip(todo, targets, self.log_probs(sources, targets), strict=True):
            scores[i] = ReferenceScore(sum(log_probs), len(target) + 1, target.count(unk), log_probs)
        return scores

    def log_probs(self, sources: Sequence[list[int]], targets: Sequence[list[int]]) -> list[list[float]]:
        """Each target's tokens' log-probabilities given its source (token ids without </s>), then its EOS's:
        forced decoding by CTranslate2 (``score_batch``)."""
        for sequence in [*sources, *targets]:
            if len(sequence) + 1 > self.max_positions:
                raise ConfigError(f"model.max_positions = {self.max_positions}: a sequence of {len(sequence) + 1} "
                                  "tokens is longer")
        if not sources:
            return []
        src_vocab, tgt_vocab = self.export.src_vocab, self.export.tgt_vocab
        results: list[Any] = self.engine.score_batch([src_vocab.decode(s) for s in sources],
                                                     [tgt_vocab.decode(t) for t in targets],
                                                     max_batch_size=self.options.batch_size, max_input_length=0)
        return [list(result.log_probs) for result in results]

    def _read(self, lines: list[str], name: str, first_number: int,
              images: Sequence[Path] | None) -> list[list[str] | None]:
        """Each line's source tokens (None for an empty line)."""
        if images is not None:
            raise DataError(f"{self.export.directory}: the ct2 engine translates text only (no --images)")
        return [cut_tokens(line.split() if self.pretokenized else self.text_input.tokenize(line),
                           self.max_input_tokens, self.warn, f"{name}: line {number}") or None
                for number, line in enumerate(lines, start=first_number)]

    def _check_alignment(self) -> None:
        """Alignments only from an export that records nlgkit's (all heads averaged), else a DataError."""
        if self.output.needs_alignment and self.export.meta.get("alignment") != ALIGNMENT:
            raise DataError(f"{self.export.directory}: exported before nlgkit aligned by all heads (CTranslate2 "
                            "would align by the first): export the run again for alignments or --replace-unk")

    def _search_read(self, read: list[list[str] | None],
                     prefixes: list[list[int]] | None = None) -> list[list[Hypothesis]]:
        self._check_alignment()  # again: `nlgkit serve` asks for alignments per request
        sources = [self.text_input.encode(tokens) if tokens else None for tokens in read]
        todo = [i for i, source in enumerate(sources) if source is not None]
        prefix_ids = None if prefixes is None else [prefixes[i] for i in todo]
        found = self.search([sources[i] for i in todo], prefixes=prefix_ids,  # type: ignore[misc]
                            alignment=self.output.needs_alignment, token_scores=self.output.report_token_scores)
        return placed(sources, found)

    def search(self, sources: Sequence[list[int]], prefixes: Sequence[list[int]] | None = None,
               alignment: bool = False, token_scores: bool = False) -> list[list[Hypothesis]]:
        """``nbest`` hypotheses per source (token ids without </s>), in input order, as
        :func:`nlgkit.generation.decode.generate` returns them (with ``prefixes``, each output starts with its
        prefix; with ``alignment``, each hypothesis carries its tokens' source positions; with ``token_scores``,
        its tokens' log-probabilities, scored again by :meth:`log_probs`)."""
        options = self.options
        limits = self.length_limits(sources)
        if prefixes is not None:  # room for the prefix and one more token, as generate leaves
            limits = [max(limit, len(prefix) + 1) for limit, prefix in zip(limits, prefixes, strict=True)]
        if message := min_len_warning(torch.tensor(limits, dtype=torch.long),
                                      torch.tensor([len(s) + 1 for s in sources], dtype=torch.long),
                                      options.min_len, options.max_len_a, options.max_len_b):
            self.limit_warning(message)  # (as generate warns: CTranslate2 stops them at their limit too)
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        never = {self.export.tgt_vocab.pad_index, self.export.tgt_vocab.bos_index}
        found: dict[int, list[Hypothesis]] = {}
        again: dict[tuple[int, bool], list[int]] = {}  # (own limit, suppress) → sentences to search again so

        def settle(indices: list[int], limit: int, suppress: bool) -> None:
            translated = self._translate([sources[i] for i in indices], limit, suppress,
                                         None if prefixes is None else [prefixes[i] for i in indices], alignment)
            for i, (hyps, stopped) in zip(indices, translated, strict=True):
                if not suppress and any(never.intersection(h.tokens) for h in hyps):
                    again.setdefault((limits[i], True), []).append(i)
                elif limits[i] < limit and stopped >= limits[i]:
                    again.setdefault((limits[i], suppress), []).append(i)
                else:
                    found[i] = hyps

        for start in range(0, len(order), options.batch_size):
            chunk = order[start : start + options.batch_size]
            settle(chunk, max(limits[i] for i in chunk), False)
            if self.on_batch is not None:  # (the few searched again below are not counted twice)
                self.on_batch(start + len(chunk), len(order))
        while again:  # each sentence at most twice more: its own limit, then suppression (neither comes back)
            (limit, suppress), indices = again.popitem()
            settle(indices, limit, suppress)
        kept = [found[i][: options.nbest] for i in range(len(sources))]
        return self._with_token_scores(sources, kept, limits) if token_scores else kept

    def _with_token_scores(self, sources: Sequence[list[int]], found: list[list[Hypothesis]],
                           limits: Sequence[int]) -> list[list[Hypothesis]]:
        """``found`` with each hypothesis's token scores; one shorter than its limit ended with an EOS (only the
        search's limit stops one without), whose score comes last."""
        pairs = [(i, h) for i, hypotheses in enumerate(found) for h in hypotheses]
        scored = iter(self.log_probs([sources[i] for i, _ in pairs], [h.tokens for _, h in pairs]))
        return [[dataclasses.replace(h, token_scores=next(scored)[: len(h.tokens) + (len(h.tokens) < limits[i])])
                 for h in hypotheses] for i, hypotheses in enumerate(found)]

    def length_limits(self, sources: Sequence[list[int]]) -> list[int]:
        """Each source's output limit in decoding steps, computed as ``generate`` computes it (float32)."""
        options = self.options
        for source in sources:
            if len(source) + 1 > self.max_positions:
                raise ConfigError(f"model.max_positions = {self.max_positions}: a sequence of {len(source) + 1} "
                                  "tokens is longer")
        lengths = torch.tensor([len(s) + 1 for s in sources], dtype=torch.long)  # with </s>
        limits = length_limits(lengths, options.max_len_a, options.max_len_b, options.max_len)
        return limits.clamp(max=self.max_positions).tolist()

    def _translate(self, sources: list[list[int]], limit: int, suppress: bool, prefixes: list[list[int]] | None,
                   alignment: bool) -> list[tuple[list[Hypothesis], int]]:
        """Every finished hypothesis (beam of them) of each source under one length limit, best first, and the
        step its search stopped at: the longest of them, EOS included (at least one finished at that step, as
        fewer than beam had finished before it)."""
        options = self.options
        src_vocab, tgt_vocab = self.export.src_vocab, self.export.tgt_vocab
        results: list[Any] = self.engine.translate_batch(
            [src_vocab.decode(s) for s in sources],
            target_prefix=None if prefixes is None else [tgt_vocab.decode(p) or None for p in prefixes],
            beam_size=options.beam, num_hypotheses=options.beam, return_attention=alignment,
            length_penalty=options.length_penalty, max_decoding_length=limit,
            min_decoding_length=min(options.min_len, limit),  # (CTranslate2 refuses more; nlgkit cuts at the limit)
            no_repeat_ngram_size=options.no_repeat_ngram_size, disable_unk=options.no_unk,
            max_input_length=0, return_scores=True, return_end_token=True,
            suppress_sequences=[[PAD], [BOS]] if suppress else None)
        out = []
        for result in results:
            hyps = []
            for k, (tokens, score) in enumerate(zip(result.hypotheses, result.scores, strict=True)):
                length = len(tokens)  # EOS included when it ended the hypothesis, as nlgkit counts
                words = tokens[:-1] if tokens and tokens[-1] == EOS else tokens
                penalty = length**options.length_penalty if options.length_penalty and length else 1.0
                aligned = [max(range(len(weights)), key=weights.__getitem__)
                           for weights in result.attention[k][: len(words)]] if alignment else None
                hyps.append(Hypothesis(tgt_vocab.encode(words), score, score * penalty, aligned))
            out.append((hyps, max((len(tokens) for tokens in result.hypotheses), default=0)))
        return out


def single_export(models: Sequence[Path], checkpoint: str = "best") -> ExportedModel:
    """``translate --engine ct2``'s one ``--model``: an export directory (no ensemble, no checkpoint choice)."""
    if len(models) != 1:
        raise ConfigError(f"--engine ct2: {len(models)} --model given; it translates with one export directory")
    if checkpoint != "best":
        raise ConfigError(f"--checkpoint {checkpoint}: an export holds one checkpoint (choose it with "
                          "`nlgkit export ct2 --checkpoint`)")
    return load_export(models[0])

"""Batched generation and forced scoring from any task's sources: the one path used by validation,
``translate`` and ``caption``.

Sources (token-id sentences, image features) are sorted by the task's length into batches (little
padding), turned into model inputs by the task, searched with the model-agnostic beam search, and
returned in input order: one result per input, whatever the input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from nlgkit.data.vocab import Vocabulary
from nlgkit.models.base import Generator, Inputs
from nlgkit.search import Hypothesis, Sampling, search
from nlgkit.search.constrained import constraint_words
from nlgkit.search.forced import forced_hypotheses
from nlgkit.tasks.base import Task


def generate(
    model: Generator,
    task: Task,
    sources: Sequence[Any],
    vocab: Vocabulary,
    *,
    beam: int = 5,
    nbest: int = 1,
    length_penalty: float = 1.0,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    max_len: int = 0,
    batch_size: int = 64,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
    no_unk: bool = False,
    sampling: Sampling | None = None,
    item_ids: Sequence[int] | None = None,
    device: torch.device | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    alignment: bool = False,
    prefixes: Sequence[list[int]] | None = None,
    constraints: Sequence[list[list[int]]] | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[list[Hypothesis]]:
    """Search every source; returns ``nbest`` hypotheses per input, in input order.

    Output length is limited to ``max_len_a * source_length + max_len_b`` tokens (the task defines a
    source's length: sentence tokens with </s> for translation, 0 for an image), and to ``max_len`` when > 0.
    ``min_len`` and ``no_repeat_ngram_size`` constrain the search (:mod:`nlgkit.search.beam`); padding and BOS
    are never output, nor ``<unk>`` with ``no_unk``. With ``sampling``, ``nbest`` outputs are drawn per input,
    keyed by ``item_ids`` (default: the inputs' positions), so the same item gives the same samples however the
    inputs are batched or grouped. ``alignment``: each hypothesis with its tokens' source positions (models
    that attend to source positions; ``translate --replace-unk``). ``prefixes``: the target word ids each input's
    outputs start with (``translate --target-prefix``); a prefix is never cut by the length limit (which counts
    it), and leaves room for at least one more token. ``constraints``: the phrases (target word ids) each input's
    outputs must contain, in any order (``translate --constraints``; :mod:`nlgkit.search.constrained`); the
    length limit leaves room for them and the prefix. ``on_batch(done, total)`` is called after each batch with the
    sources searched so far and all of them (a progress bar). ``warn``: told once (the first batch where it
    happens) when an input's length limit is below ``min_len``, whose outputs are then cut shorter than it (a limit
    that binds every input is :meth:`SearchOptions.check_min_len`'s error).
    """
    device = device or next(model.parameters()).device
    warn = once(warn) if warn is not None else None  # once a call (a stream's groups: the caller's own once)
    results: list[list[Hypothesis]] = [[] for _ in sources]
    done = 0
    with evaluating(model):
        for chunk, inputs, lengths in sorted_batches(task, sources, vocab, batch_size):
            state = model.encode({name: value.to(device) for name, value in inputs.items()})
            max_lens = length_limits(lengths, max_len_a, max_len_b, max_len)
            chunk_prefixes = [prefixes[i] for i in chunk] if prefixes is not None else None
            chunk_constraints = [constraints[i] for i in chunk] if constraints is not None else None
            room = [(len(prefixes[i]) if prefixes is not None else 0)
                    + (constraint_words(constraints[i]) if constraints is not None else 0) for i in chunk]
            if any(room):  # room for the prefix, the constraints and one more token
                max_lens = torch.maximum(max_lens, torch.tensor(room) + 1)
            if warn is not None and (message := min_len_warning(max_lens, lengths, min_len, max_len_a, max_len_b)):
                warn(message)
            found = search(model, state, batch_size=len(chunk), bos=vocab.bos_index, eos=vocab.eos_index,
                           beam_size=beam, max_lens=max_lens.to(device), length_penalty=length_penalty,
                           nbest=nbest, min_len=min_len, no_repeat_ngram_size=no_repeat_ngram_size,
                           never=never_ids(vocab, no_unk),
                           sampling=sampling, alignment=alignment, prefixes=chunk_prefixes,
                           constraints=chunk_constraints,
                           item_ids=torch.tensor([item_ids[i] if item_ids else i for i in chunk]))
            for i, hypotheses in zip(chunk, found):
                results[i] = hypotheses
            done += len(chunk)
            if on_batch is not None:
                on_batch(done, len(sources))
    return results


def length_limits(lengths: Tensor, max_len_a: float, max_len_b: int, max_len: int = 0) -> Tensor:
    """Each source's output limit in tokens: ``max_len_a · length + max_len_b`` (in float32), at least 1, and at
    most ``max_len`` when it is > 0. The one rule of nlgkit's search and of the CTranslate2 engine."""
    limits = (lengths.float() * max_len_a + max_len_b).long().clamp(min=1)
    return limits.clamp(max=max_len) if max_len > 0 else limits


def min_len_warning(limits: Tensor, lengths: Tensor, min_len: int, max_len_a: float,
                    max_len_b: int) -> str | None:
    """The warning that ``min_len`` is above some inputs' length ``limits`` (their outputs stop there, shorter
    than it), naming the lowest limit and its source's length; None when every limit leaves room for it."""
    if limits.numel() == 0 or int(limits.min()) >= min_len:  # (in Python: min_len may be any integer)
        return None
    j = int(limits.argmin())
    return (f"--min-len {min_len} is above the length limit of some inputs ({int(limits[j])} tokens for a source of "
            f"length {int(lengths[j])}: --max-len-a {max_len_a} × length + --max-len-b {max_len_b}): their outputs "
            "stop there, shorter than --min-len")


def once(warn: Callable[[str], None]) -> Callable[[str], None]:
    """``warn``, saying only its first message: for a warning about the options rather than one input (the
    ``min_len`` one), which each group of a stream would otherwise repeat."""
    said = False

    def first(message: str) -> None:
        nonlocal said
        if not said:
            said = True
            warn(message)

    return first


def never_ids(vocab: Vocabulary, no_unk: bool) -> tuple[int, ...]:
    """The ids the search never outputs: padding and BOS, which are not words, and ``<unk>`` with ``no_unk``."""
    return (vocab.pad_index, vocab.bos_index, *([vocab.unk_index] if no_unk else []))


@dataclass(frozen=True)
class ReferenceScore:
    """A reference's log-score under the model: ``log_prob`` over its ``tokens`` target tokens (its EOS
    counted), ``unknown`` of which are outside the target vocabulary (scored as ``<unk>``); ``token_scores``:
    each token's log-score, the EOS's last."""

    log_prob: float
    tokens: int
    unknown: int
    token_scores: list[float] = field(default_factory=list)


def score_references(model: Generator, task: Task, sources: Sequence[Any], references: Sequence[list[str]],
                     vocab: Vocabulary, *, batch_size: int = 64,
                     device: torch.device | None = None) -> list[ReferenceScore]:
    """The model's log-score of each reference (target tokens; its EOS is added) given its source, in input
    order: forced decoding through the search's own steps (:mod:`nlgkit.search.forced`), batched like
    :func:`generate`."""
    if len(references) != len(sources):
        raise ValueError(f"{len(sources)} sources but {len(references)} references")
    targets = [target_ids(vocab, tokens) for tokens in references]
    device = device or next(model.parameters()).device
    scored: list[Hypothesis | None] = [None] * len(sources)
    with evaluating(model):
        for chunk, inputs, _ in sorted_batches(task, sources, vocab, batch_size):
            state = model.encode({name: value.to(device) for name, value in inputs.items()})
            found = forced_hypotheses(model, state, [targets[i] for i in chunk], bos=vocab.bos_index,
                                      eos=vocab.eos_index)
            for i, hypothesis in zip(chunk, found, strict=True):
                scored[i] = hypothesis
    results = []
    for h, target in zip(scored, targets, strict=True):
        assert h is not None  # every source was in one batch
        results.append(ReferenceScore(h.log_prob, len(target) + 1, target.count(vocab.unk_index),
                                      h.token_scores or []))
    return results


def target_ids(vocab: Vocabulary, tokens: list[str]) -> list[int]:
    """Target tokens as the ids an output holds: special tokens written in the text (a literal ``</s>``) are
    unknown words, so that nothing but the search ends a target (a scored reference, a forced prefix)."""
    specials = {vocab.pad_index, vocab.bos_index, vocab.eos_index}
    return [vocab.unk_index if i in specials else i for i in vocab.encode(tokens)]


def sorted_batches(task: Task, sources: Sequence[Any], vocab: Vocabulary,
                   batch_size: int) -> Iterator[tuple[list[int], Inputs, Tensor]]:
    """``(indices, model inputs, source lengths)`` for batches of sources sorted by the task's length (little
    padding); the indices say where each batch's results go in input order."""
    order = sorted(range(len(sources)), key=lambda i: task.source_length(sources[i]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        inputs, lengths = task.source_inputs([sources[i] for i in chunk], vocab)
        yield chunk, inputs, lengths


@contextmanager
def evaluating(model: Generator) -> Iterator[None]:
    """The model in eval mode without autograd for the block; its training mode comes back afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


def best_texts(found: list[list[Hypothesis]], vocab: Vocabulary, detokenize: Callable[[list[str]], str]) -> list[str]:
    """The best hypothesis of each input as text in the form of the training text (subword undone, detokenised)."""
    return [detokenize(vocab.decode(hyps[0].tokens)) if hyps else "" for hyps in found]

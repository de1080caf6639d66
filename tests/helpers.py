"""Small builders shared by the tests: models with a head attached the way the production builder does."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import torch

from nlgkit.core.config import RunConfig
from nlgkit.core.io import read_lines
from nlgkit.core.recipes import load_recipe
from nlgkit.data.vocab import Vocabulary
from nlgkit.generation.decode import generate
from nlgkit.heads import HEADS, HeadContext, build_head
from nlgkit.metrics.corpus import bleu
from nlgkit.models.base import Generator, ModelContext
from nlgkit.models.rnn import RNNConfig, RNNModel
from nlgkit.runs.build import build_model
from nlgkit.runs.loading import load_trained
from nlgkit.tasks import build_task


def with_head(model: Generator, head: str, vocab_size: int, seed: int = 1, **options: Any) -> Generator:
    """Attach the registered head ``head`` (default options unless given) to ``model``."""
    config = HEADS.config_class(head)(type=head, **options)
    model.attach_head(build_head(config, HeadContext(model.feature_dim, vocab_size, 1, model.target_embedding(),
                                                      seed)))
    return model


def rnn(config: RNNConfig, src_size: int, tgt_size: int, head: str = "learned") -> RNNModel:
    """An RNN translation model over ``src_size``/``tgt_size`` vocabularies with the ``head`` head."""
    model = RNNModel(config, ModelContext(task="translation", tgt_vocab_size=tgt_size, pad_index=1,
                                          inputs={"src_vocab_size": src_size}))
    return with_head(model, head, tgt_size)  # type: ignore[return-value]


def model_for(config: RunConfig, src: Vocabulary, tgt: Vocabulary) -> Generator:
    """The model ``config`` describes for a translation task with these vocabularies."""
    vocabs = {config.data.src_lang: src, config.data.tgt_lang: tgt}
    return build_model(config, build_task(config).model_context(vocabs), tgt)


def check_one_search(model: Generator, inputs: dict[str, Any], batch_size: int, bos: int = 2, eos: int = 3,
                     max_len: int = 6) -> None:
    """A model decodes through the shared search: beam 1 equals greedy; beam 4 gives 4 ranked hypotheses,
    the same whether the search keeps the model's static state in place or copies it at every step; forced
    decoding of the ended ones (``translate --score-reference``) gives back the log-probability the beam gave.
    The constrained search (``--constraints``) is beam search without constraints, and with two phrases its best
    outputs hold them and score as forced decoding scores them."""
    import torch

    from nlgkit.search import Rules, beam_search, greedy_search
    from nlgkit.search.constrained import constrained_search
    from nlgkit.search.forced import forced_hypotheses

    max_lens = torch.full((batch_size,), max_len)
    if batch_size > 1:  # sentences of different lengths leave the batch at different steps
        max_lens[0] = max(1, max_len // 2)
    rules = Rules(batch_size=batch_size, bos=bos, eos=eos, max_lens=max_lens)
    greedy = greedy_search(model, model.encode(inputs), rules)
    beam1 = beam_search(model, model.encode(inputs), rules, beam_size=1)
    assert [h[0].tokens for h in greedy] == [h[0].tokens for h in beam1]
    beam4 = beam_search(model, model.encode(inputs), rules, beam_size=4, nbest=4)
    for hyps in beam4:
        assert len(hyps) == 4 and [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
    static, model.static_state = model.static_state, frozenset()  # copy every entry at every step
    try:
        copied = beam_search(model, model.encode(inputs), rules, beam_size=4, nbest=4)
    finally:
        model.static_state = static
    assert [[h.tokens for h in hyps] for hyps in copied] == [[h.tokens for h in hyps] for hyps in beam4]
    assert [[h.score for h in hyps] for hyps in copied] == [[h.score for h in hyps] for hyps in beam4]
    for ended in (True, False):  # outputs shorter than their max_len ended with an EOS; the others were cut
        found = [(i, h) for i, hyps in enumerate(beam4) for h in hyps if (len(h.tokens) < max_lens[i]) == ended]
        if not found:
            continue
        with torch.no_grad():
            state = model.reorder(model.encode(inputs), torch.tensor([i for i, _ in found]))
        forced = forced_hypotheses(model, state, [h.tokens for _, h in found], bos=bos, eos=eos, ended=ended)
        torch.testing.assert_close(torch.tensor([f.log_prob for f in forced]),
                                   torch.tensor([h.log_prob for _, h in found]), rtol=1e-5, atol=1e-4)
        for f, (_, h) in zip(forced, found, strict=True):  # each step's score, tracked through the reorders
            assert h.token_scores is not None and len(h.token_scores) == len(h.tokens) + int(ended)
            torch.testing.assert_close(torch.tensor(h.token_scores), torch.tensor(f.token_scores), rtol=1e-5,
                                       atol=1e-4)
            assert math.isclose(sum(h.token_scores), h.log_prob, rel_tol=1e-5, abs_tol=1e-4)
    for hyps in greedy:
        assert hyps[0].token_scores is not None
        assert math.isclose(sum(hyps[0].token_scores), hyps[0].log_prob, rel_tol=1e-5, abs_tol=1e-4)

    free = constrained_search(model, model.encode(inputs), rules, beam_size=4, nbest=4,
                              constraints=[[] for _ in range(batch_size)])
    assert [[(h.tokens, h.score) for h in hyps] for hyps in free] == [[(h.tokens, h.score) for h in hyps]
                                                                      for hyps in beam4], (free, beam4)
    vocab = model.head.vocab_size
    phrases = [[vocab - 1, vocab - 2], [max(bos, eos) + 1]]
    held = constrained_search(model, model.encode(inputs), dataclasses.replace(rules, max_lens=max_lens + 3),
                              beam_size=4, nbest=1, constraints=[phrases] * batch_size)
    best = [hyps[0] for hyps in held]
    for h in best:
        assert all(any(h.tokens[i : i + len(p)] == p for i in range(len(h.tokens))) for p in phrases), h.tokens
    with torch.no_grad():
        for ended in (True, False):
            found = [(i, h) for i, h in enumerate(best) if (len(h.tokens) < max_lens[i] + 3) == ended]
            if found:
                state = model.reorder(model.encode(inputs), torch.tensor([i for i, _ in found]))
                forced = forced_hypotheses(model, state, [h.tokens for _, h in found], bos=bos, eos=eos, ended=ended)
                torch.testing.assert_close(torch.tensor([f.log_prob for f in forced]),
                                           torch.tensor([h.log_prob for _, h in found]), rtol=1e-5, atol=1e-4)


def check_alignment(model: Generator, inputs: dict[str, Any], batch_size: int, bos: int = 2, eos: int = 3,
                    max_len: int = 6) -> None:
    """Searching with alignments (``translate --replace-unk``) changes no output; every token gets a source
    position inside its own sentence (never padding); and stepping the model alone along a hypothesis's tokens
    finds each position among its step's most attended ones: the search tracked them through its reorders."""
    import torch

    from nlgkit.core.alignment import ALIGNMENT
    from nlgkit.search import Rules, beam_search, greedy_search, sample_search
    from nlgkit.search.sampling import Sampling

    lengths = inputs["src_lengths"].tolist()
    max_lens = torch.full((batch_size,), max_len)
    max_lens[0] = max(1, max_len // 2)  # one sentence leaves the batch early
    searches = [(beam_search, {"beam_size": 4, "nbest": 4}), (greedy_search, {}),
                (sample_search, {"sampling": Sampling(seed=3), "samples": 2})]
    for search, options in searches:
        rules = Rules(batch_size=batch_size, bos=bos, eos=eos, max_lens=max_lens)
        plain = search(model, model.encode(inputs), rules, **options)  # type: ignore[operator]
        aligned = search(model, model.encode(inputs), dataclasses.replace(rules, alignment=True),
                         **options)  # type: ignore[operator]
        assert [[(h.tokens, h.score) for h in hyps] for hyps in plain] == \
            [[(h.tokens, h.score) for h in hyps] for hyps in aligned]
        assert all(h.alignment is None for hyps in plain for h in hyps)
        for i, hyps in enumerate(aligned):
            for hyp in hyps:
                assert hyp.alignment is not None and len(hyp.alignment) == len(hyp.tokens)
                assert all(0 <= position < lengths[i] for position in hyp.alignment), (hyp.alignment, lengths[i])
                with torch.no_grad():
                    state = model.reorder(model.encode(inputs), torch.tensor([i]))
                    state[ALIGNMENT] = torch.zeros(1, 0)
                    prev = bos
                    for token, position in zip(hyp.tokens, hyp.alignment):
                        _, state = model.step(torch.tensor([prev]), state)
                        weights = state[ALIGNMENT][0]
                        assert weights[position] >= weights.max() - 1e-5, (position, weights)
                        prev = token


def check_steps_match_teacher_forcing(model: Generator, batch: Any) -> None:
    """Decoding step by step from ``encode`` gives the features teacher forcing gives for the same tokens."""
    import torch

    with torch.no_grad():
        forced, _ = model(batch)
        state = model.encode(batch.inputs)
        for t in range(batch.prev_tokens.size(1)):
            features, state = model.step(batch.prev_tokens[:, t], state)
            torch.testing.assert_close(features, forced[:, t], rtol=1e-5, atol=1e-6)


RNN = """type = "rnn"
embedding_dim = 48
encoder_dim = 64
decoder_dim = 64
attention_dim = 48
pre_output_dim = 64"""
FIXED = 'type = "fixed"\ninit = "l2"\nbias = "fixed"'


def tiny_recipe(tmp: Path, data_dir: Path, run_dir: Path, dropout: float = 0.1, model: str = RNN,
                head: str = FIXED, beam: int = 3, valid_limit: int = 60, train_limit: int = 300,
                **train: object) -> Path:
    """A small model (``model`` and ``head``: the TOML lines of their sections) on a slice of real data; the
    loop, data and heads are the production ones."""
    settings = {"lr": 0.005, "batch_size": 25, "max_epochs": 14, "log_every": 5, "seed": 3,
                "lr_patience": 20, "early_stop_patience": 30, **train}
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in settings.items())
    path = tmp / f"{run_dir.name}.toml"
    path.write_text(f"""
[run]
dir = "{run_dir}"
[data]
dir = "{data_dir}"
train_limit = {train_limit}
valid_limit = {valid_limit}
[data.prepare]
corpus = "none"
[model]
{model}
dropout = {dropout}
[head]
{head}
[train]
{lines}
[search]
beam = {beam}
""")
    return path


def nlgkit_command(argv: list[str]) -> None:
    """Run ``nlgkit argv…`` in this process as the console entry does: returns on success; a failure raises
    SystemExit with its code after printing its one ``error:`` line."""
    from nlgkit.cli.main import main

    try:
        main(argv)
    except SystemExit as exc:
        if exc.code:
            raise


def reproduce(argv: list[str]) -> None:
    """``nlgkit reproduce argv…`` (see :func:`nlgkit_command`)."""
    nlgkit_command(["reproduce", *argv])


def trained_and_untrained_bleu(recipe: Path, run_dir: Path, data_dir: Path) -> tuple[float, float]:
    """BLEU (beam 3) on 100 memorised training sentences of the run's last checkpoint and of the same model
    untrained (seed 3)."""
    sources = [line.split() for line in read_lines(data_dir / "train.de")[:100]]
    refs = read_lines(data_dir / "train.en")[:100]
    run = load_trained(run_dir, "last", "cpu")
    detokenize = run.detokenizer()

    def score(model) -> float:  # type: ignore[no-untyped-def]
        hyps = generate(model, run.task, [run.source_vocab.encode(s) for s in sources], run.tgt_vocab, beam=3)
        return bleu([detokenize(run.tgt_vocab.decode(h[0].tokens)) for h in hyps], refs)

    torch.manual_seed(3)
    untrained = model_for(load_recipe(recipe), run.source_vocab, run.tgt_vocab).eval()
    return score(run.model), score(untrained)

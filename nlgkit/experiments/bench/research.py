"""Benchmarks of the research heads and models (run by ``make bench``, ``nlgkit bench``, through :mod:`nlgkit.experiments.bench.run`).

- Heads as the vocabulary grows: forward + backward of one head's training loss over 1,024 target tokens of
  512-dim features, for the full softmax, sampled softmax at 50 / 25 / 5 % and the continuous head (e = 128),
  at |V| = 8k, 32k and 128k (synthetic vocabularies; the rest of the model is the same for every row, so only
  the head differs).
- Beam-5 decoding speed of the translation models at Multi30K-like sizes (8,000-word vocabularies, 100
  synthetic sentences of 12–20 tokens), untrained: hypotheses run to the length limit (1.5·|x| + 10), so every
  model decodes the same number of steps. The Transformer is measured with and without its key/value cache.
- Whole-model training speed of a recipe's model with each output layer at a synthetic vocabulary size
  (``nlgkit reproduce pappas-speed``, Pappas et al.'s Table 4): embeddings, encoder, decoder, head,
  gradient clipping and the optimizer step, so a sampled softmax is credited only with what it saves of a whole
  update.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nlgkit.core.config import config_from_dict
from nlgkit.core.recipes import load_recipe
from nlgkit.data.batching import ParallelData
from nlgkit.data.vocab import SPECIALS
from nlgkit.experiments.bench.process import peak_rss_mib, spawn_json
from nlgkit.generation.decode import generate
from nlgkit.heads import HEADS, HeadContext, build_head
from nlgkit.heads.base import SamplingConfig
from nlgkit.runs.build import build_model, build_untrained, count_parameters, placeholder_vocabulary
from nlgkit.tasks import build_task
from nlgkit.train.objective import TrainingObjective
from nlgkit.train.optim import build_optimizer, build_scheduler
from nlgkit.train.update import optimizer_update

HEAD_CASES: dict[str, dict[str, Any]] = {
    "softmax": {"type": "learned"}, "sampled 50%": {"type": "learned", "share": 0.5},
    "sampled 25%": {"type": "learned", "share": 0.25}, "sampled 5%": {"type": "learned", "share": 0.05},
    "continuous": {"type": "continuous", "dim": 128}}
VOCABS = (8_000, 32_000, 128_000)
DECODERS = {
    "rnn": {"type": "rnn"},
    "lstm_luong": {"type": "lstm_luong"},
    "transformer (small, cached)": {"type": "transformer", "preset": "small"},
    "transformer (small, no cache)": {"type": "transformer", "preset": "small", "cache": False},
}


def measure_head(case: str, vocab_size: int, tokens: int = 1024, dim: int = 512, repeats: int = 5) -> dict[str, Any]:

    torch.manual_seed(0)
    options: dict[str, Any] = dict(HEAD_CASES[case])
    kind, share = options.pop("type"), options.pop("share", 1.0)
    config_class: Any = HEADS.config_class(kind)  # a HeadConfig: every head takes a sampling table
    config = config_class(type=kind, sampling=SamplingConfig(share=share), **options)
    context = HeadContext(feature_dim=dim, vocab_size=vocab_size, pad_index=1,
                          target_embedding=nn.Embedding(vocab_size, dim), seed=1)
    head = build_head(config, context).train()
    features = torch.randn(tokens, dim, requires_grad=True)
    targets = torch.randint(4, vocab_size, (tokens,))
    seconds = 0.0
    for i in range(repeats + 2):
        start = time.perf_counter()
        head.loss(features, targets).backward()
        if i >= 2:  # two warm-ups
            seconds += time.perf_counter() - start
    return {"head": case, "vocab": vocab_size, "tokens_per_s": tokens * repeats / seconds,
            "threads": torch.get_num_threads(), "peak_rss_mib": peak_rss_mib()}


def synthetic_parallel_data(vocab_size: int, sentences: int, seed: int = 1) -> Any:
    """Sentence pairs of 8–20 tokens whose ids follow a Zipf law (rank r has weight 1/r), as words in text do:
    a batch then holds as many distinct targets as real text would, which is what sampling keeps."""

    generator = torch.Generator().manual_seed(seed)
    words = vocab_size - len(SPECIALS)
    weights = 1.0 / torch.arange(1, words + 1, dtype=torch.float64)

    def sentence(length: int) -> list[int]:
        return (torch.multinomial(weights, length, replacement=True, generator=generator) + len(SPECIALS)).tolist()

    lengths = torch.randint(8, 21, (sentences, 2), generator=generator).tolist()
    return ParallelData(src=[sentence(s) for s, _ in lengths], tgt=[sentence(t) for _, t in lengths])


def measure_model_training(recipe: str, overrides: list[str], vocab_size: int, sentences: int, updates: int,
                           warmup: int, device: str = "cpu") -> dict[str, Any]:
    """Target tokens/s of whole training updates (the trainer's ``optimizer_update``) of the recipe's model, with
    ``overrides`` applied, on synthetic batches of ``sentences`` pairs over a ``vocab_size`` vocabulary on each
    side (Pappas et al. share one BPE vocabulary between the languages). On a GPU the update runs in float32, as
    the paper's did, and the clock stops only once the device has finished it."""

    config = load_recipe(recipe, overrides)
    if config.train.num_threads > 0:
        torch.set_num_threads(config.train.num_threads)
    torch.manual_seed(config.train.seed)
    task, vocabs, model = build_untrained(config, vocab_size=vocab_size)
    vocab = vocabs[task.target_lang]
    where = torch.device(device)
    model.to(where).train()
    optimizer = build_optimizer(config, model, where)
    scheduler = build_scheduler(config, optimizer)
    objective = TrainingObjective(model, config.train.label_smoothing)
    data = synthetic_parallel_data(vocab_size, sentences * (warmup + updates), seed=config.train.seed)
    tokens, seconds = 0, 0.0
    for i in range(warmup + updates):
        batch = task.collate(data, list(range(i * sentences, (i + 1) * sentences)), vocab).to(where)
        start = time.perf_counter()
        optimizer_update(model, objective, optimizer, scheduler, batch, clip_norm=config.train.clip_norm)
        if where.type == "cuda":
            torch.cuda.synchronize(where)
        if i >= warmup:
            seconds += time.perf_counter() - start
            tokens += batch.num_target_tokens
    return {"recipe": recipe, "overrides": overrides, "vocab": vocab_size, "sentences": sentences,
            "updates": updates, "target_tokens": tokens, "tokens_per_s": tokens / seconds,
            "trainable_parameters": count_parameters(model)["trainable"], "threads": torch.get_num_threads(),
            "peak_rss_mib": peak_rss_mib(), "device": device,
            "peak_gpu_mib": torch.cuda.max_memory_allocated(where) / 2**20 if where.type == "cuda" else None}


def measure_decoding(name: str, beam: int = 5, sentences: int = 100) -> dict[str, Any]:

    torch.manual_seed(0)
    config = config_from_dict({"model": DECODERS[name], "head": {"type": "learned"}}, "bench")
    vocab = placeholder_vocabulary(8000)
    task = build_task(config)
    vocabs = {lang: vocab for lang in task.languages}
    model = build_model(config, task.model_context(vocabs), vocab).eval()
    generator = torch.Generator().manual_seed(1)
    sources = [torch.randint(4, 8000, (int(n),), generator=generator).tolist() + [vocab.eos_index]
               for n in torch.randint(12, 21, (sentences,), generator=generator)]
    start = time.perf_counter()
    found = generate(model, task, sources, vocab, beam=beam, batch_size=50)
    seconds = time.perf_counter() - start
    steps = sum(len(h[0].tokens) for h in found)
    return {"model": name, "beam": beam, "sentences": sentences, "sentences_per_s": sentences / seconds,
            "output_tokens": steps, "threads": torch.get_num_threads(), "peak_rss_mib": peak_rss_mib()}


def spawn_model_training(recipe: str, overrides: list[str], vocab_size: int, sentences: int, updates: int,
                         warmup: int, device: str = "cpu") -> dict[str, Any]:
    """:func:`measure_model_training` in a fresh process, so that each row's peak memory is its own."""
    # the child runs in the repository root: the recipe path must not depend on this process's directory
    case = {"recipe": str(Path(recipe).resolve()), "overrides": overrides, "vocab_size": vocab_size,
            "sentences": sentences, "updates": updates, "warmup": warmup, "device": device}
    return spawn_json("--worker", "model-training", "--case", json.dumps(case))

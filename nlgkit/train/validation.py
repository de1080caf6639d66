"""The per-epoch validation of a training run: teacher-forced loss per token, and the task's scores of the
model's own output (greedy or a small beam) through the one search."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from nlgkit.core.config import RunConfig
from nlgkit.data.batching import bucketed_batches
from nlgkit.generation.decode import best_texts, generate
from nlgkit.train.session import Session


def validation_scores(config: RunConfig, session: Session, run_dir: Path) -> dict[str, float]:
    """``loss``, ``ppl`` and the task's scores (BLEU, CIDEr, …) of ``session.model`` on the validation set; the
    run's copied assets in ``run_dir``/data detokenise the output as ``translate`` will."""
    model, data, task = session.model, session.data, session.task
    model.eval()
    # summed on the device (in float64, as a Python float would): one read at the end, not a GPU sync a batch
    total, tokens = torch.zeros((), dtype=torch.float64, device=session.device), 0
    with torch.inference_mode():
        for indices in bucketed_batches(data.valid, 64, "sentences", seed=0, epoch=0, shuffle=False):
            batch = task.collate(data.valid, indices, session.tgt_vocab).to(session.device)
            with session.autocast:
                features, _ = model(batch)
                total += model.head.loss(features, batch.targets).detach().to(torch.float64)
            tokens += batch.num_target_tokens
    search = config.search
    hyps = generate(model, task, data.valid_sources, session.tgt_vocab, beam=config.train.valid_beam,
                    length_penalty=search.length_penalty, max_len_a=search.max_len_a,
                    max_len_b=search.max_len_b, min_len=search.min_len,
                    no_repeat_ngram_size=search.no_repeat_ngram_size, no_unk=search.no_unk,
                    batch_size=max(search.batch_size, 64), device=session.device)
    texts = best_texts(hyps, session.tgt_vocab, task.detokenizer(run_dir / "data"))
    model.train()
    loss = float(total) / max(tokens, 1)
    return {"loss": loss, "ppl": math.exp(min(loss, 50.0)), **task.score(texts, data.valid_refs)}

"""A run's outputs of a split, for every task: the kept ones when current, else generated once and kept.

The task reads the split's sources and references and names the outputs file; the best checkpoint searches
with the recipe's ``[search]`` (or another beam), and the outputs are kept with a stamp naming what made
them (:mod:`nlgkit.runs.outputs`). A run record keeps no weights: its kept outputs are the only ones it has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nlgkit.core.errors import DataError
from nlgkit.generation.decode import best_texts, generate
from nlgkit.runs.loading import load_trained
from nlgkit.runs.outputs import (
    is_record,
    keep_outputs,
    kept_outputs,
    outputs_file,
    references_dir,
    run_config,
)
from nlgkit.runs.records import check_record
from nlgkit.tasks import build_task


@dataclass
class SplitOutputs:
    texts: list[str]  # one output per item of the split
    refs: list[list[str]]  # the references of each item (one or more)
    file: Path  # where the outputs are kept
    reused: bool  # read from ``file`` rather than generated now


def split_outputs(run_dir: Path, split: str = "test", beam: int | None = None, device: str = "auto",
                  log: Callable[[str], None] | None = None) -> SplitOutputs:
    """The best checkpoint's outputs of ``split`` with the recipe's search (or ``beam``), with references."""
    run_dir = Path(run_dir)
    record = is_record(run_dir)
    if record:
        check_record(run_dir)
    config = run_config(run_dir, beam)
    task = build_task(config)
    refs = task.split_references(references_dir(run_dir, config), split)
    path = outputs_file(run_dir, config, split)
    texts = kept_outputs(run_dir, config, split, len(refs))
    if texts is not None:
        return SplitOutputs(texts, refs, path, True)
    if record:
        raise DataError(f"{path}: not in this run record (or not of its best checkpoint and search), which keeps "
                        "no weights to generate with")
    data_dir = Path(config.data.dir)
    if log:
        log(f"{run_dir}: generating {data_dir} {split} with the best checkpoint, beam {config.search.beam}")
    run = load_trained(run_dir, "best", device=device)
    s = config.search
    found = generate(run.model, run.task, run.task.split_sources(data_dir, split, run.vocabs, run.device),
                     run.tgt_vocab, beam=s.beam, length_penalty=s.length_penalty, max_len_a=s.max_len_a,
                     max_len_b=s.max_len_b, min_len=s.min_len, no_repeat_ngram_size=s.no_repeat_ngram_size,
                     no_unk=s.no_unk, batch_size=s.batch_size, device=run.device)
    texts = best_texts(found, run.tgt_vocab, run.detokenizer())
    if len(texts) != len(refs):
        raise DataError(f"{data_dir}: {split} has {len(texts)} sources but {len(refs)} references")
    return SplitOutputs(texts, refs, keep_outputs(run_dir, config, split, texts), False)

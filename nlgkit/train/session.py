"""What a training session holds: the objects built once (:class:`Session`) and the loop's position
(:class:`LoopState`), shared by the loop (:mod:`nlgkit.train.trainer`) and its checkpoints
(:mod:`nlgkit.train.checkpointing`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from nlgkit.models.base import Generator
from nlgkit.runs.metrics_log import MetricsLog
from nlgkit.tasks import Task, TaskData
from nlgkit.train.distributed import Ranks
from nlgkit.train.ema import WeightAverage


@dataclass
class LoopState:
    """Where the loop is: everything besides weights/optimizer that a resumed run needs."""

    epoch: int = 1
    batch_in_epoch: int = 0  # batches of ``epoch`` already trained on
    update: int = 0
    best_score: float = -1.0  # best validation value of the task's metric (BLEU, CIDEr, …)
    best_epoch: int = 0
    bad_epochs: int = 0  # validations since the patience last restarted
    patience_score: float | None = None  # the score that restarted it (best_score unless train.min_delta > 0)
    wall_seconds: float = 0.0
    train_tokens: int = 0
    finished: bool = False
    stop_reason: str = ""

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> LoopState:
        """A saved loop position; states written before tasks existed call the best score ``best_bleu``."""
        saved = dict(saved)
        if "best_bleu" in saved:
            saved["best_score"] = saved.pop("best_bleu")
        if "patience_score" not in saved and saved.get("best_epoch"):  # a state written before train.min_delta
            saved["patience_score"] = saved["best_score"]
        return cls(**saved)

    def count_validation(self, score: float, min_delta: float) -> bool:
        """Count one validation's score; True when it is the best so far (the best checkpoint follows every gain).
        The patience of early stopping restarts only on a gain of more than ``min_delta`` over the score that last
        restarted it (PyTorch Lightning's and Keras's ``min_delta``), so gains of hundredths of a BLEU point do not
        keep a converged run going for another full patience each; with 0, any gain restarts it (Shalev et al.)."""
        improved = score > self.best_score
        if improved:
            self.best_score, self.best_epoch = score, self.epoch
        if self.patience_score is None or score > self.patience_score + min_delta:  # (the first always counts)
            self.patience_score, self.bad_epochs = score, 0
        else:
            self.bad_epochs += 1
        return improved


@dataclass
class Session:
    """Everything a training session builds once: the objects the loop's steps share."""

    task: Task
    data: TaskData
    model: Generator
    optimizer: torch.optim.Optimizer
    scheduler: Any
    device: torch.device
    autocast: Any
    log: MetricsLog
    params: dict[str, Any]
    objective: torch.nn.Module  # model + head loss in one forward (wrapped for data parallelism if distributed)
    ranks: Ranks
    embeddings: dict[str, Any] = field(default_factory=dict)  # side → the table that initialised it (provenance)
    # The revision of the code this process runs, read once (rank 0): an edit of the checkout mid-run does not
    # change the code already imported, and reading it at every checkpoint cost ~160 ms a save in a checkout
    # with edits (git builds a tree of them)
    git: dict[str, Any] = field(default_factory=dict)
    init_from: dict[str, Any] = field(default_factory=dict)  # the checkpoint a fine-tuning run started from
    ema: WeightAverage | None = None  # the trainable weights' moving average (train.ema_decay > 0)
    scaler: torch.amp.GradScaler | None = None  # float16 autocast's dynamic loss scale (train.precision.loss_scaler)

    @functools.cached_property
    def vocab_checksums(self) -> dict[str, str]:
        """Language → sha256 of its vocabulary file, hashed once: every checkpoint records them, and re-hashing
        Multi30K's two vocabularies at each save was half of a tiny model's checkpoint time."""
        return {lang: vocab.checksum() for lang, vocab in self.data.vocabs.items()}

    @property
    def tgt_vocab(self) -> Any:
        return self.data.vocabs[self.task.target_lang]

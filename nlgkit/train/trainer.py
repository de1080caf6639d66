"""The training loop: teacher forcing, Adam, plateau schedule on the task's validation metric, early stopping.

The loop never looks inside a batch or a task: the task loads and batches the data and scores the
validation output (BLEU for translation, CIDEr or BLEU-4 for captioning); the model returns features and
its auxiliary losses; the head turns features into the main loss.

Resuming restores weights, optimizer, scheduler, RNG state and the position inside the epoch, and the
epoch's batch order is a function of (seed, epoch): on CPU an interrupted-and-resumed run ends with the
same weights as an uninterrupted one (:mod:`nlgkit.train.checkpointing` saves and restores that state).

Under ``torchrun`` every rank runs this loop on its share of each global batch
(:mod:`nlgkit.train.distributed`); rank 0 alone validates and writes, and every decision that depends
on a clock, a signal or a score is taken by all ranks together.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from nlgkit.core.config import RunConfig
from nlgkit.data.batching import Batch, bucketed_batches
from nlgkit.data.vocab import Vocabulary
from nlgkit.runs.build import (
    build_model,
    count_parameters,
    select_device,
)
from nlgkit.runs.checkpoint import find_checkpoint
from nlgkit.runs.data import ensure_data_dir
from nlgkit.runs.embeddings import initialise_embeddings
from nlgkit.runs.epochs import epoch_dir, prune_epoch_checkpoints
from nlgkit.runs.provenance import git_revision
from nlgkit.runs.weight_init import initialise_weights
from nlgkit.tasks import Task, TaskData, build_task
from nlgkit.train.checkpointing import check_run_dir, restore_training_checkpoint, save_training_checkpoint
from nlgkit.train.compilation import compile_training
from nlgkit.train.distributed import Ranks, data_parallel, rank_seed
from nlgkit.train.ema import WeightAverage
from nlgkit.train.init_from import start_from
from nlgkit.train.objective import TrainingObjective
from nlgkit.train.optim import build_optimizer, build_scheduler
from nlgkit.train.precision import loss_scaler, precision_label, precision_note, training_autocast
from nlgkit.train.run_lock import training_lock
from nlgkit.train.run_records import write_run_records, write_summary
from nlgkit.train.session import LoopState, Session
from nlgkit.train.signals import MetricWindow, StopOnSignal
from nlgkit.train.tensorboard import TensorBoardLog, open_metrics_log
from nlgkit.train.update import accumulated_update
from nlgkit.train.validation import validation_scores


class Trainer:
    def __init__(self, config: RunConfig, *, resume: bool = False, console: Console | None = None,
                 show_progress: bool = True) -> None:
        self.config = config
        self.resume = resume
        self.console = console or Console(stderr=True, soft_wrap=True)  # a message stays one line in a log file
        self.show_progress = show_progress
        self.run_dir = Path(config.run.dir)
        self.last_dir = self.run_dir / "checkpoints" / "last"
        self.best_dir = self.run_dir / "checkpoints" / "best"
        # the signal (SIGINT, SIGTERM) that stopped the run before its end: `nlgkit train` exits 128 + it, so that
        # `nlgkit train … && nlgkit translate …` does not go on with a run that a Ctrl-C or a scheduler stopped
        self.stopped_by_signal: int | None = None

    # -- the loop -----------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train until the task's metric stops improving (or a limit or a signal), checkpointing as it goes."""
        check_run_dir(self.run_dir, self.last_dir, self.resume)  # (before the lock creates the directory)
        with training_lock(self.run_dir) if Ranks.from_environment().is_main else nullcontext():
            check_run_dir(self.run_dir, self.last_dir, self.resume)  # as the run is now, the lock held
            session = self.set_up()
            try:
                return self._run(session)
            finally:
                if isinstance(session.log, TensorBoardLog):
                    session.log.close()
                session.ranks.leave()

    def _run(self, session: Session) -> dict[str, Any]:
        loop = self._restore(session) if self.resume else self._start(session)
        if loop.finished:
            self.console.print(f"{self.run_dir}: already finished ({loop.stop_reason})")
            return write_summary(self.run_dir, loop, session)
        ranks = session.ranks
        self.console.print(f"[bold]{self.run_dir}[/]: {session.params['trainable']:,} trainable parameters, "
                           f"{len(session.data.train):,} training examples, device {session.device} "
                           f"({precision_label(self.config.train, session.device)})"
                           + (f", rank 0 of {ranks.world_size}" if ranks.distributed else ""))
        session.model.train()
        clock = (time.perf_counter(), loop.wall_seconds)
        stopped = False
        with self._progress() as progress, StopOnSignal() as stop_signal:
            while not (loop.finished or stopped):
                stopped, epoch_done = self._train_epoch(session, loop, progress, stop_signal, clock)
                if loop.finished:  # a validation inside the epoch stopped the run, its checkpoints written
                    break
                if epoch_done:
                    self._end_epoch(session, loop)
                else:
                    self._pause_inside_epoch(session, loop)
        if stop_signal.signum is not None and not loop.finished:  # (resumable: its checkpoint is written)
            self.stopped_by_signal = stop_signal.signum
        session.log.write("end", reason=loop.stop_reason, update=loop.update, epoch=loop.epoch,
                          metric=session.task.metric, best=loop.best_score, wall_s=round(loop.wall_seconds, 1),
                          train_tokens=loop.train_tokens)
        if loop.best_epoch:
            self.console.print(f"stopped: {loop.stop_reason}; best validation {session.task.metric} "
                               f"{loop.best_score:.2f} (epoch {loop.best_epoch})")
        else:  # stopped before the first epoch ended: no best score to report (-1 is "none yet")
            self.console.print(f"stopped: {loop.stop_reason}; no validation ran yet (the first comes at the end "
                               f"of epoch {loop.epoch})")
        return write_summary(self.run_dir, loop, session)

    # -- set-up -------------------------------------------------------------------------------------------
    def _read_data(self, task: Task, device: torch.device) -> tuple[dict[str, Vocabulary], TaskData]:
        """The vocabularies and the task's data, from the data directory (prepared first where it is missing)."""
        data_dir = ensure_data_dir(self.config, task, log=self.console.print)
        vocabs = task.load_vocabularies(data_dir)
        return vocabs, task.load_data(data_dir, vocabs, device)

    def set_up(self) -> Session:
        """Threads, seed, device, process group, task, data, model, optimizer and schedule (nothing written)."""
        cfg, t = self.config, self.config.train
        ranks = Ranks.from_environment()
        if not ranks.is_main:
            self.console, self.show_progress = Console(stderr=True, quiet=True), False
        if t.num_threads > 0:
            torch.set_num_threads(t.num_threads)
        torch.manual_seed(t.seed)
        device = ranks.device(select_device(t.device))
        ranks.join(device)
        autocast = training_autocast(t, device)
        if ranks.is_main and (note := precision_note(t, device)):
            self.console.print(note)
        task = build_task(cfg)
        # Rank 0 reads first: it prepares missing data, binarises the corpus and extracts image features while the
        # others wait, then they map its caches instead of each doing that work again at the same time.
        if ranks.is_main:
            vocabs, data = self._read_data(task, device)
        ranks.barrier()
        if not ranks.is_main:
            vocabs, data = self._read_data(task, device)
        model = build_model(cfg, task.model_context(vocabs), vocabs[task.target_lang])
        initialise_weights(model, t.weight_init)  # a resumed run's checkpoint replaces these, as the tables' rows
        embeddings = initialise_embeddings(model, cfg, task, vocabs)
        for side, done in embeddings.items():
            self.console.print(f"{side} embedding from {done['table']}: {done['found']:,} of {done['rows']:,} "
                               "words found")
        # every rank loads the same weights before data parallelism wraps the model
        started = start_from(cfg, model, vocabs) if t.init_from and not self.resume else {}
        if started:
            self.console.print(f"weights from {started['checkpoint']} (epoch {started['epoch']}, update "
                               f"{started['update']}); optimizer, schedule and epochs start afresh")
        model = model.to(device)
        optimizer = build_optimizer(cfg, model, device)
        scheduler = build_scheduler(cfg, optimizer)
        objective = data_parallel(TrainingObjective(model, t.label_smoothing), ranks, device)
        if t.compile:
            objective = compile_training(objective, model)
        if ranks.rank > 0:  # same initial weights everywhere; each rank its own dropout and sampling draws
            torch.manual_seed(rank_seed(t.seed, ranks.rank))
        log = open_metrics_log(self.run_dir / "metrics.jsonl", is_main=ranks.is_main, tensorboard=t.tensorboard)
        return Session(task, data, model, optimizer, scheduler, device, autocast, log, count_parameters(model),
                       objective, ranks, embeddings, git_revision() if ranks.is_main else {}, started,
                       WeightAverage(model, t.ema_decay) if t.ema_decay else None, loss_scaler(t, device))

    def _start(self, session: Session) -> LoopState:
        """A new run: record config, data manifest, provenance and the start event (rank 0)."""
        if session.ranks.is_main:
            write_run_records(self.config, session, self.run_dir)
        return LoopState()

    def _restore(self, session: Session) -> LoopState:
        """The last checkpoint's state (:func:`~nlgkit.train.checkpointing.restore_training_checkpoint`),
        extended when the recipe now allows more epochs."""
        loop = restore_training_checkpoint(self.config, session, self.last_dir, self.console)
        self._extend_if_limits_grew(session, loop)
        return loop

    def _extend_if_limits_grew(self, session: Session, loop: LoopState) -> None:
        """A run that finished by a limit the recipe now sets higher (max_epochs, early-stop patience)
        goes on with its next epoch, as if it had been started with that limit (fairseq's --max-epoch)."""
        t = self.config.train
        if not loop.finished or self._limit_reached(loop, session.task.metric, self._lr(session)):
            return
        self.console.print(f"{self.run_dir}: finished ({loop.stop_reason}); train.max_epochs = {t.max_epochs} and "
                           f"train.early_stop_patience = {t.early_stop_patience} let it go on from epoch "
                           f"{loop.epoch + 1}")
        session.log.write("extend", epoch=loop.epoch + 1, update=loop.update, previous_stop=loop.stop_reason)
        loop.finished, loop.stop_reason = False, ""
        loop.epoch, loop.batch_in_epoch = loop.epoch + 1, 0

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TextColumn("loss {task.fields[loss]:.3f}"), TextColumn("{task.fields[tps]:,.0f} tok/s"),
            TextColumn("lr {task.fields[lr]:.2e}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=self.console, disable=not (self.show_progress and self.console.is_terminal), transient=True,
            redirect_stdout=False,  # what a plug-in prints stays on stdout, not moved into the bar's console
        )

    # -- one epoch's pieces -------------------------------------------------------------------------------
    def train_step(self, session: Session, batch: Batch | list[Batch], tokens: list[int] | None = None,
                   examples: list[int] | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One update of ``session`` from a batch or a group of batches whose gradients add up
        (:func:`~nlgkit.train.update.accumulated_update`); ``tokens`` and ``examples``: each batch's target tokens
        and examples over all ranks (default: its own, in one process)."""
        batches = batch if isinstance(batch, list) else [batch]
        tokens = tokens or [b.num_target_tokens for b in batches]
        examples = examples or [len(b.indices) for b in batches]
        return accumulated_update(session.model, session.objective, session.optimizer, session.scheduler, batches,
                                  [n / sum(examples) for n in examples], clip_norm=self.config.train.clip_norm,
                                  loss_tokens=sum(tokens) / session.ranks.world_size, autocast=session.autocast,
                                  scaler=session.scaler)

    def _train_epoch(self, session: Session, loop: LoopState, progress: Progress, stop_signal: StopOnSignal,
                     clock: tuple[float, float]) -> tuple[bool, bool]:
        """Train the rest of ``loop.epoch``: (stopped by a limit or a signal, epoch complete)."""
        t, ranks, data = self.config.train, session.ranks, session.data.train
        batches = bucketed_batches(data, t.batch_size, t.batch_unit, t.seed, loop.epoch)
        target_lengths = data.target_lengths if ranks.distributed else []
        if ranks.distributed and loop.batch_in_epoch == 0:  # every rank needs an example of each batch
            setting = f"train.batch_size = {t.batch_size} {t.batch_unit}"
            if skipped := ranks.skipped_batches(batches, setting):
                session.log.write("shard", epoch=loop.epoch, skipped_batches=skipped, batches=len(batches),
                                  world_size=ranks.world_size)
        bar = progress.add_task("train", total=len(batches), completed=loop.batch_in_epoch, epoch=loop.epoch,
                                loss=0.0, tps=0.0, lr=self._lr(session))
        window = MetricWindow()
        session_start, wall_at_start = clock
        interrupted = False
        for position in range(loop.batch_in_epoch, len(batches), t.accumulate):  # an update's batches
            # too few examples for every rank to get one: all ranks skip that batch (logged per epoch)
            group = [indices for indices in batches[position : position + t.accumulate] if ranks.can_share(indices)]
            loop.batch_in_epoch = min(position + t.accumulate, len(batches))
            if not group:
                continue
            micro = [session.task.collate(data, ranks.shard(indices), session.tgt_vocab).to(session.device)
                     for indices in group]
            counts = ([sum(target_lengths[i] + 1 for i in indices) for indices in group] if ranks.distributed
                      else [batch.num_target_tokens for batch in micro])
            loss_sum, aux = self.train_step(session, micro, counts, [len(indices) for indices in group])
            window.add(loss_sum, aux, sum(batch.num_target_tokens for batch in micro))
            loop.train_tokens += sum(counts)
            loop.update += 1
            if session.ema is not None:
                session.ema.update(session.model, loop.update)
            loop.wall_seconds = wall_at_start + time.perf_counter() - session_start
            lr = self._lr(session)
            progress.update(bar, advance=loop.batch_in_epoch - position, tps=window.tokens_per_s * ranks.world_size,
                            lr=lr)
            if loop.update % t.log_every == 0:
                progress.update(bar, loss=window.loss)  # reading the loss waits for the device: only here
                loss_total, tokens_total = ranks.sum([window.loss_sum, float(window.tokens)], session.device)
                session.log.write("train", update=loop.update, epoch=loop.epoch,
                                  loss=loss_total / max(tokens_total, 1.0), tokens=int(tokens_total),
                                  tokens_per_s=tokens_total / window.seconds, lr=lr,
                                  wall_s=round(loop.wall_seconds, 1),
                                  **window.aux_means(), **session.model.head.train_stats(),
                                  **({"loss_scale": session.scaler.get_scale()} if session.scaler is not None else {}))
                window = MetricWindow()
            reason = ""
            if t.max_updates and loop.update >= t.max_updates:
                reason = f"train.max_updates = {t.max_updates} reached"
            elif t.max_minutes and loop.wall_seconds >= 60 * t.max_minutes:
                reason = f"train.max_minutes = {t.max_minutes} reached"
            elif stop_signal.requested:
                reason = "stopped by a signal (resume with --resume)"
            if ranks.any(bool(reason), session.device):  # a clock or a signal on one rank stops every rank
                loop.stop_reason = reason or "stopped on another rank (resume with --resume)"
                interrupted = True
                break
            if t.validate_every_updates and loop.update % t.validate_every_updates == 0:
                if self._validate_inside_epoch(session, loop):
                    break
            elif t.save_every_updates and loop.update % t.save_every_updates == 0 and loop.batch_in_epoch < len(batches):
                self._save(session, loop, self.last_dir, {})  # the epoch's end saves its own
        progress.remove_task(bar)
        return interrupted, loop.batch_in_epoch >= len(batches)

    def _end_epoch(self, session: Session, loop: LoopState) -> None:
        """Validate (unless the run validates every N updates), decide whether to stop, and checkpoint (best,
        last and the epoch's weights)."""
        validating = not self.config.train.validate_every_updates
        metrics, improved = self._validation_point(session, loop) if validating else ({}, False)
        self._decide_and_checkpoint(session, loop, metrics, improved, epoch_end=True)

    def _validate_inside_epoch(self, session: Session, loop: LoopState) -> bool:
        """A validation every ``train.validate_every_updates`` updates: decide, checkpoint best and last (so a
        resumed run continues from here); True when the run stops."""
        metrics, improved = self._validation_point(session, loop)
        self._decide_and_checkpoint(session, loop, metrics, improved, epoch_end=False)
        return loop.finished

    def _decide_and_checkpoint(self, session: Session, loop: LoopState, metrics: dict[str, float], improved: bool,
                               epoch_end: bool) -> None:
        """Stop or go on (to the next epoch at an epoch's end), then write best (when improved), at an epoch's end
        the epoch's weights, and last.

        ``last`` comes last: a run killed before it is written resumes from the previous ``last`` and writes the
        others again, so a resumed run keeps every checkpoint an uninterrupted one keeps."""
        epoch = loop.epoch
        reason = self._limit_reached(loop, session.task.metric, self._lr(session), epoch_end=epoch_end)
        if reason:
            loop.finished, loop.stop_reason = True, reason
        elif epoch_end:
            loop.epoch += 1
            loop.batch_in_epoch = 0
        if improved:
            self._save(session, loop, self.best_dir, metrics, with_state=False)
        if epoch_end and self.config.train.keep_epochs:  # for `nlgkit average`: the last and best K epochs stay
            self._save(session, loop, epoch_dir(self.run_dir, epoch), metrics, with_state=False)
            if session.ranks.is_main:
                prune_epoch_checkpoints(self.run_dir, self.config.train.keep_epochs, session.task.metric)
        self._save(session, loop, self.last_dir, metrics)

    def _validation_point(self, session: Session, loop: LoopState) -> tuple[dict[str, float], bool]:
        """Validate, count the validations without improvement, step the plateau schedule, log: (scores,
        improved)."""
        metric = session.task.metric
        metrics = self.validate(session)
        improved = loop.count_validation(metrics[metric], self.config.train.min_delta)
        session.scheduler.after_epoch(metrics[metric], metrics["loss"])
        lr = self._lr(session)
        session.log.write("valid", epoch=loop.epoch, update=loop.update, lr=lr, wall_s=round(loop.wall_seconds, 1),
                          metric=metric, best=loop.best_score, **metrics)
        where = f"update {loop.update}  " if self.config.train.validate_every_updates else ""
        self.console.print(
            f"epoch {loop.epoch:3d}  {where}valid loss {metrics['loss']:.3f}  ppl {metrics['ppl']:.1f}  "
            f"{metric} {metrics[metric]:.2f}  (best {loop.best_score:.2f} @ {loop.best_epoch})  "
            f"lr {lr:.2e}  {loop.wall_seconds / 60:.1f} min")
        return metrics, improved

    @property
    def _validations(self) -> str:
        """What the patience counts: epochs, or validations when they come every N updates."""
        return "validations" if self.config.train.validate_every_updates else "epochs"

    @staticmethod
    def _lr(session: Session) -> float:
        return float(session.optimizer.param_groups[0]["lr"])

    def _limit_reached(self, loop: LoopState, metric: str, lr: float, epoch_end: bool = True) -> str:
        """Why training stops after the current validation or epoch (early stopping, max_epochs at an epoch's
        end, a rate decayed below train.stop_min_lr), or "" to go on."""
        t = self.config.train
        if loop.bad_epochs >= t.early_stop_patience:
            gain = f" above {t.min_delta:g}" if t.min_delta else ""
            return f"no {metric} improvement{gain} for {loop.bad_epochs} {self._validations}"
        if epoch_end and loop.epoch >= t.max_epochs:
            return f"train.max_epochs = {t.max_epochs} reached"
        if lr < t.stop_min_lr:
            return f"learning rate {lr:.2e} below train.stop_min_lr = {t.stop_min_lr:g}"
        return ""

    def _pause_inside_epoch(self, session: Session, loop: LoopState) -> None:
        """Stopped inside an epoch (a limit or a signal): keep the position for --resume, and make sure a
        usable "best" exists even if no epoch was validated yet."""
        if session.ranks.from_main(find_checkpoint(self.best_dir) is None):
            metrics = self.validate(session)
            session.log.write("valid", epoch=loop.epoch, update=loop.update, partial=True,
                              metric=session.task.metric, **metrics)
            self._save(session, loop, self.best_dir, metrics, with_state=False)
        self._save(session, loop, self.last_dir, {})

    def validate(self, session: Session) -> dict[str, float]:
        """Validation loss per token (teacher forcing) and the task's scores of greedy/beam output.

        Rank 0 validates and every other rank receives its scores (so all take the same decisions). A run that
        averages its weights (``train.ema_decay``) is scored on the average.
        """
        with session.ema.applied(session.model) if session.ema is not None else nullcontext():
            scores = validation_scores(self.config, session, self.run_dir) if session.ranks.is_main else {}
            return session.ranks.from_main(scores)

    # -- checkpoints and summary --------------------------------------------------------------------------
    def _save(self, session: Session, loop: LoopState, directory: Path, metrics: dict[str, Any],
              with_state: bool = True) -> None:
        """Checkpoint into ``directory`` (``with_state``: optimizer, schedule, RNG and loop for --resume, and the
        raw weights; without: the weight average where the run keeps one, as validation scored it)."""
        averaged = session.ema is not None and not with_state
        with session.ema.applied(session.model) if averaged else nullcontext():  # type: ignore[union-attr]
            save_training_checkpoint(self.config, session, loop, directory, metrics, with_state)

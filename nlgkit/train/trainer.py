"""The training loop: teacher forcing, Adam, plateau schedule on validation BLEU, early stopping.

Resuming restores weights, optimizer, scheduler, RNG state and the position inside the epoch, and the
epoch's batch order is a function of (seed, epoch): on CPU an interrupted-and-resumed run ends with the
same weights as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import torch
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from nlgkit.config import RunConfig, config_from_dict, to_dict
from nlgkit.data.batching import Batch, bucketed_batches, collate
from nlgkit.data.tokenize import load_pipeline
from nlgkit.errors import CheckpointError, NlgkitError
from nlgkit.evaluate.metrics import bleu
from nlgkit.inference import best_texts, translate_ids
from nlgkit.io import atomic_write, write_json
from nlgkit.train.builders import (
    build_model,
    build_optimizer,
    build_scheduler,
    count_parameters,
    select_device,
)
from nlgkit.train.checkpoint import (
    find_checkpoint,
    load_meta,
    load_train_state,
    load_weights,
    save_checkpoint,
)
from nlgkit.train.metrics_log import MetricsLog
from nlgkit.train.provenance import environment, git_revision
from nlgkit.train.rundata import RunData, copy_model_assets, ensure_data_dir, load_run_data

# Sections that define the model: a resumed run must not change them.
FROZEN_SECTIONS = ("data", "model", "head")


@dataclass
class LoopState:
    """Where the loop is: everything besides weights/optimizer that a resumed run needs."""

    epoch: int = 1
    batch_in_epoch: int = 0  # batches of ``epoch`` already trained on
    update: int = 0
    best_bleu: float = -1.0
    best_epoch: int = 0
    bad_epochs: int = 0
    wall_seconds: float = 0.0
    train_tokens: int = 0
    finished: bool = False
    stop_reason: str = ""


class StopOnSignal:
    """Turn SIGINT/SIGTERM into a request to stop after the current update (a second SIGINT aborts).

    Stopping between updates means the saved checkpoint is consistent and ``--resume`` continues exactly.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Trainer:
    def __init__(self, config: RunConfig, *, resume: bool = False, console: Console | None = None,
                 show_progress: bool = True) -> None:
        self.config = config
        self.resume = resume
        self.console = console or Console(stderr=True)
        self.show_progress = show_progress
        self.run_dir = Path(config.run.dir)
        self.last_dir = self.run_dir / "checkpoints" / "last"
        self.best_dir = self.run_dir / "checkpoints" / "best"

    # -- set-up -------------------------------------------------------------------------------------------
    def _check_run_dir(self) -> None:
        has_checkpoint = find_checkpoint(self.last_dir) is not None
        if self.resume and not has_checkpoint:
            raise CheckpointError(f"{self.last_dir}: nothing to resume (no checkpoint); train without --resume")
        if not self.resume and has_checkpoint:
            raise NlgkitError(f"{self.run_dir}: already holds a trained run; pass --resume to continue it "
                              f"or set run.dir to a new directory")

    def _check_resume_config(self, saved: dict[str, Any]) -> None:
        current = to_dict(self.config)
        previous = to_dict(config_from_dict(saved, str(self.last_dir / "meta.json")))
        for section in FROZEN_SECTIONS:
            for key, value in previous[section].items():
                if current[section].get(key) != value:
                    raise CheckpointError(
                        f"{self.last_dir}: {section}.{key} was {value!r} when this run started, "
                        f"now {current[section].get(key)!r}; resume with the original value")

    def _meta(self, data: RunData, loop: LoopState, metrics: dict[str, Any]) -> dict[str, Any]:
        cfg = self.config.data
        return {
            "config": to_dict(self.config),
            "vocab_checksums": {cfg.src_lang: data.src_vocab.checksum(), cfg.tgt_lang: data.tgt_vocab.checksum()},
            "git": git_revision(),
            "loop": dataclasses.asdict(loop),
            "metrics": metrics,
        }

    # -- one epoch's pieces -------------------------------------------------------------------------------
    def _train_step(self, model: Any, optimizer: torch.optim.Optimizer, batch: Batch, autocast: Any) -> float:
        with autocast:
            features = model.features(batch.src, batch.src_lengths, prev_tokens=batch.prev_tokens)
            loss_sum = model.head.loss(features, batch.targets, label_smoothing=self.config.train.label_smoothing)
        loss = loss_sum / batch.num_target_tokens
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad],
                                           self.config.train.clip_norm)
        optimizer.step()
        return float(loss_sum.detach())

    def validate(self, model: Any, data: RunData, device: torch.device, autocast: Any) -> dict[str, float]:
        """Validation loss per token (teacher forcing) and BLEU of greedy/beam output on the references."""
        model.eval()
        total, tokens = 0.0, 0
        with torch.inference_mode():
            for indices in bucketed_batches(data.valid, 64, "sentences", seed=0, epoch=0, shuffle=False):
                batch = collate(data.valid, indices, data.tgt_vocab).to(device)
                with autocast:
                    features = model.features(batch.src, batch.src_lengths, prev_tokens=batch.prev_tokens)
                    total += float(model.head.loss(features, batch.targets))
                tokens += batch.num_target_tokens
        search = self.config.search
        hyps = translate_ids(model, data.valid.src, data.tgt_vocab, beam=self.config.train.valid_beam,
                             length_penalty=search.length_penalty, max_len_a=search.max_len_a,
                             max_len_b=search.max_len_b, batch_size=max(search.batch_size, 64), device=device)
        pipeline = load_pipeline(self.run_dir / "data", self.config.data.tgt_lang)
        texts = best_texts(hyps, data.tgt_vocab, pipeline)
        model.train()
        loss = total / max(tokens, 1)
        return {"loss": loss, "ppl": math.exp(min(loss, 50.0)), "bleu": bleu(texts, data.valid_refs)}

    # -- the loop -----------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, t = self.config, self.config.train
        self._check_run_dir()
        if t.num_threads > 0:
            torch.set_num_threads(t.num_threads)
        torch.manual_seed(t.seed)
        device = select_device(t.device)
        use_amp = t.amp and device.type == "cuda"
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if use_amp else nullcontext()

        data_dir = ensure_data_dir(cfg, log=self.console.print)
        data = load_run_data(cfg, data_dir)
        model = build_model(cfg, data.src_vocab, data.tgt_vocab).to(device)
        optimizer = build_optimizer(cfg, model)
        scheduler = build_scheduler(cfg, optimizer)
        loop = LoopState()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = MetricsLog(self.run_dir / "metrics.jsonl")
        params = count_parameters(model)

        if self.resume:
            meta = load_meta(self.last_dir)
            self._check_resume_config(meta["config"])
            expected = {cfg.data.src_lang: data.src_vocab.checksum(), cfg.data.tgt_lang: data.tgt_vocab.checksum()}
            if meta.get("vocab_checksums") != expected:
                raise CheckpointError(f"{data_dir}: vocabularies differ from those of checkpoint {self.last_dir}")
            load_weights(self.last_dir, model)
            state = load_train_state(self.last_dir)
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["rng"])
            if device.type == "cuda" and "cuda_rng" in state:
                torch.cuda.set_rng_state(state["cuda_rng"], device)
            loop = LoopState(**state["loop"])
            log.write("resume", update=loop.update, epoch=loop.epoch, git=git_revision(), env=environment(device))
            if loop.finished:
                self.console.print(f"{self.run_dir}: already finished ({loop.stop_reason})")
                return self._summary(loop, params)
        else:
            copy_model_assets(data_dir, self.run_dir / "data")
            write_json(self.run_dir / "config.json", to_dict(cfg))
            write_json(self.run_dir / "manifest.json", data.manifest)
            write_json(self.run_dir / "provenance.json", {"git": git_revision(), "env": environment(device),
                                                          "parameters": params})
            log.write("start", parameters=params["trainable"], frozen=params["frozen"] + params["buffers"],
                      device=str(device), train_sentences=len(data.train))

        self.console.print(f"[bold]{self.run_dir}[/]: {params['trainable']:,} trainable parameters, "
                           f"{len(data.train):,} training pairs, device {device}")

        def save(directory: Path, metrics: dict[str, Any], with_state: bool = True) -> None:
            state = None
            if with_state:
                state = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                         "rng": torch.get_rng_state(), "loop": dataclasses.asdict(loop)}
                if device.type == "cuda":
                    state["cuda_rng"] = torch.cuda.get_rng_state(device)
            save_checkpoint(directory, model, self._meta(data, loop, metrics), state)

        model.train()
        session_start = time.perf_counter()
        wall_at_start = loop.wall_seconds
        progress = Progress(
            TextColumn("epoch {task.fields[epoch]}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TextColumn("loss {task.fields[loss]:.3f}"), TextColumn("{task.fields[tps]:,.0f} tok/s"),
            TextColumn("lr {task.fields[lr]:.2e}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=self.console, disable=not (self.show_progress and self.console.is_terminal), transient=True,
        )
        interrupted = False
        with progress, StopOnSignal() as stop_signal:
            while not (loop.finished or interrupted):
                batches = bucketed_batches(data.train, t.batch_size, t.batch_unit, t.seed, loop.epoch)
                task = progress.add_task("train", total=len(batches), completed=loop.batch_in_epoch,
                                         epoch=loop.epoch, loss=0.0, tps=0.0, lr=optimizer.param_groups[0]["lr"])
                window_loss, window_tokens, window_start = 0.0, 0, time.perf_counter()
                for position in range(loop.batch_in_epoch, len(batches)):
                    batch = collate(data.train, batches[position], data.tgt_vocab).to(device)
                    window_loss += self._train_step(model, optimizer, batch, autocast)
                    window_tokens += batch.num_target_tokens
                    loop.train_tokens += batch.num_target_tokens
                    loop.update += 1
                    loop.batch_in_epoch = position + 1
                    loop.wall_seconds = wall_at_start + time.perf_counter() - session_start
                    elapsed = time.perf_counter() - window_start
                    lr = optimizer.param_groups[0]["lr"]
                    progress.update(task, advance=1, loss=window_loss / max(window_tokens, 1),
                                    tps=window_tokens / max(elapsed, 1e-9), lr=lr)
                    if loop.update % t.log_every == 0:
                        log.write("train", update=loop.update, epoch=loop.epoch, loss=window_loss / window_tokens,
                                  tokens_per_s=window_tokens / elapsed, lr=lr, wall_s=round(loop.wall_seconds, 1))
                        window_loss, window_tokens, window_start = 0.0, 0, time.perf_counter()
                    if t.max_updates and loop.update >= t.max_updates:
                        loop.stop_reason = f"train.max_updates = {t.max_updates} reached"
                        interrupted = True
                    elif t.max_minutes and loop.wall_seconds >= 60 * t.max_minutes:
                        loop.stop_reason = f"train.max_minutes = {t.max_minutes} reached"
                        interrupted = True
                    elif stop_signal.requested:
                        loop.stop_reason = "stopped by a signal (resume with --resume)"
                        interrupted = True
                    if interrupted:
                        break
                progress.remove_task(task)
                epoch_done = loop.batch_in_epoch >= len(batches)
                if epoch_done:
                    metrics = self.validate(model, data, device, autocast)
                    improved = metrics["bleu"] > loop.best_bleu
                    if improved:
                        loop.best_bleu, loop.best_epoch, loop.bad_epochs = metrics["bleu"], loop.epoch, 0
                    else:
                        loop.bad_epochs += 1
                    scheduler.step(metrics["bleu"])
                    log.write("valid", epoch=loop.epoch, update=loop.update, lr=optimizer.param_groups[0]["lr"],
                              wall_s=round(loop.wall_seconds, 1), best_bleu=loop.best_bleu, **metrics)
                    self.console.print(
                        f"epoch {loop.epoch:3d}  valid loss {metrics['loss']:.3f}  ppl {metrics['ppl']:.1f}  "
                        f"BLEU {metrics['bleu']:.2f}  (best {loop.best_bleu:.2f} @ {loop.best_epoch})  "
                        f"lr {optimizer.param_groups[0]['lr']:.2e}  {loop.wall_seconds / 60:.1f} min")
                    if loop.bad_epochs >= t.early_stop_patience:
                        loop.finished, loop.stop_reason = True, f"no BLEU improvement for {loop.bad_epochs} epochs"
                    elif loop.epoch >= t.max_epochs:
                        loop.finished, loop.stop_reason = True, f"train.max_epochs = {t.max_epochs} reached"
                    else:
                        loop.epoch += 1
                        loop.batch_in_epoch = 0
                    if improved:
                        save(self.best_dir, metrics, with_state=False)
                    save(self.last_dir, metrics)
                if interrupted and not epoch_done:
                    # Stopped inside an epoch (a limit, not the end of training): keep the position for
                    # --resume, and make sure a usable "best" exists even if no epoch was validated yet.
                    if find_checkpoint(self.best_dir) is None:
                        metrics = self.validate(model, data, device, autocast)
                        log.write("valid", epoch=loop.epoch, update=loop.update, partial=True, **metrics)
                        save(self.best_dir, metrics, with_state=False)
                    save(self.last_dir, {})
        log.write("end", reason=loop.stop_reason, update=loop.update, epoch=loop.epoch, best_bleu=loop.best_bleu,
                  wall_s=round(loop.wall_seconds, 1), train_tokens=loop.train_tokens)
        self.console.print(f"stopped: {loop.stop_reason}; best validation BLEU {loop.best_bleu:.2f} "
                           f"(epoch {loop.best_epoch})")
        return self._summary(loop, params)

    def _summary(self, loop: LoopState, params: dict[str, Any]) -> dict[str, Any]:
        summary = {"run_dir": str(self.run_dir), "trainable_parameters": params["trainable"],
                   **dataclasses.asdict(loop)}
        with atomic_write(self.run_dir / "summary.json") as handle:
            json.dump(summary, handle, indent=2)
        return summary

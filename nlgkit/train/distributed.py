"""Data-parallel training: one process per device, started by ``torchrun``, joined through torch.distributed.

``torchrun --nproc-per-node N -m nlgkit train RECIPE`` sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` in
each process; without them (plain ``nlgkit train``) the world has one rank and nothing here talks to
anyone. NCCL joins GPU processes, gloo CPU ones. Each configured batch is the *global* batch: every rank
takes a strided share of it (similar lengths, so similar step times), gradients are averaged by
``DistributedDataParallel`` and the loss is scaled so that the average equals the one-process gradient of
the whole batch. Rank 0 alone writes checkpoints, logs and the progress bar, and validates; it sends the
validation scores to the other ranks so that every rank takes the same schedule and stopping decisions.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from nlgkit.core.errors import ConfigError

T = TypeVar("T")

# Rank 0 validates while the others wait for its scores: allow a long validation before giving up.
COLLECTIVE_TIMEOUT = timedelta(hours=1)


@dataclass(frozen=True)
class Ranks:
    """This process's place in the job; the default is the one-process world."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Ranks:
        """The ranks torchrun announces (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); one rank without them."""
        environ = os.environ if environ is None else environ
        try:
            world = int(environ.get("WORLD_SIZE", "1"))
            rank = int(environ.get("RANK", "0"))
            local = int(environ.get("LOCAL_RANK", str(rank)))
        except ValueError:
            raise ConfigError("RANK, WORLD_SIZE and LOCAL_RANK must be integers (as torchrun sets them)") from None
        if world < 1 or not 0 <= rank < world:
            raise ConfigError(f"RANK={rank} is not inside WORLD_SIZE={world}")
        return cls(rank, world, local)

    # -- joining and leaving --------------------------------------------------------------------------------
    def device(self, requested: torch.device) -> torch.device:
        """Each GPU process uses the GPU of its local rank, whatever ``train.device`` named."""
        if self.distributed and requested.type == "cuda":
            torch.cuda.set_device(self.local_rank)
            return torch.device("cuda", self.local_rank)
        return requested

    def join(self, device: torch.device) -> None:
        """Join the process group (NCCL on GPUs, gloo on CPUs); nothing in a one-process world."""
        if self.distributed and not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=COLLECTIVE_TIMEOUT)

    def leave(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()

    def end_process(self) -> None:
        """End a rank of a finished job now, its files written and its output flushed; nothing in one process.

        After DistributedDataParallel, torch keeps gloo's process group alive past ``destroy_process_group``
        (its worker threads still run), so the group would be torn down during interpreter shutdown, where now
        and then a gloo thread that needs the GIL aborts the rank ("terminate called without an active
        exception") and torchrun reports a finished run as failed. Skipping the shutdown avoids that teardown.
        """
        if self.distributed:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    # -- the data ---------------------------------------------------------------------------------------------
    def shard(self, batch: Sequence[int]) -> list[int]:
        """This rank's disjoint, strided share of a global batch (which is sorted by length)."""
        return list(batch[self.rank::self.world_size])

    def can_share(self, batch: Sequence[int]) -> bool:
        """Whether every rank gets at least one example of ``batch`` (else all ranks skip it)."""
        return len(batch) >= self.world_size

    def skipped_batches(self, batches: Sequence[Sequence[int]], batch_setting: str) -> int:
        """How many of an epoch's ``batches`` all ranks skip (too few examples to give each one); none left is an
        error naming ``batch_setting`` (the recipe's batch size)."""
        skipped = sum(not self.can_share(batch) for batch in batches)
        if batches and skipped == len(batches):
            raise ConfigError(f"{batch_setting}: no batch has an example for each of the {self.world_size} ranks; "
                              "use larger batches or fewer ranks")
        return skipped

    # -- collectives (each is a no-op in a one-process world) -------------------------------------------------
    def any(self, flag: bool, device: torch.device) -> bool:
        """True on every rank when it is true on one: a stop requested anywhere stops everyone together."""
        if not self.distributed:
            return flag
        value = torch.tensor([1.0 if flag else 0.0], device=device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    def sum(self, values: list[float], device: torch.device) -> list[float]:
        """Each value summed over the ranks (the logged loss and token counts of the whole global batch)."""
        if not self.distributed:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64, device=device)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def from_main(self, value: T) -> T:
        """Rank 0's ``value`` on every rank."""
        if not self.distributed:
            return value
        box: list[Any] = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value: T) -> list[T]:
        """Every rank's ``value``, in rank order, on every rank."""
        if not self.distributed:
            return [value]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, value)
        return out

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()


def data_parallel(module: torch.nn.Module, ranks: Ranks, device: torch.device) -> torch.nn.Module:
    """``module`` wrapped in DistributedDataParallel when there is more than one rank.

    Buffers are not re-broadcast at every step: nlgkit's buffers (fixed heads, frozen tables) never change.
    """
    if not ranks.distributed:
        return module
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=device_ids, broadcast_buffers=False)


def rank_seed(seed: int, rank: int) -> int:
    """The random stream of a rank after the shared initialisation (rank 0 keeps the one-process stream)."""
    return seed + 1_000_003 * rank

"""The process group of a job under torchrun: who this process is, and agreement between ranks.

    torchrun --nproc-per-node N -m attnmt train CONFIG      (also: prepare, translate, score)

torchrun starts N copies of a command with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT in their environment. `init_world` joins them into one process group (NCCL on CUDA,
gloo on a CPU, or a chosen backend); without those variables it returns `SINGLE`, one process
with no process group, and every function here is then a no-op, so the code that uses them is
the same on one process and on N.

Rank 0 alone writes files; what it decides is broadcast (`broadcast_from_main`), and what every
rank must agree on is all-reduced (`all_reduce_sum`, `any_rank`), so all ranks always take the
same branch and none waits forever.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch

from attnmt.errors import AttnmtError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class World:
    """Where this process stands: its rank among `size` processes (one process: rank 0 of 1)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    backend: str | None = None  # None: no process group
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        """Rank 0: the one process that writes files, logs and validates."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when there is a process group (under torchrun)."""
        return self.backend is not None


SINGLE = World()


def launched_by_torchrun() -> bool:
    return all(name in os.environ for name in ("RANK", "WORLD_SIZE"))


def env_rank() -> int:
    """This process's rank from torchrun's environment (0 outside torchrun), before `init_world`."""
    return int(os.environ.get("RANK", "0") or 0)


def init_world(backend: str, device: torch.device, *, timeout_s: float | None = None) -> tuple[World, torch.device]:
    """Join torchrun's process group, or return (SINGLE, device) outside torchrun.

    Args:
        backend: `train.backend`: 'auto' (NCCL when `device` is CUDA, else gloo), 'gloo' or 'nccl'.
        device: the device `train.device` resolved to; on CUDA each rank takes cuda:LOCAL_RANK.
        timeout_s: how long a collective (a barrier) waits for the other ranks; None: torch's
            default (30 minutes for gloo). Sharded inference waits longer (sharding.py).

    Returns:
        (this process's World, the device it trains on)

    Raises:
        AttnmtError: NCCL without CUDA, or torchrun's variables missing or not numbers.
    """
    if not launched_by_torchrun():
        return SINGLE, device
    try:
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        raise AttnmtError(f"torchrun's RANK/WORLD_SIZE/LOCAL_RANK must be numbers, got "
                          f"{[os.environ.get(n) for n in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK')]}") from None
    chosen = backend if backend != "auto" else ("nccl" if device.type == "cuda" else "gloo")
    if chosen == "nccl" and device.type != "cuda":
        raise AttnmtError(f"train.backend='nccl' needs CUDA devices, but train.device is {device}: "
                          f"use train.backend=gloo (or auto) on a CPU")
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    import torch.distributed as dist

    timeout = None if timeout_s is None else timedelta(seconds=timeout_s)
    dist.init_process_group(chosen, rank=rank, world_size=size, timeout=timeout)
    if rank != 0:  # rank 0 speaks for the job; the others only warn
        logging.getLogger("attnmt").setLevel(logging.WARNING)
    log.info("process group: %d ranks over %s, this is rank %d on %s", size, chosen, rank, device)
    return World(rank=rank, size=size, local_rank=local_rank, backend=chosen, device=device), device


def close_world(world: World) -> None:
    """Wait for every rank (rank 0 may still be validating), then leave the process group."""
    if world.distributed:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


def barrier(world: World) -> None:
    """Wait until every rank gets here (after rank 0 wrote files the others read)."""
    if world.distributed:
        import torch.distributed as dist

        dist.barrier()


def all_reduce_sum(world: World, tensor: torch.Tensor) -> torch.Tensor:
    """The element-wise sum of `tensor` over all ranks (in place; `tensor` itself on one process)."""
    if world.distributed:
        import torch.distributed as dist

        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def any_rank(world: World, flag: bool) -> bool:
    """True on every rank when `flag` is true on any rank."""
    if not world.distributed:
        return flag
    return bool(all_reduce_sum(world, torch.tensor([float(flag)], device=world.device)).item() > 0)


def broadcast_from_main(world: World, obj: Any) -> Any:
    """Rank 0's `obj` on every rank (plain data: dicts, numbers, strings)."""
    if not world.distributed:
        return obj
    import torch.distributed as dist

    box = [obj if world.main else None]
    dist.broadcast_object_list(box, src=0, device=world.device if world.backend == "nccl" else None)
    return box[0]


def gather_to_main(world: World, obj: Any) -> list[Any]:
    """Every rank's `obj`, in rank order (collected on every rank; rank 0 writes them)."""
    if not world.distributed:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * world.size
    dist.all_gather_object(out, obj)
    return out

"""Data-parallel training under torchrun: the model wrapped in DDP, and accumulation without sync.

    torchrun --nproc-per-node N -m attnmt train CONFIG

The process group itself (ranks, barriers, broadcasts) is `attnmt.world`; each rank's share of
an update comes from the data layer (`data.epochs.shard_update`). DDP averages the gradients
over the ranks in the backward pass of each update's last batch.
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext

from torch import nn

from attnmt.world import World


def wrap_model(world: World, model: nn.Module) -> nn.Module:
    """DDP around `model` when there is a process group (its gradients are averaged over the
    ranks in backward); the model itself otherwise. Rank 0's weights are broadcast to all."""
    if not world.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [world.device.index] if world.device.type == "cuda" else None
    # The buffers (sinusoidal positions) are the same constants on every rank: no sync per forward.
    # torch 2.13 renamed broadcast_buffers; either way it is still synced once, at construction.
    quiet = ("forward_sync_buffers" if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
             else "broadcast_buffers")
    return DistributedDataParallel(model, device_ids=ids, **{quiet: False})


def no_sync(model: nn.Module, skip: bool):
    """A context in which DDP does not all-reduce gradients (`skip`: an accumulation step that is
    not the update's last); a null context otherwise."""
    return model.no_sync() if skip and hasattr(model, "no_sync") else nullcontext()

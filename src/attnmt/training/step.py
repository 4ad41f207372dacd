"""One update: the loss and its gradients, clipping, the optimizer and schedule step.

`loss_and_gradients` is the one forward + loss + backward of a batch; the eager step
(`train_step`) and the captured step (compiled_step.py) both call it, so they compute the same
thing. `compiled_step.make_update_step` picks the step that `train.compile` asks for.

Shapes:
    batch    sentences in a batch
    tgt_len  padded target length
    vocab    target vocabulary size
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from attnmt.data.batching import Batch
from attnmt.models.loss import sequence_loss
from attnmt.training.distributed import no_sync
from attnmt.world import SINGLE, World, all_reduce_sum

def loss_and_gradients(model: nn.Module, batch: Batch, scale: float | Tensor, *, train_cfg, use_amp: bool,
                       pad_id: int, cache_casts: bool = True) -> Tensor:
    """Forward a batch (under bf16 autocast when `use_amp`), sum its cross-entropy over the target
    tokens and backpropagate `loss * scale` (gradients accumulate in `.grad`).

    Args:
        scale: what the summed loss is multiplied by before backward (1 / the update's tokens).
        cache_casts: autocast's weight-cast cache; a captured graph needs it off (a cast cached
            during capture would be stale on replay).

    Returns:
        The summed loss, detached (no host synchronisation).
    """
    with torch.autocast(batch.src_ids.device.type, dtype=torch.bfloat16, enabled=use_amp,
                        cache_enabled=cache_casts):
        logits = model(batch.src_ids, batch.src_mask, batch.src_lengths, batch.tgt_in,
                       teacher_forcing=train_cfg.teacher_forcing).logits  # (batch, tgt_len, vocab)
    loss = sequence_loss(logits, batch.tgt_out, pad_id=pad_id, label_smoothing=train_cfg.label_smoothing)
    (loss * scale).backward()
    return loss.detach()


def clip_gradients(model: nn.Module, clip: float) -> Tensor:
    """Clip the gradients' global norm to `clip` (0 = no clipping); returns the norm before clipping."""
    return nn.utils.clip_grad_norm_(model.parameters(), clip if clip > 0 else float("inf"))


def train_step(model: nn.Module, batches: Batch | Sequence[Batch], optimizer: torch.optim.Optimizer,
               schedule: torch.optim.lr_scheduler.LRScheduler, *, train_cfg, use_amp: bool, pad_id: int,
               global_tokens: int | None = None, world: World = SINGLE) -> tuple[Tensor, bool]:
    """One update: forward and backward over this rank's batches (accumulated), clip, optimizer
    and schedule step.

    The gradient is that of the summed loss of the update's global batches (all ranks' together)
    divided by their `global_tokens` target tokens, so N ranks, or one process accumulating the
    same batches, take the same step. DDP averages gradients over ranks, hence the factor
    `world.size`; it all-reduces only in the last backward (the others run under `no_sync`).
    A non-finite summed loss or gradient norm skips the update on every rank alike (its
    gradients are dropped), so a bad batch never reaches the weights; checking it is this step's
    one host synchronisation.

    Args:
        batches: this rank's batches for the update (one Batch: an update of one batch).
        global_tokens: target tokens of the update on all ranks (default: those of `batches`).

    Returns:
        (summed loss over the update's target tokens on all ranks, detached, float64; whether
        the update was applied)
    """
    batches = [batches] if isinstance(batches, Batch) else list(batches)
    global_tokens = global_tokens or sum(b.num_tgt_tokens for b in batches)
    scale = world.size / global_tokens
    local_loss = torch.zeros((), dtype=torch.float64, device=batches[0].src_ids.device)
    for i, batch in enumerate(batches):
        with no_sync(model, skip=i < len(batches) - 1):
            local_loss += loss_and_gradients(model, batch, scale, train_cfg=train_cfg, use_amp=use_amp,
                                             pad_id=pad_id).double()
    total_loss = all_reduce_sum(world, local_loss)
    grad_norm = clip_gradients(model, train_cfg.clip)  # the same on every rank after DDP
    finite = bool(torch.isfinite(grad_norm) & torch.isfinite(total_loss))
    if finite:
        optimizer.step()
        schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return total_loss, finite

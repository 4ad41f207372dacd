"""Training throughput (part of bench.py): attnmt's whole step as the training loop runs it, the
tutorial's step for the reference, and the timed window over real batches.

Shapes: batch, src_len, tgt_len as in attnmt.data.batching; the reference is seq-first.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from attnmt.config import Config
from attnmt.data.batching import Batch
from attnmt.training.compiled_step import make_update_step
from attnmt.training.trainable import make_optimizer, make_step_schedule, use_bf16
from benchmarks.common import median_time, rate
from benchmarks.speed.memory import PeakMemory

StepFn = Callable[[Batch], Any]


def make_attnmt_step(model: nn.Module, cfg: Config, device: torch.device, pad_id: int) -> StepFn:
    """One whole update exactly as attnmt.training runs it (loss sum / tokens, clip, the non-finite
    guard with its host sync, optimizer and schedule step), train.compile honoured."""
    optimizer = make_optimizer(model, cfg.train)
    update = make_update_step(model, optimizer, make_step_schedule(optimizer, cfg.train), cfg.train,
                              use_amp=use_bf16(cfg, device), pad_id=pad_id)

    def step(batch: Batch) -> torch.Tensor:
        loss, _ = update([batch.to(device)], batch.num_tgt_tokens)
        return loss

    return step


def make_reference_step(model: nn.Module, cfg: Config, device: torch.device, pad_id: int) -> StepFn:
    """The tutorial's training step: seq-first batches, mean cross-entropy, clip, a plain
    (non-fused) Adam/AdamW, and ``loss.item()`` every step."""
    t = cfg.train
    cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    optimizer = cls(model.parameters(), lr=t.lr, betas=t.betas, weight_decay=t.weight_decay)

    def step(batch: Batch) -> float:
        src = batch.src_ids.t().to(device)  # (src_len, batch)
        tgt_in = batch.tgt_in.t().to(device)  # (tgt_len, batch)
        tgt_out = batch.tgt_out.t().to(device)  # (tgt_len, batch)
        optimizer.zero_grad()
        logits = model(src, tgt_in, t.teacher_forcing)  # (tgt_len, batch, vocab)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=pad_id,
                               label_smoothing=t.label_smoothing)
        loss.backward()
        if t.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), t.clip)
        optimizer.step()
        return loss.item()

    return step


def measure_training(step: StepFn, batches: Sequence[Batch], *, warmup: int, steps: int, repeats: int,
                     full_epoch: bool, epoch_tgt_tokens: int, device: torch.device, memory: PeakMemory) -> dict:
    """Throughput of `steps` whole steps after `warmup` (batches taken in order, cycling).

    The window is timed as a whole (one clock read, after a CUDA sync, at each end); with
    `repeats` > 1 the same batches run again and the median is reported.
    """
    memory.reset()
    for i in range(warmup):
        step(batches[i % len(batches)])
    measured = [batches[(warmup + i) % len(batches)] for i in range(steps)]
    tgt = sum(b.num_tgt_tokens for b in measured)
    src = sum(int(b.src_lengths.sum()) for b in measured)

    def window() -> None:
        for batch in measured:
            step(batch)

    sec = median_time(window, repeats=repeats, device=device).median
    result = {"warmup_steps": warmup, "steps": steps, "repeats": repeats, "tgt_tokens": tgt, "src_tokens": src,
              "seconds": round(sec, 4), "step_ms": round(1e3 * sec / max(steps, 1), 2),
              "tgt_tok_per_s": rate(tgt, sec), "src_tgt_tok_per_s": rate(src + tgt, sec),
              "epoch_s_estimate": round(epoch_tgt_tokens * sec / tgt, 2), "epoch_s_measured": None}
    if full_epoch:
        epoch = median_time(lambda: [step(batch) for batch in batches], device=device)
        result["epoch_s_measured"] = round(epoch.median, 2)
        result["epoch_batches"] = len(batches)
    result.update(memory.report())
    return result

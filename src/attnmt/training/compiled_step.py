"""The training step of each update, as ``train.compile`` asks: eager (step.py), ``torch.compile``, or CUDA graphs.

`make_update_step` picks it; the rest of this module builds the fast ones.

Shapes:
    batch: sentences in a batch; rows: the batch padded up to its bucket (filler rows added).
    src_len, tgt_len: padded lengths; a bucket rounds them up to a multiple of ``length_step``.
    vocab: target vocabulary size.

On a GPU these small models wait on kernel launches, not arithmetic, so ``cudagraphs`` pads each
batch up to a static bucket and replays that bucket's captured step (forward, loss, backward, clip,
a capturable fused Adam/AdamW step). Why padding changes no number, and what the tests check:
docs/gpu.md, "train.compile".
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Callable

import torch
from torch import Tensor, nn

from attnmt.data.batching import Batch
from attnmt.errors import AttnmtError
from attnmt.training.step import clip_gradients, loss_and_gradients, train_step
from attnmt.world import SINGLE, World

log = logging.getLogger(__name__)

__all__ = ["COMPILE_MODES", "make_update_step", "make_train_step", "bucket_shape", "pad_batch", "static_update", "CUDAGraphSteps"]

COMPILE_MODES = ("none", "default", "cudagraphs")

StepFn = Callable[[Batch], tuple[Tensor, bool]]
UpdateStep = Callable[[list[Batch], int], tuple[Tensor, bool]]


def make_update_step(model: nn.Module, optimizer: torch.optim.Optimizer,
                     schedule: torch.optim.lr_scheduler.LRScheduler, train_cfg, *, use_amp: bool, pad_id: int,
                     world: World = SINGLE) -> UpdateStep:
    """The per-update step, `step(batches, global_tokens) -> (loss, finite)`: `train_step`, or
    the faster step that `train.compile` asks for (compiled_step.py), which takes one batch an
    update in one process.

    Raises:
        AttnmtError: `train.compile` with several ranks or accumulation.
    """
    t = train_cfg
    if t.compile == "none":
        def step(batches: list[Batch], global_tokens: int) -> tuple[Tensor, bool]:
            return train_step(model, batches, optimizer, schedule, train_cfg=t, use_amp=use_amp, pad_id=pad_id,
                              global_tokens=global_tokens, world=world)
        return step
    if world.size > 1 or t.accum_steps > 1:
        raise AttnmtError(f"train.compile={t.compile!r} runs one process with train.accum_steps=1; got "
                          f"{world.size} ranks and train.accum_steps={t.accum_steps} (use train.compile=none)")
    fast = make_train_step(t.compile, model, optimizer, schedule, train_cfg=t, use_amp=use_amp, pad_id=pad_id,
                           eager=train_step)
    return lambda batches, global_tokens: fast(batches[0])


def make_train_step(mode: str, model: nn.Module, optimizer: torch.optim.Optimizer,
                    schedule: torch.optim.lr_scheduler.LRScheduler, *, train_cfg, use_amp: bool,
                    pad_id: int, eager: Callable, length_step: int = 8, max_graphs: int = 64) -> StepFn:
    """The training step that ``train.compile`` asks for, as ``step(batch) -> (loss, finite)``.

    Args:
        mode: "none" (``eager`` itself), "default" (``eager`` over ``torch.compile(model)``) or
            "cudagraphs" (`CUDAGraphSteps`; needs CUDA and the Transformer).
        model, optimizer, schedule, train_cfg, use_amp, pad_id: as for ``eager``.
        eager: ``attnmt.training.step.train_step``, whose signature every mode keeps.
        length_step, max_graphs: see `CUDAGraphSteps`.

    Raises:
        ValueError: unknown mode, or "cudagraphs" where it cannot run.
    """
    if mode not in COMPILE_MODES:
        raise ValueError(f"train.compile={mode!r} must be one of {', '.join(COMPILE_MODES)}")
    if mode == "cudagraphs":
        return CUDAGraphSteps(model, optimizer, schedule, train_cfg=train_cfg, use_amp=use_amp, pad_id=pad_id,
                              length_step=length_step, max_graphs=max_graphs)
    # torch.compile wraps the module and shares its parameters: the loop keeps saving `model`
    # (an OptimizedModule would prefix every state_dict key with "_orig_mod.").
    runner = torch.compile(model) if mode == "default" else model

    def step(batch: Batch) -> tuple[Tensor, bool]:
        return eager(runner, batch, optimizer, schedule, train_cfg=train_cfg, use_amp=use_amp, pad_id=pad_id)

    return step


# ----------------------------------------------------------------------------- static shapes

def _round_up(value: int, step: int) -> int:
    return max(step, math.ceil(value / step) * step)


def bucket_shape(batch: Batch, *, length_step: int, row_step: int) -> tuple[int, int, int]:
    """(rows, src_len, tgt_len) of the bucket a batch pads up to: each rounded up to a multiple."""
    if length_step < 1 or row_step < 1:
        raise ValueError(f"length_step={length_step} and row_step={row_step} must be >= 1")
    return (_round_up(len(batch), row_step), _round_up(batch.src_ids.shape[1], length_step),
            _round_up(batch.tgt_in.shape[1], length_step))


def pad_batch(batch: Batch, rows: int, src_len: int, tgt_len: int, *, pad_id: int) -> Batch:
    """Pad a training batch to (rows, src_len, tgt_len) without changing its loss or gradients.

    Extra positions are padding (masked, ignored by the loss). A filler row has one source
    token (pad_id, unmasked: the embedding's pad row is zero, so it is a finite input) and an
    all-padding target, so it has no target token.

    Raises:
        ValueError: the batch is larger than the shape, or has no target.
    """
    batch_rows, s, t = len(batch), batch.src_ids.shape[1], batch.tgt_in.shape[1] if batch.tgt_in is not None else -1
    if batch.tgt_in is None or batch_rows > rows or s > src_len or t > tgt_len:
        raise ValueError(f"cannot pad a batch of shape (batch={batch_rows}, src_len={s}, tgt_len={t}) to "
                         f"(rows={rows}, src_len={src_len}, tgt_len={tgt_len})")

    def grow(x: Tensor, width: int, fill) -> Tensor:
        out = x.new_full((rows, width), fill)  # (rows, width)
        out[:batch_rows, : x.shape[1]] = x
        return out

    src_mask = grow(batch.src_mask, src_len, False)  # (rows, src_len)
    src_mask[batch_rows:, 0] = True
    src_lengths = batch.src_lengths.new_ones(rows)  # (rows,)
    src_lengths[:batch_rows] = batch.src_lengths
    index = batch.index.new_full((rows,), -1)  # (rows,) -1 marks a filler row
    index[:batch_rows] = batch.index
    return replace(batch, src_ids=grow(batch.src_ids, src_len, pad_id), src_mask=src_mask,
                   src_lengths=src_lengths, tgt_in=grow(batch.tgt_in, tgt_len, pad_id),
                   tgt_out=grow(batch.tgt_out, tgt_len, pad_id), tgt_mask=grow(batch.tgt_mask, tgt_len, False),
                   index=index, _num_tgt_tokens=batch.num_tgt_tokens)


def static_update(model: nn.Module, batch: Batch, num_tgt_tokens: Tensor, *, train_cfg, use_amp: bool,
                  pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """The captured part of a step up to the optimizer: the eager step's `loss_and_gradients`
    (with the cast cache off) and clipping, with no host synchronisation.

    Args:
        batch: padded to its bucket (static buffers when captured).
        num_tgt_tokens: () float tensor, the batch's real target tokens.

    Returns:
        (summed loss, detached; () bool tensor: loss and gradient norm finite; the gradient
        norm before clipping). Gradients are left clipped in ``.grad``.
    """
    loss = loss_and_gradients(model, batch, num_tgt_tokens.reciprocal(), train_cfg=train_cfg, use_amp=use_amp,
                              pad_id=pad_id, cache_casts=False)
    grad_norm = clip_gradients(model, train_cfg.clip)  # foreach: no sync
    finite = torch.isfinite(grad_norm) & torch.isfinite(loss)
    return loss, finite, grad_norm


# ----------------------------------------------------------------------------- CUDA graphs

class CUDAGraphSteps:
    """``step(batch) -> (loss, finite)`` that replays one CUDA graph per static bucket.

    Args:
        model: the Transformer (the RNN encoder packs sequences by their lengths on the host,
            which a replayed graph cannot follow), on a CUDA device.
        optimizer: fused Adam/AdamW (``attnmt.training.trainable.make_optimizer`` on CUDA); its groups
            are made capturable and their learning rates become tensors the schedule fills.
        schedule: stepped on the host after each finite step, as in train_step.
        length_step: source and target lengths round up to a multiple of this (fewer graphs
            against less padding); rows round up to the largest batch seen so far's multiple of 8.
        max_graphs: buckets past this many run the same static step uncaptured.

    Raises:
        ValueError: not CUDA, not the Transformer, or an optimizer without a fused kernel.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 schedule: torch.optim.lr_scheduler.LRScheduler, *, train_cfg, use_amp: bool, pad_id: int,
                 length_step: int = 8, max_graphs: int = 64):
        device = next(model.parameters()).device
        if device.type != "cuda":
            raise ValueError(f"train.compile='cudagraphs' needs a CUDA device; the model is on {device}")
        if not hasattr(model, "decoder_layers"):
            raise ValueError("train.compile='cudagraphs' supports the Transformer only: the RNN encoder packs "
                             "sequences by length on the host, which a CUDA graph cannot replay")
        if not all(group.get("fused") for group in optimizer.param_groups):
            raise ValueError("train.compile='cudagraphs' needs a fused Adam/AdamW (found_inf skips a bad step "
                             "inside the graph)")
        self.model, self.optimizer, self.schedule = model, optimizer, schedule
        self.train_cfg, self.use_amp, self.pad_id = train_cfg, use_amp, pad_id
        self.length_step, self.max_graphs, self.device = length_step, max_graphs, device
        self.graphs: dict[tuple[int, int, int], dict] = {}
        self.uncaptured_steps = 0
        for group in optimizer.param_groups:
            group["capturable"] = True
            if not isinstance(group["lr"], Tensor):
                group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)

    def __call__(self, batch: Batch) -> tuple[Tensor, bool]:
        """One update on `batch` (on any device; copied into the bucket's buffers)."""
        rows, src_len, tgt_len = bucket_shape(batch, length_step=self.length_step, row_step=8)
        key = (rows, src_len, tgt_len)
        entry = self.graphs.get(key)
        if entry is None and len(self.graphs) < self.max_graphs:
            entry = self.graphs[key] = self._capture(pad_batch(batch, *key, pad_id=self.pad_id))
        if entry is None:  # too many buckets: the same static step, uncaptured
            self.uncaptured_steps += 1
            return self._run_uncaptured(pad_batch(batch, *key, pad_id=self.pad_id).to(self.device), batch)
        self._fill(entry, batch, key)
        entry["graph"].replay()
        finite = bool(entry["finite"])  # the step's one host synchronisation, after the replay
        if finite:
            self.schedule.step()
        return entry["loss"].double(), finite  # float64, as train_step returns it (a copy: the buffer is reused)

    # -- internals

    def _fill(self, entry: dict, batch: Batch, key: tuple[int, int, int]) -> None:
        padded = pad_batch(batch, *key, pad_id=self.pad_id)
        for name in ("src_ids", "src_mask", "src_lengths", "tgt_in", "tgt_out"):
            getattr(entry["batch"], name).copy_(getattr(padded, name), non_blocking=True)
        entry["tokens"].fill_(float(batch.num_tgt_tokens))

    def _update(self, batch: Batch, tokens: Tensor) -> tuple[Tensor, Tensor]:
        loss, finite, _ = static_update(self.model, batch, tokens, train_cfg=self.train_cfg,
                                        use_amp=self.use_amp, pad_id=self.pad_id)
        self.optimizer.found_inf = (~finite).to(torch.float32)  # () 1.0 = skip, read by the fused kernel
        try:
            self.optimizer.step()
        finally:
            del self.optimizer.found_inf
        return loss, finite

    def _run_uncaptured(self, padded: Batch, batch: Batch) -> tuple[Tensor, bool]:
        self.optimizer.zero_grad(set_to_none=True)
        tokens = torch.tensor(float(batch.num_tgt_tokens), device=self.device)
        loss, finite = self._update(padded, tokens)
        self.optimizer.zero_grad(set_to_none=True)
        ok = bool(finite)
        if ok:
            self.schedule.step()
        return loss.double(), ok

    def _materialize_optimizer_state(self) -> None:
        """Create Adam's state before capture (lazily created state would be re-zeroed by every
        replay), with no effect on weights or moments: a step with zero gradients and found_inf
        set, which the fused kernel skips, and whose step count it takes back."""
        params = [p for group in self.optimizer.param_groups for p in group["params"]
                  if p.requires_grad and len(self.optimizer.state.get(p, {})) == 0]
        if not params:
            return
        saved = {p: p.grad for p in params}
        for p in params:
            p.grad = torch.zeros_like(p)
        self.optimizer.found_inf = torch.ones((), dtype=torch.float32, device=self.device)
        try:
            self.optimizer.step()
        finally:
            del self.optimizer.found_inf
            for p in params:
                p.grad = saved[p]

    def _capture(self, padded: Batch) -> dict:
        """Static buffers for one bucket, warm-up on a side stream, then the capture."""
        log.info("capturing a CUDA graph for bucket (rows, src_len, tgt_len) = %s", tuple(padded.src_ids.shape)
                 + (padded.tgt_in.shape[1],))
        static = padded.to(self.device)
        tokens = torch.ones((), dtype=torch.float32, device=self.device)
        self._materialize_optimizer_state()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # warm-up: kernels chosen, workspaces made; no update
            for _ in range(2):
                self.optimizer.zero_grad(set_to_none=True)
                static_update(self.model, static, tokens, train_cfg=self.train_cfg, use_amp=self.use_amp,
                              pad_id=self.pad_id)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.optimizer.zero_grad(set_to_none=True)  # the graph allocates its own .grad tensors
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loss, finite = self._update(static, tokens)
        return {"graph": graph, "batch": static, "tokens": tokens, "loss": loss, "finite": finite}

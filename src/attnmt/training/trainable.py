"""What trains: the model (in DDP under torchrun), its optimizer and learning-rate schedules, and
whether bf16 autocast is on."""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass

import torch
from torch import nn

from attnmt.config import STEP_SCHEDULES, Config, advisories
from attnmt.data.pipeline import TextPipeline
from attnmt.models import count_parameters
from attnmt.run_dir import model_for
from attnmt.training.distributed import wrap_model
from attnmt.world import SINGLE, World
from attnmt.training.init_from import load_init_weights

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def make_optimizer(model: nn.Module, cfg) -> torch.optim.Optimizer:
    fused = next(model.parameters()).is_cuda  # fused Adam/AdamW kernels exist only on CUDA
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    return cls(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay,
               **({"fused": True} if fused else {}))


class KeepRate(torch.optim.lr_scheduler.LRScheduler):
    """A per-step schedule that leaves every group's rate as it is: for `constant`, and for
    `plateau`, whose ReduceLROnPlateau lowers the rate once an epoch. (A LambdaLR of factor 1 would
    set the rate back to `lr` at every step and undo each reduction.)"""

    def get_lr(self) -> list:
        return [group["lr"] for group in self.optimizer.param_groups]


def schedule_factor(schedule: str, n: int, warmup: int, total: int | None) -> float:
    """The rate of update `n` (1, 2, ...) as a fraction of `train.lr`: a linear warmup over `warmup`
    updates, then `inverse_sqrt` (Vaswani et al. 2017, eq. 3, with the peak at `lr`), or `linear` /
    `cosine`, which fall to zero after update `total` = `train.max_updates` (the schedules of a fixed
    budget: Li et al. 2020, "Budgeted Training"; fairseq's polynomial_decay and cosine). The last
    update keeps a small rate: update `total` gets 1/(total - warmup + 1) of the peak under `linear`."""
    if warmup and n <= warmup:
        return n / warmup
    if schedule == "inverse_sqrt":
        return math.sqrt(warmup / n)
    left = max(total + 1 - n, 0) / (total + 1 - warmup)   # 1 just after the warmup, 0 after update `total`
    if schedule == "linear":
        return left
    return 0.5 * (1.0 - math.cos(math.pi * left))         # cosine: 1 -> 0, flat at both ends


def make_step_schedule(optimizer: torch.optim.Optimizer, cfg) -> torch.optim.lr_scheduler.LRScheduler:
    """Per-step learning rate for `inverse_sqrt`, `linear` and `cosine` (schedule_factor); otherwise the
    rate is left to the plateau schedule (or constant)."""
    if cfg.schedule not in STEP_SCHEDULES:
        return KeepRate(optimizer)

    def factor(done: int) -> float:  # `done` updates so far; this is the rate of update n = done + 1
        return schedule_factor(cfg.schedule, done + 1, cfg.warmup_steps, cfg.max_updates)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def use_bf16(cfg: Config, device: torch.device) -> bool:
    """`train.amp`: bf16 autocast on CUDA for 'auto', on any device for 'bf16'."""
    amp = cfg.train.amp
    return amp == "bf16" or (amp == "auto" and device.type == "cuda")


@dataclass
class Trainable:
    model: nn.Module       # what trains: DDP around `core` under torchrun, `core` itself otherwise
    core: nn.Module        # the model: what is validated, saved and loaded
    optimizer: torch.optim.Optimizer
    step_schedule: torch.optim.lr_scheduler.LRScheduler
    plateau: torch.optim.lr_scheduler.ReduceLROnPlateau | None
    use_amp: bool


def build_trainable(cfg: Config, pipeline: TextPipeline, device: torch.device, world: World = SINGLE, *,
                    resume: bool = False) -> Trainable:
    """The model (in DDP under torchrun), its optimizer and schedules, and whether bf16 autocast is on.
    A new run with `train.init_from` starts from that run's weights (a resumed one from its own state)."""
    train_cfg = cfg.train
    core = model_for(cfg, pipeline)
    if train_cfg.init_from and not resume:
        log.info("model: starting from the weights of %s", load_init_weights(core, cfg))
    core = core.to(device)
    model = wrap_model(world, core)
    if world.rank:  # the same initial weights everywhere (DDP broadcasts rank 0's), other dropout masks
        torch.manual_seed(train_cfg.seed + world.rank)
    optimizer = make_optimizer(core, train_cfg)
    plateau = (torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max" if train_cfg.early_stopping_metric == "bleu" else "min",
        factor=train_cfg.plateau_factor, patience=train_cfg.plateau_patience, min_lr=train_cfg.min_lr)
        if train_cfg.schedule == "plateau" else None)
    use_amp = use_bf16(cfg, device)
    for note in advisories(cfg) if world.rank == 0 else ():
        log.warning(note)
    log.info("model: %s, %.1fM parameters, device %s%s%s", cfg.model.arch, count_parameters(core) / 1e6,
             device, ", bf16 autocast" if use_amp else "",
             f", {world.size} ranks x {train_cfg.accum_steps} batches an update" if world.size * train_cfg.accum_steps > 1 else "")
    return Trainable(model, core, optimizer, make_step_schedule(optimizer, train_cfg), plateau, use_amp)

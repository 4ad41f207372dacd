"""The training loop: one place for loss, optimizer, schedule, AMP, clipping, validation,
early stopping, checkpoints and logs. Driven by a `Config`; shared by every model.

The loop is named steps that read in order: data (`load_data`, `epoch_updates`), model
(`build_trainable`), step (`train_step`, one call per update), validate (`validate`), decide
(`decide_after_epoch`, the time budget, the bad-step guard) and checkpoint (`save_resume_state`).
It is the same loop on one process and on N data-parallel ranks under torchrun: `distributed`
supplies the process group and makes every collective a no-op on one process (docs/distributed.md).

Shapes:
    batch    sentences in a batch
    tgt_len  padded target length
    vocab    target vocabulary size
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn

from attnmt.checkpoint import (
    check_run_dir,
    clear_run_dir,
    load_train_state,
    load_weights,
    prune_checkpoints,
    save_train_state,
    save_weights,
    write_json,
    write_pointer,
)
from attnmt.config import Config, advisories, apply_overrides, config_from_dict, load_config, load_saved_config, save_config
from attnmt.data.batching import Batch, make_batches
from attnmt.data.corpus import ParallelCorpus, corpus_spec, load_corpus
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding import decode_sources
from attnmt.devices import resolve_device
from attnmt.distributed import (
    SINGLE,
    World,
    any_,
    barrier,
    broadcast_from_main,
    close_world,
    env_rank,
    gather_to_main,
    init_world,
    no_sync,
    shard_update,
    sum_,
    wrap_model,
)
from attnmt.errors import AttnmtError
from attnmt.evaluation import corpus_loss, perplexity, score_translations
from attnmt.graphs import make_train_step
from attnmt.models import build_model, count_parameters
from attnmt.models.loss import sequence_loss

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- setup helpers

def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def make_optimizer(model: nn.Module, cfg) -> torch.optim.Optimizer:
    fused = next(model.parameters()).is_cuda  # fused Adam/AdamW kernels exist only on CUDA
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    return cls(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay,
               **({"fused": True} if fused else {}))


def make_step_schedule(optimizer: torch.optim.Optimizer, cfg) -> torch.optim.lr_scheduler.LambdaLR:
    """Per-step learning-rate factor: constant, or linear warmup then inverse square root
    (Vaswani et al. 2017, eq. 3, with the peak at `lr`)."""
    if cfg.schedule == "inverse_sqrt":
        warmup = cfg.warmup_steps

        def factor(done: int) -> float:  # `done` updates so far; this is the rate of update n = done + 1
            n = done + 1
            return min(n / warmup, math.sqrt(warmup / n))
    else:
        def factor(done: int) -> float:
            return 1.0
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train_step(model: nn.Module, batches: Batch | Sequence[Batch], optimizer: torch.optim.Optimizer,
               schedule: torch.optim.lr_scheduler.LRScheduler, *, train_cfg, use_amp: bool, pad_id: int,
               global_tokens: int | None = None, world: World = SINGLE) -> tuple[torch.Tensor, bool]:
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
            with torch.autocast(batch.src_ids.device.type, dtype=torch.bfloat16, enabled=use_amp):
                logits = model(batch.src_ids, batch.src_mask, batch.src_lengths, batch.tgt_in,
                               teacher_forcing=train_cfg.teacher_forcing).logits  # (batch, tgt_len, vocab)
            loss = sequence_loss(logits, batch.tgt_out, pad_id=pad_id, label_smoothing=train_cfg.label_smoothing)
            (loss * scale).backward()
        local_loss += loss.detach().double()
    total_loss = sum_(world, local_loss)
    max_norm = train_cfg.clip if train_cfg.clip > 0 else float("inf")
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # the same on every rank after DDP
    finite = bool(torch.isfinite(grad_norm) & torch.isfinite(total_loss))
    if finite:
        optimizer.step()
        schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return total_loss, finite


# ----------------------------------------------------------------------------- the loop

@dataclass
class TrainResult:
    run_dir: Path
    epochs: int
    best: dict = field(default_factory=dict)
    seconds: float = 0.0


class MetricsLog:
    """Append-only JSONL log (one object per event), mirrored to TensorBoard when asked.
    With no path (a rank other than 0) it writes nothing."""

    def __init__(self, path: Path | None, tensorboard: bool = False):
        self.path = path
        self.writer = None
        if tensorboard and path is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(path.parent / "tensorboard"))
            except ImportError:
                log.warning("train.tensorboard is on but tensorboard is not installed (pip install tensorboard)")

    def write(self, **record) -> None:
        if self.path is None:
            return
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        if self.writer is not None and "step" in record:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key not in ("step", "epoch"):
                    self.writer.add_scalar(f"{record.get('event', 'train')}/{key}", value, record["step"])

    def size(self) -> int:
        return self.path.stat().st_size if self.path is not None and self.path.exists() else 0


def train(cfg: Config, run_dir: str | Path, *, resume: bool = False, overwrite: bool = False) -> TrainResult:
    """Train `cfg`'s model, writing everything to `run_dir`; with `resume`, continue from its state.

    Raises:
        AttnmtError: `run_dir` already holds a run and neither `resume` nor `overwrite` is given.
    """
    threads = torch.get_num_threads()
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    try:
        device = resolve_device(cfg.train.device)
        use_bf16(cfg, device)  # refuse an impossible `train.amp` before anything is written
        world, device = init_world(cfg.train.backend, device)  # SINGLE outside torchrun
        result = _train(cfg, Path(run_dir), resume=resume, overwrite=overwrite, world=world, device=device)
        close_world(world)  # on an error, the process exits and torchrun stops the other ranks
        return result
    finally:
        torch.set_num_threads(threads)


# ---- data

@dataclass
class TrainData:
    pipeline: TextPipeline
    train_examples: list
    val_corpus: ParallelCorpus
    val_batches: list[Batch]
    n_val_bleu: int
    batch_args: dict


def load_data(cfg: Config, run_dir: Path, *, resume: bool, world: World = SINGLE) -> TrainData:
    """Read the corpora; build the tokenizers and vocabularies (or load them on resume).
    Rank 0 builds and saves them; the other ranks then load what it saved."""
    t, d = cfg.train, cfg.data
    spec = corpus_spec(d)
    train_corpus = load_corpus(spec, "train")
    if d.train_subset:
        train_corpus = ParallelCorpus(train_corpus.src[: d.train_subset], train_corpus.tgt[: d.train_subset],
                                      f"{train_corpus.name}[:{d.train_subset}]")
    val_corpus = load_corpus(spec, "val")
    if not resume and world.main:
        pipeline = TextPipeline.build(d, train_corpus, cache_dir=run_dir / "cache")
        pipeline.save(run_dir)
        save_config(cfg, run_dir / "config.json")
    barrier(world)
    if resume or not world.main:
        pipeline = TextPipeline.load(run_dir)
    vocab = pipeline.tgt_vocab
    batch_args = dict(batch_size=t.batch_size, batch_by=t.batch_by, pad_id=vocab.pad_id, bos_id=vocab.bos_id,
                      eos_id=vocab.eos_id)
    train_examples = pipeline.encode_corpus(train_corpus, max_len=d.max_len)
    val_batches = make_batches(pipeline.encode_corpus(val_corpus), shuffle=False, **batch_args)
    n_val_bleu = min(len(val_corpus.src), t.eval_max_sentences or len(val_corpus.src))
    return TrainData(pipeline, train_examples, val_corpus, val_batches, n_val_bleu, batch_args)


@dataclass
class Update:
    batches: list[Batch]   # this rank's share
    global_tokens: int     # target tokens of the update on all ranks


def epoch_updates(data: TrainData, t, epoch: int, world: World = SINGLE) -> list[Update]:
    """The epoch's updates, and this rank's share of each.

    Every rank builds the same global batches from (seed, epoch), so a resumed run skips the
    updates already done. An update takes `world.size * train.accum_steps` consecutive batches,
    shared by `shard_update` (token-balanced); the last `len % that` batches of the epoch are
    left out (other ones every epoch), so N ranks and one process with `accum_steps: N` train
    exactly the same updates.

    Raises:
        AttnmtError: fewer batches in an epoch than one update takes.
    """
    batches = make_batches(data.train_examples, shuffle=True, seed=t.seed, epoch=epoch, **data.batch_args)
    group = world.size * t.accum_steps
    if group == 1:
        return [Update([batch], batch.num_tgt_tokens) for batch in batches]
    if len(batches) < group:
        raise AttnmtError(f"an epoch has {len(batches)} batches, fewer than one update takes ({world.size} ranks x "
                          f"train.accum_steps={t.accum_steps}): lower train.batch_size or train.accum_steps")
    updates = []
    for start in range(0, len(batches) - len(batches) % group, group):
        members = batches[start:start + group]
        updates.append(Update(shard_update(members, world.size)[world.rank],
                              sum(batch.num_tgt_tokens for batch in members)))
    return updates


# ---- model

@dataclass
class Trainable:
    model: nn.Module       # what trains: DDP around `core` under torchrun, `core` itself otherwise
    core: nn.Module        # the model: what is validated, saved and loaded
    optimizer: torch.optim.Optimizer
    step_schedule: torch.optim.lr_scheduler.LambdaLR
    plateau: torch.optim.lr_scheduler.ReduceLROnPlateau | None
    use_amp: bool


def build_trainable(cfg: Config, data: TrainData, device: torch.device, world: World = SINGLE) -> Trainable:
    """The model (in DDP under torchrun), its optimizer and schedules, and whether bf16 autocast is on."""
    t, vocab = cfg.train, data.pipeline.tgt_vocab
    core = build_model(cfg.model, len(data.pipeline.src_vocab), len(vocab), pad_id=vocab.pad_id,
                       bos_id=vocab.bos_id, eos_id=vocab.eos_id).to(device)
    model = wrap_model(world, core)
    if world.rank:  # the same initial weights everywhere (DDP broadcasts rank 0's), other dropout masks
        torch.manual_seed(t.seed + world.rank)
    optimizer = make_optimizer(core, t)
    plateau = (torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max" if t.early_stopping_metric == "bleu" else "min",
        factor=t.plateau_factor, patience=t.plateau_patience, min_lr=t.min_lr)
        if t.schedule == "plateau" else None)
    use_amp = use_bf16(cfg, device)
    for note in advisories(cfg) if world.rank == 0 else ():
        log.warning(note)
    log.info("model: %s, %.1fM parameters, device %s%s%s", cfg.model.arch, count_parameters(core) / 1e6,
             device, ", bf16 autocast" if use_amp else "",
             f", {world.size} ranks x {t.accum_steps} batches an update" if world.size * t.accum_steps > 1 else "")
    return Trainable(model, core, optimizer, make_step_schedule(optimizer, t), plateau, use_amp)


UpdateStep = Callable[[list[Batch], int], tuple[torch.Tensor, bool]]


def make_update_step(trainable: Trainable, train_cfg, *, pad_id: int, world: World = SINGLE) -> UpdateStep:
    """The per-update step, `step(batches, global_tokens) -> (loss, finite)`: `train_step`, or
    the faster step that `train.compile` asks for (graphs.py), which takes one batch an update
    in one process."""
    t = train_cfg
    if t.compile == "none":
        def step(batches: list[Batch], global_tokens: int) -> tuple[torch.Tensor, bool]:
            return train_step(trainable.model, batches, trainable.optimizer, trainable.step_schedule, train_cfg=t,
                              use_amp=trainable.use_amp, pad_id=pad_id, global_tokens=global_tokens, world=world)
        return step
    if world.size > 1 or t.accum_steps > 1:
        raise AttnmtError(f"train.compile={t.compile!r} runs one process with train.accum_steps=1; got "
                          f"{world.size} ranks and train.accum_steps={t.accum_steps} (use train.compile=none)")
    fast = make_train_step(t.compile, trainable.model, trainable.optimizer, trainable.step_schedule, train_cfg=t,
                           use_amp=trainable.use_amp, pad_id=pad_id, eager=train_step)
    return lambda batches, global_tokens: fast(batches[0])


def use_bf16(cfg: Config, device: torch.device) -> bool:
    """`train.amp`: bf16 autocast on CUDA for 'auto'; on any device for 'bf16', but on a CPU the
    Transformer only.

    Raises:
        AttnmtError: `amp: bf16` for the RNN on a CPU, naming the key.
    """
    amp = cfg.train.amp
    if amp == "bf16" and device.type == "cpu" and cfg.model.arch == "rnn":
        raise AttnmtError("train.amp='bf16' on a CPU works with model.arch='transformer' only: the CPU's autocast "
                          "keeps the RNN's GRU in float32 while its linear layers turn bf16. Use train.amp=none "
                          "(or auto) for the RNN on a CPU")
    return amp == "bf16" or (amp == "auto" and device.type == "cuda")


# ---- validate

def validate(model: nn.Module, data: TrainData, cfg: Config, device: torch.device) -> dict:
    """Validation loss, perplexity, BLEU and chrF of `model` (greedy or `train.eval_beam`)."""
    pad_id = data.pipeline.tgt_vocab.pad_id
    val_nll, val_tokens = corpus_loss(model, data.val_batches, device, pad_id=pad_id)
    hyps = decode_sources(model, data.pipeline, data.val_corpus.src[:data.n_val_bleu], beam_size=cfg.train.eval_beam,
                          search_cfg=cfg.search, device=device)
    scores = score_translations([h.text for h in hyps], data.val_corpus.tgt[:data.n_val_bleu],
                                tgt_lang=cfg.data.tgt_lang)
    return dict(val_loss=round(val_nll / max(val_tokens, 1), 4), val_ppl=round(perplexity(val_nll, val_tokens), 2),
                val_bleu=scores["bleu"], val_chrf=scores["chrf"], _val_loss=val_nll / max(val_tokens, 1))


def selection_score(record: dict, t) -> float:
    """Higher is better: BLEU, or the negated validation loss."""
    return record["val_bleu"] if t.early_stopping_metric == "bleu" else -record["_val_loss"]


# ---- decide

def decide_after_epoch(state: dict, scores: dict, trainable: Trainable, t) -> tuple[bool, bool]:
    """Step the plateau schedule, track the best epoch; returns (improved, stop early)."""
    score = selection_score(scores, t)
    if trainable.plateau is not None:
        trainable.plateau.step(scores["val_bleu"] if t.early_stopping_metric == "bleu" else scores["_val_loss"])
    improved = state["best_score"] is None or score > state["best_score"]
    if improved:
        state.update(best_score=score, best_epoch=state["epoch"], bad_epochs=0)
    else:
        state["bad_epochs"] += 1
    stop = bool(t.early_stopping_patience) and state["bad_epochs"] >= t.early_stopping_patience
    if stop:
        log.info("early stopping: no improvement in %d epochs", state["bad_epochs"])
    return improved, stop


# ---- checkpoint

def save_resume_state(run_dir: Path, weights: Path, trainable: Trainable, state: dict, device: torch.device,
                      world: World = SINGLE, accum_steps: int = 1) -> None:
    """Write everything `--resume` needs (safetensors + JSON) next to weights already saved.
    Every rank calls it (each one's random state is gathered); rank 0 writes."""
    rng = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        rng["cuda"] = torch.cuda.get_rng_state(device)
    ranks = gather_to_main(world, rng)
    if not world.main:
        return
    saved = {
        "weights": str(weights),
        "optimizer": trainable.optimizer.state_dict(),
        "schedule": trainable.step_schedule.state_dict(),
        "counters": dict(state),
        "world_size": world.size,
        "accum_steps": accum_steps,
        "rng": {key: [r[key] for r in ranks] for key in rng},
    }
    if trainable.plateau is not None:
        saved["plateau"] = trainable.plateau.state_dict()
    save_train_state(run_dir, saved)
    # Mid-epoch weights are needed only until the next state is safely written.
    for old in (run_dir / "checkpoints").glob("resume_step*.safetensors"):
        if old.name != Path(weights).name:
            old.unlink(missing_ok=True)


def restore_resume_state(run_dir: Path, trainable: Trainable, state: dict, device: torch.device,
                         world: World = SINGLE) -> None:
    """Load what `save_resume_state` wrote into the model, optimizer, schedules, counters and RNG.

    Raises:
        AttnmtError: the run was trained on another number of ranks.
    """
    saved = load_train_state(run_dir)
    trained_on = int(saved.get("world_size", 1))
    if trained_on != world.size:
        raise AttnmtError(f"{run_dir} was trained on {trained_on} rank(s) and is being resumed on {world.size}: "
                          f"resume it on {trained_on} (torchrun --nproc-per-node {trained_on} -m attnmt train "
                          f"--resume {run_dir}), so that every update takes the same batches")
    load_weights(trainable.core, run_dir / saved["weights"])
    trainable.optimizer.load_state_dict(saved["optimizer"])
    trainable.step_schedule.load_state_dict(saved["schedule"])
    if trainable.plateau is not None:
        trainable.plateau.load_state_dict(saved["plateau"])
    state.update(saved["counters"])
    torch.set_rng_state(saved["rng"]["cpu"][world.rank])
    if device.type == "cuda" and "cuda" in saved["rng"]:
        torch.cuda.set_rng_state(saved["rng"]["cuda"][world.rank], device)


def _train(cfg: Config, run_dir: Path, *, resume: bool, overwrite: bool, world: World,
           device: torch.device) -> TrainResult:
    t = cfg.train
    check_run_dir(run_dir, resume=resume, overwrite=overwrite)  # every rank reads before rank 0 writes
    barrier(world)
    if world.main:
        if overwrite and not resume:
            clear_run_dir(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    seed_everything(t.seed)

    # ---- data and model
    data = load_data(cfg, run_dir, resume=resume, world=world)
    trainable = build_trainable(cfg, data, device, world)
    model, core, optimizer = trainable.model, trainable.core, trainable.optimizer
    pad_id = data.pipeline.tgt_vocab.pad_id

    state = {"epoch": 0, "step": 0, "best_score": None, "best_epoch": None, "bad_epochs": 0, "seconds": 0.0,
             "update_in_epoch": 0, "epoch_loss": 0.0, "epoch_tokens": 0, "metrics_bytes": 0,
             "best_info": None, "last_info": None}
    metrics_path = run_dir / "metrics.jsonl"
    if resume:
        restore_resume_state(run_dir, trainable, state, device, world)
        if world.main:
            # The log and the best/last pointers continue from where the saved state was taken, as
            # if the run had never stopped (a time-budget stop's evaluation is undone here).
            with open(metrics_path, "ab") as handle:
                handle.truncate(state["metrics_bytes"])
            write_pointer(run_dir, "best.json", state["best_info"])
            write_pointer(run_dir, "last.json", state["last_info"])
        log.info("resuming %s in epoch %d after update %d (step %d)", run_dir, state["epoch"] + 1,
                 state["update_in_epoch"], state["step"])

    metrics = MetricsLog(metrics_path if world.main else None, tensorboard=t.tensorboard)
    if not resume:
        metrics.write(event="start", params=count_parameters(core), device=str(device),
                      train_pairs=len(data.train_examples), val_pairs=sum(len(b) for b in data.val_batches),
                      **({"ranks": world.size} if world.size > 1 else {}),
                      **({"accum_steps": t.accum_steps} if t.accum_steps > 1 else {}))
    from tqdm.auto import tqdm

    start_time = time.perf_counter() - state["seconds"]

    def save_progress(weights_file: Path) -> None:  # every rank calls it; rank 0 writes
        state["seconds"] = time.perf_counter() - start_time
        state["metrics_bytes"] = metrics.size()
        save_resume_state(run_dir, weights_file, trainable, state, device, world, t.accum_steps)

    def save_mid_epoch() -> Path:
        weights_file = Path("checkpoints") / f"resume_step{state['step']:07d}.safetensors"
        if world.main:
            save_weights(core, run_dir / weights_file)
        save_progress(weights_file)
        return weights_file

    def out_of_time() -> bool:  # every rank stops when any rank's clock says so
        return bool(t.max_minutes) and any_(world, time.perf_counter() - start_time > 60 * t.max_minutes)

    stop = out_of_time()
    if t.early_stopping_patience and state["bad_epochs"] >= t.early_stopping_patience:
        stop = True  # this run already stopped early; a larger patience lets it go on
    if resume and (stop or state["epoch"] >= t.epochs):
        log.info("nothing left to train (epoch %d of %d, %.0f s): extend with --set train.epochs=N, "
                 "train.max_minutes=M or train.early_stopping_patience=P", state["epoch"], t.epochs, state["seconds"])
    update_step = make_update_step(trainable, t, pad_id=pad_id, world=world)  # after the resume's optimizer state
    while state["epoch"] < t.epochs and not stop:
        epoch = state["epoch"] + 1
        model.train()
        # ---- data: this epoch's updates (this rank's share), without those already done
        updates = epoch_updates(data, t, epoch, world)
        bar = tqdm(updates[state["update_in_epoch"]:], desc=f"epoch {epoch}", leave=False,
                   disable=None if world.main else True, mininterval=1.0)
        loss_sum = torch.full((), state["epoch_loss"], dtype=torch.float64, device=device)
        tokens_seen, bad_steps, window_start, window_tokens = state["epoch_tokens"], 0, time.perf_counter(), 0
        budget_stop = False
        for update in bar:
            # ---- step
            state["update_in_epoch"] += 1
            batches = [batch.to(device) for batch in update.batches]
            loss, finite = update_step(batches, update.global_tokens)
            ntok = update.global_tokens
            if finite:
                bad_steps = 0
                state["step"] += 1
                loss_sum += loss
                tokens_seen += ntok
                window_tokens += ntok
            else:
                # A bad step never reaches the weights: train_step dropped its gradients (on every rank).
                bad_steps += 1
                examples = torch.cat([batch.index for batch in update.batches])
                log.warning("epoch %d update %d (examples %s...): non-finite loss or gradient; step skipped "
                            "(%d in a row)", epoch, state["update_in_epoch"], examples[:4].tolist(), bad_steps)
                metrics.write(event="bad_step", epoch=epoch, batch=state["update_in_epoch"], step=state["step"],
                              examples=examples[:8].tolist())
                if bad_steps >= t.max_bad_steps:
                    raise AttnmtError(f"{bad_steps} consecutive non-finite steps (train.max_bad_steps="
                                      f"{t.max_bad_steps}); lower train.lr or check the data")
            if finite and state["step"] % t.log_every == 0:
                elapsed = time.perf_counter() - window_start
                train_loss = float(loss_sum) / max(tokens_seen, 1)
                rate = window_tokens / max(elapsed, 1e-9)
                bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{rate:,.0f}")
                metrics.write(event="train", epoch=epoch, step=state["step"], loss=round(train_loss, 4),
                              tokens_per_s=round(rate), lr=optimizer.param_groups[0]["lr"])
                window_start, window_tokens = time.perf_counter(), 0
            # ---- decide (mid-epoch): periodic save, time budget
            mid_epoch = state["update_in_epoch"] < len(updates)
            budget_stop = out_of_time()
            periodic = finite and bool(t.save_every_steps) and state["step"] % t.save_every_steps == 0
            if mid_epoch and (periodic or budget_stop):
                state["epoch_loss"], state["epoch_tokens"] = float(loss_sum), tokens_seen
                weights_file = save_mid_epoch()
            if budget_stop:
                stop = True
                log.info("train.max_minutes=%s reached in epoch %d after update %d of %d", t.max_minutes, epoch,
                         state["update_in_epoch"], len(updates))
                break
        bar.close()
        if budget_stop and mid_epoch:
            # The resumable state stays mid-epoch (saved above, before this evaluation, which a
            # resumed run undoes); the weights are validated and made evaluable through last.json
            # (and best.json if they beat the best epoch), but the epoch is not complete.
            if world.main:
                scores = validate(core, data, cfg, device)
                info = {"file": str(weights_file), "epoch": epoch, "complete": False, "step": state["step"],
                        **_public(scores)}
                write_json(run_dir / "last.json", info)
                if state["best_score"] is None or selection_score(scores, t) > state["best_score"]:
                    write_json(run_dir / "best.json", info)
                metrics.write(event="stop", epoch=epoch, step=state["step"], update_in_epoch=state["update_in_epoch"],
                              updates_in_epoch=len(updates), **_public(scores))
                log.info("stopped mid-epoch %d: val loss %.3f BLEU %.2f; resume with --resume %s --set "
                         "train.max_minutes=M", epoch, scores["val_loss"], scores["val_bleu"], run_dir)
            break
        train_loss = float(loss_sum) / max(tokens_seen, 1)

        # ---- validate: once, on rank 0; every rank receives the scores
        scores = broadcast_from_main(world, validate(core, data, cfg, device) if world.main else None)
        state.update(epoch=epoch, update_in_epoch=0, epoch_loss=0.0, epoch_tokens=0)
        state["seconds"] = time.perf_counter() - start_time

        # ---- decide: the same on every rank, from the same scores
        improved, stop = decide_after_epoch(state, scores, trainable, t)

        # ---- checkpoint: weights first, then the pointers that name them
        record = dict(event="epoch", epoch=epoch, step=state["step"], train_loss=round(train_loss, 4),
                      **_public(scores), lr=optimizer.param_groups[0]["lr"], seconds=round(state["seconds"], 1))
        log.info("epoch %d: train loss %.3f | val loss %.3f ppl %.2f BLEU %.2f chrF %.2f | %.0f s", epoch,
                 train_loss, record["val_loss"], record["val_ppl"], record["val_bleu"], record["val_chrf"],
                 state["seconds"])
        weights = Path("checkpoints") / f"epoch_{epoch:03d}.safetensors"
        info = {"file": str(weights), "epoch": epoch, **_public(record)}
        if improved:
            state["best_info"] = info
        state["last_info"] = info
        if world.main:
            save_weights(core, run_dir / weights, metadata={"epoch": str(epoch), "step": str(state["step"])})
            if improved:
                write_json(run_dir / "best.json", info)
            write_json(run_dir / "last.json", info)
            record["best"] = improved
            metrics.write(**record)
        save_progress(weights)
        if world.main:
            prune_checkpoints(run_dir, keep=t.keep_last)

    best = json.loads((run_dir / "best.json").read_text()) if (run_dir / "best.json").exists() else {}
    metrics.write(event="end", epochs=state["epoch"], seconds=round(state["seconds"], 1), best_epoch=state["best_epoch"])
    return TrainResult(run_dir=run_dir, epochs=state["epoch"], best=best, seconds=state["seconds"])


def _public(record: dict) -> dict:
    """A record's values for pointers and logs: without the event, the epoch and private keys."""
    return {k: v for k, v in record.items() if k not in ("event", "epoch") and not k.startswith("_")}


# What `--resume RUN --set ...` may change: how long and how verbosely the run goes on, never
# what it trains (data, model, optimizer, schedule), so the resumed run stays one consistent run.
EXTENDABLE_KEYS = ("train.epochs", "train.max_minutes", "train.early_stopping_patience", "train.num_threads",
                   "train.log_every", "train.save_every_steps", "train.keep_last", "train.max_bad_steps",
                   "train.tensorboard", "train.backend")


def _extend_run(cfg: Config, run_dir: Path, overrides: list[str]) -> Config:
    """Apply `overrides` limited to EXTENDABLE_KEYS to a saved run's config and save it."""
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key not in EXTENDABLE_KEYS:
            raise AttnmtError(f"--set {key} cannot change a run that is being resumed: it would no longer be the "
                              f"same run. On resume only these can change: {', '.join(EXTENDABLE_KEYS)}")
    source = str(run_dir / "config.json")
    cfg = config_from_dict(apply_overrides(cfg.to_dict(), overrides, source=f"--set on {source}"), source=source)
    if env_rank() == 0:  # under torchrun, rank 0 alone writes
        save_config(cfg, run_dir / "config.json")
    log.info("resumed run extended: %s", ", ".join(overrides))
    return cfg


def train_command(args) -> int:
    """`attnmt train CONFIG [--set k=v ...] [--run-dir DIR] [--overwrite] [--resume RUN_DIR]`."""
    if args.resume and getattr(args, "overwrite", False):
        raise AttnmtError("--overwrite starts a run afresh and cannot be combined with --resume")
    if args.resume:
        run_dir = Path(args.resume)
        cfg = load_saved_config(run_dir / "config.json")
        if args.overrides:
            cfg = _extend_run(cfg, run_dir, args.overrides)
    else:
        if not args.config:
            raise AttnmtError("train needs a CONFIG file (or --resume RUN_DIR)")
        cfg = load_config(args.config, args.overrides)
        run_dir = Path(args.run_dir or Path("runs") / Path(args.config).stem)
    result = train(cfg, run_dir, resume=bool(args.resume), overwrite=bool(getattr(args, "overwrite", False)))
    if env_rank() == 0:
        print(json.dumps({"run_dir": str(result.run_dir), "epochs": result.epochs,
                          "seconds": round(result.seconds, 1), "best": result.best}, indent=2))
    return 0

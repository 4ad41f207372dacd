"""The training loop: one place for loss, optimizer, schedule, AMP, clipping, validation,
early stopping, checkpoints and logs. Driven by a `Config`; shared by every model.

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

import torch
from torch import nn

from attnmt.checkpoint import (
    epoch_checkpoints,
    load_train_state,
    load_weights,
    save_train_state,
    save_weights,
    write_json,
)
from attnmt.config import Config, apply_overrides, config_from_dict, load_config, load_saved_config, save_config
from attnmt.data.batching import Batch, make_batches
from attnmt.data.corpus import ParallelCorpus, corpus_spec, load_corpus
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding import decode_sources
from attnmt.devices import resolve_device
from attnmt.errors import AttnmtError
from attnmt.evaluation import corpus_loss, perplexity, score_translations
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


def train_step(model: nn.Module, batch: Batch, optimizer: torch.optim.Optimizer,
               schedule: torch.optim.lr_scheduler.LRScheduler, *, train_cfg, use_amp: bool,
               pad_id: int) -> tuple[torch.Tensor, bool]:
    """One update: forward, summed loss / target tokens, backward, clip, optimizer and schedule step.

    A non-finite loss or gradient norm skips the update (its gradients are dropped), so a bad
    batch never reaches the weights; checking it is this step's one host synchronisation.

    Returns:
        (summed loss over the batch's target tokens, detached; whether the update was applied)
    """
    with torch.autocast(batch.src_ids.device.type, dtype=torch.bfloat16, enabled=use_amp):
        logits = model(batch.src_ids, batch.src_mask, batch.src_lengths, batch.tgt_in,
                       teacher_forcing=train_cfg.teacher_forcing).logits  # (batch, tgt_len, vocab)
    loss = sequence_loss(logits, batch.tgt_out, pad_id=pad_id, label_smoothing=train_cfg.label_smoothing)
    (loss / batch.num_tgt_tokens).backward()
    max_norm = train_cfg.clip if train_cfg.clip > 0 else float("inf")
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    finite = bool(torch.isfinite(grad_norm) & torch.isfinite(loss))
    if finite:
        optimizer.step()
        schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach(), finite


# ----------------------------------------------------------------------------- the loop

@dataclass
class TrainResult:
    run_dir: Path
    epochs: int
    best: dict = field(default_factory=dict)
    seconds: float = 0.0


class MetricsLog:
    """Append-only JSONL log (one object per event), mirrored to TensorBoard when asked."""

    def __init__(self, path: Path, tensorboard: bool = False):
        self.path = path
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(path.parent / "tensorboard"))
            except ImportError:
                log.warning("train.tensorboard is on but tensorboard is not installed (pip install tensorboard)")

    def write(self, **record) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        if self.writer is not None and "step" in record:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key not in ("step", "epoch"):
                    self.writer.add_scalar(f"{record.get('event', 'train')}/{key}", value, record["step"])


def train(cfg: Config, run_dir: str | Path, *, resume: bool = False) -> TrainResult:
    """Train `cfg`'s model, writing everything to `run_dir`; with `resume`, continue from its state."""
    threads = torch.get_num_threads()
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    try:
        return _train(cfg, Path(run_dir), resume=resume)
    finally:
        torch.set_num_threads(threads)


def _train(cfg: Config, run_dir: Path, *, resume: bool) -> TrainResult:
    run_dir.mkdir(parents=True, exist_ok=True)
    t, d = cfg.train, cfg.data
    seed_everything(t.seed)
    device = resolve_device(t.device)

    # ---- data
    spec = corpus_spec(d)
    train_corpus = load_corpus(spec, "train")
    if d.train_subset:
        train_corpus = ParallelCorpus(train_corpus.src[: d.train_subset], train_corpus.tgt[: d.train_subset],
                                      f"{train_corpus.name}[:{d.train_subset}]")
    val_corpus = load_corpus(spec, "val")
    if resume:
        pipeline = TextPipeline.load(run_dir)
    else:
        pipeline = TextPipeline.build(d, train_corpus, cache_dir=run_dir / "cache")
        pipeline.save(run_dir)
        save_config(cfg, run_dir / "config.json")
    vocab = pipeline.tgt_vocab
    pad_id, bos_id, eos_id = vocab.pad_id, vocab.bos_id, vocab.eos_id
    train_examples = pipeline.encode_corpus(train_corpus, max_len=d.max_len)
    val_examples = pipeline.encode_corpus(val_corpus)
    batch_args = dict(batch_size=t.batch_size, batch_by=t.batch_by, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id)
    val_batches = make_batches(val_examples, shuffle=False, **batch_args)
    n_val_bleu = min(len(val_corpus.src), t.eval_max_sentences or len(val_corpus.src))

    # ---- model and optimizer
    model = build_model(cfg.model, len(pipeline.src_vocab), len(vocab), pad_id=pad_id, bos_id=bos_id,
                        eos_id=eos_id).to(device)
    optimizer = make_optimizer(model, t)
    step_schedule = make_step_schedule(optimizer, t)
    plateau = (torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max" if t.early_stopping_metric == "bleu" else "min",
        factor=t.plateau_factor, patience=t.plateau_patience, min_lr=t.min_lr)
        if t.schedule == "plateau" else None)
    use_amp = device.type == "cuda" and t.amp in ("auto", "bf16")
    log.info("model: %s, %.1fM parameters, device %s%s", cfg.model.arch, count_parameters(model) / 1e6,
             device, ", bf16 autocast" if use_amp else "")

    state = {"epoch": 0, "step": 0, "best_score": None, "best_epoch": None, "bad_epochs": 0, "seconds": 0.0,
             "batch_in_epoch": 0, "epoch_loss": 0.0, "epoch_tokens": 0, "metrics_bytes": 0}
    metrics_path = run_dir / "metrics.jsonl"
    if resume:
        saved = load_train_state(run_dir / "train_state.pt")
        load_weights(model, run_dir / saved["weights"])
        optimizer.load_state_dict(saved["optimizer"])
        step_schedule.load_state_dict(saved["schedule"])
        if plateau is not None:
            plateau.load_state_dict(saved["plateau"])
        state.update(saved["counters"])
        torch.set_rng_state(saved["rng_cpu"])
        if device.type == "cuda" and "rng_cuda" in saved:
            torch.cuda.set_rng_state(saved["rng_cuda"])
        # The log continues from where the saved state was taken, as if the run had never stopped.
        with open(metrics_path, "ab") as handle:
            handle.truncate(state["metrics_bytes"])
        log.info("resuming %s in epoch %d after batch %d (step %d)", run_dir, state["epoch"] + 1,
                 state["batch_in_epoch"], state["step"])

    metrics = MetricsLog(metrics_path, tensorboard=t.tensorboard)
    if not resume:
        metrics.write(event="start", params=count_parameters(model), device=str(device),
                      train_pairs=len(train_examples), val_pairs=len(val_examples))
    from tqdm.auto import tqdm

    def save_progress(weights_file: Path) -> None:
        state["seconds"] = time.perf_counter() - start_time
        state["metrics_bytes"] = metrics_path.stat().st_size
        _save_resume_state(run_dir, weights_file, model, optimizer, step_schedule, plateau, state, device)

    start_time = time.perf_counter() - state["seconds"]

    def out_of_time() -> bool:
        return bool(t.max_minutes) and time.perf_counter() - start_time > 60 * t.max_minutes

    stop = out_of_time()
    if t.early_stopping_patience and state["bad_epochs"] >= t.early_stopping_patience:
        stop = True  # this run already stopped early; a larger patience lets it go on
    if resume and (stop or state["epoch"] >= t.epochs):
        log.info("nothing left to train (epoch %d of %d, %.0f s): extend with --set train.epochs=N, "
                 "train.max_minutes=M or train.early_stopping_patience=P", state["epoch"], t.epochs, state["seconds"])
    while state["epoch"] < t.epochs and not stop:
        epoch = state["epoch"] + 1
        model.train()
        # Batches depend only on (seed, epoch): a resumed run skips the ones already trained on.
        batches = make_batches(train_examples, shuffle=True, seed=t.seed, epoch=epoch, **batch_args)
        skip = state["batch_in_epoch"]
        bar = tqdm(batches[skip:], desc=f"epoch {epoch}", leave=False, disable=None, mininterval=1.0)
        loss_sum = torch.full((), state["epoch_loss"], dtype=torch.float64, device=device)
        tokens_seen, bad_steps, window_start, window_tokens = state["epoch_tokens"], 0, time.perf_counter(), 0
        for batch in bar:
            state["batch_in_epoch"] += 1
            batch = batch.to(device)
            ntok = batch.num_tgt_tokens
            loss, finite = train_step(model, batch, optimizer, step_schedule, train_cfg=t, use_amp=use_amp,
                                      pad_id=pad_id)
            if not finite:
                # A bad step never reaches the weights: train_step dropped its gradients.
                bad_steps += 1
                log.warning("epoch %d batch %d (examples %s...): non-finite loss or gradient; step skipped "
                            "(%d in a row)", epoch, state["batch_in_epoch"], batch.index[:4].tolist(), bad_steps)
                metrics.write(event="bad_step", epoch=epoch, batch=state["batch_in_epoch"], step=state["step"],
                              examples=batch.index[:8].tolist())
                if bad_steps >= t.max_bad_steps:
                    raise AttnmtError(f"{bad_steps} consecutive non-finite steps (train.max_bad_steps="
                                      f"{t.max_bad_steps}); lower train.lr or check the data")
                continue
            bad_steps = 0
            state["step"] += 1
            loss_sum += loss.detach().double()
            tokens_seen += ntok
            window_tokens += ntok
            if state["step"] % t.log_every == 0:
                elapsed = time.perf_counter() - window_start
                train_loss = float(loss_sum) / max(tokens_seen, 1)
                rate = window_tokens / max(elapsed, 1e-9)
                bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{rate:,.0f}")
                metrics.write(event="train", epoch=epoch, step=state["step"], loss=round(train_loss, 4),
                              tokens_per_s=round(rate), lr=optimizer.param_groups[0]["lr"])
                window_start, window_tokens = time.perf_counter(), 0
            if t.save_every_steps and state["step"] % t.save_every_steps == 0 and state["batch_in_epoch"] < len(batches):
                state["epoch_loss"], state["epoch_tokens"] = float(loss_sum), tokens_seen
                weights_file = Path("checkpoints") / f"resume_step{state['step']:07d}.safetensors"
                save_weights(model, run_dir / weights_file)
                save_progress(weights_file)
            if out_of_time():
                stop = True
                log.info("train.max_minutes=%s reached in epoch %d: validating and stopping", t.max_minutes, epoch)
                break
        bar.close()
        train_loss = float(loss_sum) / max(tokens_seen, 1)

        # ---- validation
        val_nll, val_tokens = corpus_loss(model, val_batches, device, pad_id=pad_id)
        hyps = decode_sources(model, pipeline, val_corpus.src[:n_val_bleu], beam_size=t.eval_beam,
                              search_cfg=cfg.search, device=device)
        scores = score_translations([h.text for h in hyps], val_corpus.tgt[:n_val_bleu], tgt_lang=d.tgt_lang)
        val_loss = val_nll / max(val_tokens, 1)
        state.update(epoch=epoch, batch_in_epoch=0, epoch_loss=0.0, epoch_tokens=0)
        state["seconds"] = time.perf_counter() - start_time
        record = dict(event="epoch", epoch=epoch, step=state["step"], train_loss=round(train_loss, 4),
                      val_loss=round(val_loss, 4), val_ppl=round(perplexity(val_nll, val_tokens), 2),
                      val_bleu=scores["bleu"], val_chrf=scores["chrf"], lr=optimizer.param_groups[0]["lr"],
                      seconds=round(state["seconds"], 1))
        log.info("epoch %d: train loss %.3f | val loss %.3f ppl %.2f BLEU %.2f chrF %.2f | %.0f s", epoch,
                 train_loss, val_loss, record["val_ppl"], scores["bleu"], scores["chrf"], state["seconds"])
        score = scores["bleu"] if t.early_stopping_metric == "bleu" else -val_loss
        if plateau is not None:
            plateau.step(score if t.early_stopping_metric == "bleu" else val_loss)

        # ---- checkpoints: weights first, then the pointers that name them
        weights = Path("checkpoints") / f"epoch_{epoch:03d}.safetensors"
        save_weights(model, run_dir / weights, metadata={"epoch": str(epoch), "step": str(state["step"])})
        improved = state["best_score"] is None or score > state["best_score"]
        if improved:
            state.update(best_score=score, best_epoch=epoch, bad_epochs=0)
            write_json(run_dir / "best.json", {"file": str(weights), "epoch": epoch, **_public(record)})
        else:
            state["bad_epochs"] += 1
        write_json(run_dir / "last.json", {"file": str(weights), "epoch": epoch, **_public(record)})
        record["best"] = improved
        metrics.write(**record)
        save_progress(weights)
        _prune_checkpoints(run_dir, keep=t.keep_last)
        if t.early_stopping_patience and state["bad_epochs"] >= t.early_stopping_patience:
            log.info("early stopping: no improvement in %d epochs", state["bad_epochs"])
            break

    best = json.loads((run_dir / "best.json").read_text()) if (run_dir / "best.json").exists() else {}
    metrics.write(event="end", epochs=state["epoch"], seconds=round(state["seconds"], 1), best_epoch=state["best_epoch"])
    return TrainResult(run_dir=run_dir, epochs=state["epoch"], best=best, seconds=state["seconds"])


def _public(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("event", "epoch")}


def _save_resume_state(run_dir, weights, model, optimizer, step_schedule, plateau, state, device) -> None:
    saved = {
        "weights": str(weights),
        "optimizer": optimizer.state_dict(),
        "schedule": step_schedule.state_dict(),
        "counters": dict(state),
        "rng_cpu": torch.get_rng_state(),
    }
    if plateau is not None:
        saved["plateau"] = plateau.state_dict()
    if device.type == "cuda":
        saved["rng_cuda"] = torch.cuda.get_rng_state(device)
    save_train_state(run_dir / "train_state.pt", saved)
    # Mid-epoch weights are needed only until the next state is safely written.
    for old in (run_dir / "checkpoints").glob("resume_step*.safetensors"):
        if old.name != Path(weights).name:
            old.unlink(missing_ok=True)


def _prune_checkpoints(run_dir: Path, keep: int) -> None:
    """Delete old epoch checkpoints, never the ones that best/last/train_state point to."""
    pinned = set()
    for name in ("best.json", "last.json"):
        path = run_dir / name
        if path.exists():
            pinned.add(json.loads(path.read_text())["file"])
    files = epoch_checkpoints(run_dir)
    for path in files[: max(0, len(files) - keep)]:
        if str(path.relative_to(run_dir)) not in pinned:
            path.unlink(missing_ok=True)


# What `--resume RUN --set ...` may change: how long and how verbosely the run goes on, never
# what it trains (data, model, optimizer, schedule), so the resumed run stays one consistent run.
EXTENDABLE_KEYS = ("train.epochs", "train.max_minutes", "train.early_stopping_patience", "train.num_threads",
                   "train.log_every", "train.save_every_steps", "train.keep_last", "train.max_bad_steps",
                   "train.tensorboard")


def _extend_run(cfg: Config, run_dir: Path, overrides: list[str]) -> Config:
    """Apply `overrides` limited to EXTENDABLE_KEYS to a saved run's config and save it."""
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key not in EXTENDABLE_KEYS:
            raise AttnmtError(f"--set {key} cannot change a run that is being resumed: it would no longer be the "
                              f"same run. On resume only these can change: {', '.join(EXTENDABLE_KEYS)}")
    source = str(run_dir / "config.json")
    cfg = config_from_dict(apply_overrides(cfg.to_dict(), overrides, source=f"--set on {source}"), source=source)
    save_config(cfg, run_dir / "config.json")
    log.info("resumed run extended: %s", ", ".join(overrides))
    return cfg


def train_command(args) -> int:
    """`attnmt train CONFIG [--set k=v ...] [--run-dir DIR] [--resume RUN_DIR]`."""
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
        if (run_dir / "train_state.pt").exists():
            raise AttnmtError(f"{run_dir} already holds a run: use --resume {run_dir}, or another --run-dir")
    result = train(cfg, run_dir, resume=bool(args.resume))
    print(json.dumps({"run_dir": str(result.run_dir), "epochs": result.epochs,
                      "seconds": round(result.seconds, 1), "best": result.best}, indent=2))
    return 0

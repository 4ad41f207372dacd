"""The training loop: one place for validation, early stopping, the time budget, checkpoints and
logs, driven by a `Config` and shared by every model.

`Trainer.run` reads top to bottom: set up (data, model, resume), then epochs; an epoch is
updates (`_update`), each followed by what it calls for (`_after_update`: a validated checkpoint
every train.validate_every updates or at train.max_updates, a resumable state every
train.save_every_steps, `_stop_mid_epoch` when the time budget runs out), then the end of the
epoch (`_end_epoch`). Validated checkpoints (`_checkpoint`) and the budget's stop end in
`_publish`, the one writer of the best/last pointers and the metrics record. It is the same loop on one process and on N data-parallel
ranks under torchrun: `distributed` makes every collective a no-op on one process
(docs/distributed.md).

Shapes:
    batch    sentences in a batch
"""

from __future__ import annotations

import glob
import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import torch

from attnmt.checkpoint import save_weights
from attnmt.config import Config
from attnmt.decoding.options import DecodingOptions
from attnmt.engines.native import decode_sources
from attnmt.devices import resolve_device
from attnmt.errors import AttnmtError
from attnmt.files import refuse_overwrite, writer_lock
from attnmt.evaluation import corpus_loss, perplexity, score_translations
from attnmt.models import count_parameters
from attnmt.run_dir import RunDir
from attnmt.data.epochs import Update
from attnmt.training.train_data import TrainData, load_data
from attnmt.world import SINGLE, World, any_rank, barrier, broadcast_from_main, close_world, init_world
from attnmt.training.state import MetricsLog, TrainState, restore_resume_state, save_resume_state
from attnmt.training.compiled_step import make_update_step
from attnmt.training.init_from import resolve_init_from
from attnmt.training.trainable import build_trainable, seed_everything

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    run_dir: Path
    epochs: int
    best: dict = field(default_factory=dict)
    seconds: float = 0.0


def train(cfg: Config, run_dir: str | Path, *, resume: bool = False, overwrite: bool = False) -> TrainResult:
    """Train `cfg`'s model, writing everything to `run_dir`; with `resume`, continue from its state.

    Raises:
        AttnmtError: `run_dir` already holds a run and neither `resume` nor `overwrite` is given.
    """
    threads = torch.get_num_threads()
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    if cfg.train.init_from and not resume:  # its model and pipeline keys, checked and filled in
        cfg = resolve_init_from(cfg)
    if not resume and not Path(run_dir).is_file():  # a file is no folder: the OS refuses it when it is made
        refuse_overwrite(run_dir, training_inputs(cfg.data), init_run(cfg.train))  # before the lock makes the folder
    try:
        device = resolve_device(cfg.train.device)
        world, device = init_world(cfg.train.backend, device)  # SINGLE outside torchrun
        with writer_lock(run_dir) if world.main else nullcontext():  # one writer per run (rank 0 holds it)
            result = Trainer(cfg, RunDir(run_dir), world=world, device=device).run(resume=resume, overwrite=overwrite)
        close_world(world)  # on an error, the process exits and torchrun stops the other ranks
        return result
    finally:
        torch.set_num_threads(threads)


def training_inputs(data_cfg) -> list[tuple[str, Path]]:
    """The user's files a training reads (data.train, data.valid, data.test of `corpus: files`,
    those that exist): what its run directory may never equal, hold or lie inside."""
    if data_cfg.corpus != "files":
        return []
    train = data_cfg.train if isinstance(data_cfg.train, (tuple, list)) else [data_cfg.train]
    specs = [("data.train", c if isinstance(c, str) else c.path) for c in train if c]
    specs += [(key, spec) for key, spec in (("data.valid", data_cfg.valid), ("data.test", data_cfg.test)) if spec]
    found = []
    for key, spec in specs:
        path = Path(spec)
        files = [path] if path.is_file() else sorted(path.parent.glob(glob.escape(path.name) + ".*"))
        found += [(f"{key} file", file) for file in files if file.is_file()]
    return found


def init_run(train_cfg) -> dict[str, str]:
    """The run `train.init_from` reads, if any."""
    return {"train.init_from run": train_cfg.init_from} if train_cfg.init_from else {}


def validate(model: torch.nn.Module, data: TrainData, cfg: Config, device: torch.device) -> dict:
    """Validation loss, perplexity, BLEU and chrF of `model` (greedy or `train.eval_beam`). A
    multilingual run is validated on every direction: val_bleu / val_chrf are the means over them
    (what early stopping and the best checkpoint use), val_bleu_SRC-TGT each one's BLEU. A run on
    lowercased text (`data.lowercase`) is scored against lowercased references."""
    pad_id = data.pipeline.tgt_vocab.pad_id
    val_nll, val_tokens, per_direction = 0.0, 0, {}
    for val in data.val:
        nll, tokens = corpus_loss(model, val.batches, device, pad_id=pad_id)
        val_nll, val_tokens = val_nll + nll, val_tokens + tokens
        hyps = decode_sources(model, data.pipeline, val.corpus.src[:val.n_bleu],
                              DecodingOptions(beam_size=cfg.train.eval_beam), search_cfg=cfg.search, device=device,
                              target_lang=val.target_lang)
        refs = val.corpus.tgt[:val.n_bleu]
        if data.pipeline.tgt_tokenizer.lowercase:  # a model of lowercased text cannot write capitals
            refs = [ref.lower() for ref in refs]
        per_direction[str(val.direction)] = score_translations(
            [h.text for h in hyps], refs, tgt_lang=val.direction.target)
    bleu = sum(s["bleu"] for s in per_direction.values()) / len(per_direction)
    chrf = sum(s["chrf"] for s in per_direction.values()) / len(per_direction)
    scores = dict(val_loss=round(val_nll / max(val_tokens, 1), 4), val_ppl=round(perplexity(val_nll, val_tokens), 2),
                  val_bleu=round(bleu, 2), val_chrf=round(chrf, 2), _val_loss=val_nll / max(val_tokens, 1))
    if len(per_direction) > 1:
        scores.update({f"val_bleu_{direction}": s["bleu"] for direction, s in per_direction.items()})
    return scores


def selection_score(scores: dict, train_cfg) -> float:
    """Higher is better: BLEU, or the negated validation loss."""
    return scores["val_bleu"] if train_cfg.early_stopping_metric == "bleu" else -scores["_val_loss"]


def _public(record: dict) -> dict:
    """A record's values for pointers and logs: without the event, the epoch and private keys."""
    return {k: v for k, v in record.items() if k not in ("event", "epoch") and not k.startswith("_")}


@dataclass
class EpochProgress:
    """The running sums of the epoch under way (kept in the state at a mid-epoch save)."""

    loss_sum: torch.Tensor   # () float64, summed loss of the applied updates
    tokens: int              # their target tokens
    bad_steps: int = 0       # non-finite updates in a row
    window_start: float = field(default_factory=time.perf_counter)  # the tokens/s window
    window_tokens: int = 0
    window_data_s: float = 0.0  # time the window's updates waited for their batches

    def average_loss(self) -> float:
        return float(self.loss_sum) / max(self.tokens, 1)


class Trainer:
    """One training run: `run()` trains, every rank alike; rank 0 alone writes."""

    def __init__(self, cfg: Config, run: RunDir, *, world: World = SINGLE, device: torch.device | str = "cpu"):
        self.cfg, self.train_cfg, self.run_dir, self.world = cfg, cfg.train, run, world
        self.device = torch.device(device)

    # ---- the run, top to bottom

    def run(self, *, resume: bool, overwrite: bool) -> TrainResult:
        self._prepare_run_dir(resume=resume, overwrite=overwrite)
        seed_everything(self.train_cfg.seed)
        self.data = load_data(self.cfg, self.run_dir, resume=resume, world=self.world)
        self.trainable = build_trainable(self.cfg, self.data.pipeline, self.device, self.world, resume=resume)
        self.metrics = MetricsLog(self.run_dir.path / "metrics.jsonl" if self.world.main else None,
                                  tensorboard=self.train_cfg.tensorboard)
        self.state = self._resume() if resume else self._start()
        self.clock_start = time.perf_counter() - self.state.seconds
        stop = self._nothing_left(resume)
        # after the resume, which restored the optimizer state the compiled step may capture
        self.update_step = make_update_step(self.trainable.model, self.trainable.optimizer,
                                            self.trainable.step_schedule, self.train_cfg, use_amp=self.trainable.use_amp,
                                            pad_id=self.data.pipeline.tgt_vocab.pad_id, world=self.world)
        while self.state.epoch < self.train_cfg.epochs and not stop:
            stop = self._run_epoch(self.state.epoch + 1) or self._out_of_updates()
        best = self.run_dir.pointer("best") or {}
        # best.json's epoch: an epoch cut short by the time budget is best when it scored best (_stop_mid_epoch)
        self.metrics.write(event="end", epochs=self.state.epoch, seconds=round(self.state.seconds, 1),
                           best_epoch=best.get("epoch", self.state.best_epoch))
        return TrainResult(run_dir=self.run_dir.path, epochs=self.state.epoch, best=best, seconds=self.state.seconds)

    def _prepare_run_dir(self, *, resume: bool, overwrite: bool) -> None:
        self.run_dir.check_new(resume=resume, overwrite=overwrite)  # every rank reads before rank 0 writes
        barrier(self.world)
        if self.world.main:
            if overwrite and not resume:
                self.run_dir.clear()
            self.run_dir.path.mkdir(parents=True, exist_ok=True)

    def _start(self) -> TrainState:
        self.metrics.write(event="start", params=count_parameters(self.trainable.core), device=str(self.device),
                           train_pairs=len(self.data.prepared), prepared=self.data.prepared.key,
                           val_pairs=sum(len(b) for val in self.data.val for b in val.batches),
                           **({"ranks": self.world.size} if self.world.size > 1 else {}),
                           **({"accum_steps": self.train_cfg.accum_steps} if self.train_cfg.accum_steps > 1 else {}))
        return TrainState()

    def _resume(self) -> TrainState:
        """Restore the saved state; the log and the best/last pointers go back to where it was
        taken, as if the run had never stopped (a time-budget stop's evaluation is undone)."""
        state = restore_resume_state(self.run_dir, self.trainable, self.device, self.world)
        if self.world.main:
            self.metrics.rewind(state.metrics_bytes)
            self.run_dir.write_pointer("best", state.best_info)
            self.run_dir.write_pointer("last", state.last_info)
        log.info("resuming %s in epoch %d after update %d (step %d)", self.run_dir.path, state.epoch + 1,
                 state.update_in_epoch, state.step)
        return state

    def _nothing_left(self, resume: bool) -> bool:
        """True when the run must not train on: its budget or its patience is spent."""
        stop = self._out_of_time() or self._out_of_updates()
        if self.train_cfg.early_stopping_patience and self.state.bad_epochs >= self.train_cfg.early_stopping_patience:
            stop = True  # this run already stopped early; a larger patience lets it go on
        if resume and (stop or self.state.epoch >= self.train_cfg.epochs):
            log.info("nothing left to train (epoch %d of %d, update %d, %.0f s): extend with --set train.epochs=N, "
                     "train.max_updates=U, train.max_minutes=M or train.early_stopping_patience=P", self.state.epoch,
                     self.train_cfg.epochs, self.state.step, self.state.seconds)
        return stop

    def _out_of_time(self) -> bool:  # every rank stops when any rank's clock says so
        return bool(self.train_cfg.max_minutes) and any_rank(
            self.world, time.perf_counter() - self.clock_start > 60 * self.train_cfg.max_minutes)

    def _out_of_updates(self) -> bool:  # the same on every rank: every rank applies every update
        return bool(self.train_cfg.max_updates) and self.state.step >= self.train_cfg.max_updates

    # ---- an epoch

    def _run_epoch(self, epoch: int) -> bool:
        """Train the rest of epoch `epoch`; returns whether training stops after it."""
        from tqdm.auto import tqdm

        self.trainable.model.train()
        plan = self.data.epoch(epoch)  # every rank plans the same epoch, and builds its own batches
        total, start = plan.total_updates, self.state.update_in_epoch
        progress = EpochProgress(torch.full((), self.state.epoch_loss, dtype=torch.float64, device=self.device),
                                 self.state.epoch_tokens)
        bar = tqdm(total=None if total is None else total - start, desc=f"epoch {epoch}", leave=False,
                   disable=None if self.world.main else True, mininterval=1.0)
        try:
            for update, last in _timed_with_last(plan.updates(self.world.rank, start=start), progress):
                self._update(update, epoch, progress, bar)
                bar.update()
                if not last and self._after_update(epoch, progress, total):
                    return True
        finally:
            bar.close()
        if self.state.update_in_epoch == 0:
            raise AttnmtError(f"epoch {epoch} has fewer batches than one update takes ({self.world.size} rank(s) x "
                              f"train.accum_steps={self.train_cfg.accum_steps}): lower train.batch_size or train.accum_steps")
        return self._end_epoch(epoch, progress) or self._out_of_time()

    def _after_update(self, epoch: int, progress: EpochProgress, total: int | None) -> bool:
        """What an update that does not end its epoch calls for; returns whether training stops."""
        train_cfg, state = self.train_cfg, self.state
        out_of_time, out_of_updates = self._out_of_time(), self._out_of_updates()
        applied = progress.bad_steps == 0  # this update was applied: state.step just advanced
        if out_of_updates or (applied and bool(train_cfg.validate_every) and state.step % train_cfg.validate_every == 0):
            stop = self._checkpoint(epoch, progress, end_of_epoch=False)
            if out_of_time and not (stop or out_of_updates):
                log.info("train.max_minutes=%s reached in epoch %d after update %d", train_cfg.max_minutes, epoch,
                         state.update_in_epoch)
            return stop or out_of_updates or out_of_time
        periodic = bool(train_cfg.save_every_steps) and state.step % train_cfg.save_every_steps == 0
        if out_of_time or (periodic and applied):
            weights = self._save_mid_epoch(progress)
        if out_of_time:
            log.info("train.max_minutes=%s reached in epoch %d after update %d%s", train_cfg.max_minutes, epoch,
                     state.update_in_epoch, "" if total is None else f" of {total}")
            self._stop_mid_epoch(epoch, weights, total)
        return out_of_time

    def _update(self, update: Update, epoch: int, progress: EpochProgress, bar) -> None:
        """One update; a non-finite one is skipped (train.max_bad_steps in a row end the run)."""
        self.state.update_in_epoch += 1
        batches = [batch.to(self.device) for batch in update.batches]
        loss, finite = self.update_step(batches, update.global_tokens)
        if not finite:
            progress.bad_steps += 1
            examples = torch.cat([batch.index for batch in update.batches])
            log.warning("epoch %d update %d (pairs %s...): non-finite loss or gradient; step skipped "
                        "(%d in a row)", epoch, self.state.update_in_epoch,
                        ", ".join(self.data.prepared.origin(i) for i in examples[:3].tolist()), progress.bad_steps)
            self.metrics.write(event="bad_step", epoch=epoch, batch=self.state.update_in_epoch, step=self.state.step,
                               examples=examples[:8].tolist())
            if progress.bad_steps >= self.train_cfg.max_bad_steps:
                raise AttnmtError(f"{progress.bad_steps} consecutive non-finite steps (train.max_bad_steps="
                                  f"{self.train_cfg.max_bad_steps}); lower train.lr or check the data")
            return
        progress.bad_steps = 0
        self.state.step += 1
        progress.loss_sum += loss
        progress.tokens += update.global_tokens
        progress.window_tokens += update.global_tokens
        if self.state.step % self.train_cfg.log_every == 0:
            elapsed = time.perf_counter() - progress.window_start
            train_loss = progress.average_loss()
            rate = progress.window_tokens / max(elapsed, 1e-9)
            bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{rate:,.0f}")
            self.metrics.write(event="train", epoch=epoch, step=self.state.step, loss=round(train_loss, 4),
                               tokens_per_s=round(rate), lr=self.trainable.optimizer.param_groups[0]["lr"],
                               data_wait=round(progress.window_data_s / max(elapsed, 1e-9), 4))
            progress.window_start, progress.window_tokens, progress.window_data_s = time.perf_counter(), 0, 0.0

    # ---- checkpoints

    def _save_progress(self, weights: Path) -> None:
        """The resumable state, pointing at `weights` (already saved); every rank calls it."""
        self.state.seconds = time.perf_counter() - self.clock_start
        self.state.metrics_bytes = self.metrics.size()
        save_resume_state(self.run_dir, weights, self.trainable, self.state, self.device, self.world,
                          self.train_cfg.accum_steps)

    def _save_weights(self, weights: Path, **metadata: str) -> dict:
        """Rank 0 saves the weights; returns what a pointer to them records (file and sha256)."""
        info: dict = {"file": str(weights)}
        if self.world.main:
            info["sha256"] = save_weights(self.trainable.core, self.run_dir.path / weights, metadata=metadata or None)
        return info

    def _save_mid_epoch(self, progress: EpochProgress) -> dict:
        self.state.epoch_loss, self.state.epoch_tokens = float(progress.loss_sum), progress.tokens
        weights = self._save_weights(Path("checkpoints") / f"resume_step{self.state.step:07d}.safetensors")
        self._save_progress(Path(weights["file"]))
        return weights

    def _publish(self, info: dict, *, improved: bool, record: dict) -> None:
        """Rank 0: point last.json (and best.json when `improved`) at `info`'s weights, log `record`."""
        if not self.world.main:
            return
        if improved:
            self.run_dir.write_pointer("best", info)
        self.run_dir.write_pointer("last", info)
        self.metrics.write(**record)

    def _end_epoch(self, epoch: int, progress: EpochProgress) -> bool:
        """The epoch's validated checkpoint (the epoch complete); returns whether to stop early."""
        return self._checkpoint(epoch, progress, end_of_epoch=True)

    def _checkpoint(self, epoch: int, progress: EpochProgress, *, end_of_epoch: bool) -> bool:
        """Validate (rank 0; every rank receives the scores), decide, save the weights (after an
        epoch, or after an update mid-epoch), the pointers and the resumable state. Returns
        whether to stop early."""
        core, train_cfg, state = self.trainable.core, self.train_cfg, self.state
        train_loss = progress.average_loss()
        scores = broadcast_from_main(self.world, validate(core, self.data, self.cfg, self.device)
                                     if self.world.main else None)
        if end_of_epoch:
            state.epoch, state.update_in_epoch, state.epoch_loss, state.epoch_tokens = epoch, 0, 0.0, 0
        else:
            state.epoch_loss, state.epoch_tokens = float(progress.loss_sum), progress.tokens
        state.seconds = time.perf_counter() - self.clock_start
        improved, stop = self._decide(scores, epoch)
        where = {} if end_of_epoch else {"update_in_epoch": state.update_in_epoch}
        record = dict(event="epoch" if end_of_epoch else "validate", epoch=epoch, step=state.step, **where,
                      train_loss=round(train_loss, 4), **_public(scores),
                      lr=self.trainable.optimizer.param_groups[0]["lr"], seconds=round(state.seconds, 1))
        log.info("%s: train loss %.3f | val loss %.3f ppl %.2f BLEU %.2f chrF %.2f | %.0f s",
                 f"epoch {epoch}" if end_of_epoch else f"epoch {epoch}, update {state.step}", train_loss,
                 record["val_loss"], record["val_ppl"], record["val_bleu"], record["val_chrf"], state.seconds)
        name = f"epoch_{epoch:03d}" if end_of_epoch else f"step_{state.step:07d}"
        weights = self._save_weights(Path("checkpoints") / f"{name}.safetensors",  # before the pointers
                                     epoch=str(epoch), step=str(state.step))
        info = {**weights, "epoch": epoch, **({} if end_of_epoch else {"complete": False}), **_public(record)}
        if improved:
            state.best_info = info
        state.last_info = info
        self._publish(info, improved=improved, record={**record, "best": improved})
        self._save_progress(Path(weights["file"]))
        if self.world.main:
            self.run_dir.prune(keep=train_cfg.keep_last)
        return stop

    def _decide(self, scores: dict, epoch: int) -> tuple[bool, bool]:
        """Step the plateau schedule, track the best checkpoint; returns (improved, stop early)."""
        train_cfg, state, plateau = self.train_cfg, self.state, self.trainable.plateau
        score = selection_score(scores, train_cfg)
        if plateau is not None:
            plateau.step(scores["val_bleu"] if train_cfg.early_stopping_metric == "bleu" else scores["_val_loss"])
        improved = state.best_score is None or score > state.best_score
        if improved:
            state.best_score, state.best_epoch, state.bad_epochs = score, epoch, 0
        else:
            state.bad_epochs += 1
        stop = bool(train_cfg.early_stopping_patience) and state.bad_epochs >= train_cfg.early_stopping_patience
        if stop:
            log.info("early stopping: no improvement in %d validations", state.bad_epochs)
        return improved, stop

    def _stop_mid_epoch(self, epoch: int, weights: dict, updates_in_epoch: int | None) -> None:
        """The time budget ran out mid-epoch. The resumable state stays mid-epoch (saved before this
        evaluation, which a resumed run undoes); the weights are validated and made evaluable through
        last.json (and best.json if they beat the best epoch), but the epoch is not complete."""
        if not self.world.main:
            return
        scores = validate(self.trainable.core, self.data, self.cfg, self.device)
        info = {**weights, "epoch": epoch, "complete": False, "step": self.state.step, **_public(scores)}
        improved = self.state.best_score is None or selection_score(scores, self.train_cfg) > self.state.best_score
        self._publish(info, improved=improved, record=dict(
            event="stop", epoch=epoch, step=self.state.step, update_in_epoch=self.state.update_in_epoch,
            updates_in_epoch=updates_in_epoch, **_public(scores)))
        log.info("stopped mid-epoch %d: val loss %.3f BLEU %.2f; resume with --resume %s --set "
                 "train.max_minutes=M", epoch, scores["val_loss"], scores["val_bleu"], self.run_dir.path)


def _timed_with_last(updates, progress: EpochProgress):
    """(update, whether it is the epoch's last) for each update, the time spent building them
    (waiting for data) added to `progress.window_data_s`."""
    iterator = iter(updates)

    def following():
        start = time.perf_counter()
        try:
            return next(iterator)
        except StopIteration:
            return None
        finally:
            progress.window_data_s += time.perf_counter() - start

    current = following()
    while current is not None:
        after = following()
        yield current, after is None
        current = after

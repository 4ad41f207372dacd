"""The training state: the typed counters of a run, the metrics log, and the resumable state
that `--resume` continues from exactly (weights, optimizer, schedules, counters, random states).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from attnmt.checkpoint import load_train_state, load_weights, save_train_state, train_states
from attnmt.errors import AttnmtError, CheckpointError
from attnmt.files import writing
from attnmt.run_dir import RunDir
from attnmt.world import SINGLE, World, gather_to_main
from attnmt.training.trainable import Trainable

log = logging.getLogger(__name__)


@dataclass
class TrainState:
    """Where a run stands; saved with every resumable state (the names are the file's keys)."""

    epoch: int = 0                  # epochs completed
    step: int = 0                   # updates applied
    update_in_epoch: int = 0        # updates done in the epoch under way (skipped or not)
    epoch_loss: float = 0.0         # summed loss of the epoch under way so far
    epoch_tokens: int = 0           # its target tokens so far
    best_score: float | None = None  # the selection score of the best epoch (higher is better)
    best_epoch: int | None = None   # the epoch of the best validated checkpoint
    bad_epochs: int = 0             # validations since the best one (early stopping; at epoch ends only: epochs)
    seconds: float = 0.0            # training time so far
    metrics_bytes: int = 0          # length of metrics.jsonl when the state was saved
    best_info: dict | None = None   # what best.json said when the state was saved
    last_info: dict | None = None   # what last.json said

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, counters: object, source: str) -> TrainState:
        """The state saved as `counters`; a missing key takes its default (older runs).

        Raises:
            CheckpointError: not an object, or a value of the wrong type; names `source` and the key.
        """
        if not isinstance(counters, dict):
            raise CheckpointError(f"{source}: 'counters' must be a JSON object")
        values = {}
        for f in fields(cls):
            if f.name not in counters:
                continue
            value = counters[f.name]
            if not _is(value, f.type):
                raise CheckpointError(f"{source}: counters.{f.name}={value!r} must be {f.type}")
            values[f.name] = float(value) if f.type.startswith("float") and value is not None else value
        return cls(**values)


def _is(value: object, type_name: str) -> bool:
    """Whether `value` fits the annotation `type_name` ('int', 'float | None', 'dict | None', ...)."""
    allowed = {"int": (int,), "float": (int, float), "dict": (dict,)}
    base, _, optional = type_name.partition(" | ")
    if value is None:
        return bool(optional)
    return isinstance(value, allowed[base]) and not isinstance(value, bool)


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
        with writing(self.path, "the last training state is intact: --resume goes on from it"), \
                open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        if self.writer is not None and "step" in record:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key not in ("step", "epoch"):
                    self.writer.add_scalar(f"{record.get('event', 'train')}/{key}", value, record["step"])

    def size(self) -> int:
        return self.path.stat().st_size if self.path is not None and self.path.exists() else 0

    def rewind(self, size: int) -> None:
        """Cut the log back to `size` bytes: where it stood when the resumed state was saved.

        Raises:
            CheckpointError: the log is shorter than that (it was cut or replaced since).
        """
        if self.path is None:
            return
        if self.size() < size:
            raise CheckpointError(f"{self.path}: {self.size()} bytes, shorter than the {size} bytes recorded in "
                                  f"the training state; the log was cut or replaced, so the run cannot continue "
                                  f"it (restore the log, or start the run again)")
        with open(self.path, "ab") as handle:
            handle.truncate(size)


def save_resume_state(run: RunDir, weights: Path, trainable: Trainable, state: TrainState, device: torch.device,
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
        "counters": state.to_dict(),
        "world_size": world.size,
        "accum_steps": accum_steps,
        "rng": {key: [r[key] for r in ranks] for key in rng},
    }
    if trainable.plateau is not None:
        saved["plateau"] = trainable.plateau.state_dict()
    kept = save_train_state(run.path, saved)
    # Mid-epoch weights are needed only while a kept training state names them.
    for old in (run.path / "checkpoints").glob("resume_step*.safetensors"):
        if str(old.relative_to(run.path)) not in kept:
            old.unlink(missing_ok=True)


def restore_resume_state(run: RunDir, trainable: Trainable, device: torch.device,
                         world: World = SINGLE) -> TrainState:
    """Load what `save_resume_state` wrote into the model, optimizer, schedules and RNG; returns
    the counters. A damaged newest state (its JSON, its tensors or its weights) is skipped for
    the previous one, saying so.

    Raises:
        AttnmtError: the run was trained on another number of ranks.
        CheckpointError: no intact state; names each file at fault.
    """
    errors = []
    for path in train_states(run.path):
        try:
            state = _restore(run, path, trainable, device, world)
        except CheckpointError as err:
            errors.append(str(err))
            continue
        if errors:
            log.warning("the newest training state is damaged (%s); resuming from the previous one, %s",
                        errors[0], path.name)
        return state
    raise CheckpointError("; and the previous state: ".join(errors))


def _restore(run: RunDir, path: Path, trainable: Trainable, device: torch.device, world: World) -> TrainState:
    saved = load_train_state(run.path, path)
    trained_on = saved.get("world_size", 1)
    if trained_on != world.size:
        raise AttnmtError(f"{run.path} was trained on {trained_on} rank(s) and is being resumed on {world.size}: "
                          f"resume it on {trained_on} (torchrun --nproc-per-node {trained_on} -m attnmt train "
                          f"--resume {run.path}), so that every update takes the same batches")
    for key in ("weights", "optimizer", "schedule", "counters", "rng"):
        if key not in saved:
            raise CheckpointError(f"{path}: '{key}' is missing (an incomplete training state)")
    weights = run.path / str(saved["weights"])
    if not weights.resolve().is_relative_to(run.path.resolve()):
        raise CheckpointError(f"{path}: names weights {saved['weights']!r}, outside {run.path}")
    state = TrainState.from_dict(saved["counters"], str(path))
    load_weights(trainable.core, weights)
    log.info("resuming from the training state %s (weights %s)", path, saved["weights"])
    try:
        trainable.optimizer.load_state_dict(saved["optimizer"])
        trainable.step_schedule.load_state_dict(saved["schedule"])
        if trainable.plateau is not None:
            trainable.plateau.load_state_dict(saved["plateau"])
        rng = saved["rng"]
        torch.set_rng_state(rng["cpu"][world.rank])
        if device.type == "cuda" and "cuda" in rng:
            torch.cuda.set_rng_state(rng["cuda"][world.rank], device)
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path}: the optimizer, schedule or random state does not fit this run "
                              f"({type(err).__name__}: {err})") from None
    return state

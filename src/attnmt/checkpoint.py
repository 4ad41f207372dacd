"""Checkpoints that survive crashes and never run code: safetensors + JSON, atomic writes.

A run directory holds:

    config.json                 the resolved config
    vocab.src.json, vocab.tgt.json
    tokenizers.json             tokenizer settings (+ sentencepiece *.model files beside it)
    checkpoints/epoch_NNN.safetensors   model weights after each epoch (the last `keep_last`)
    best.json, last.json        small pointers: {"file": "checkpoints/epoch_NNN.safetensors", ...}
    train_state.pt              optimizer / scheduler / counters / random states, for --resume
    metrics.jsonl               one JSON object per log event

Every file is written to a temporary name in the same folder, flushed, fsynced and
`os.replace`d into place, so a crash at any moment leaves the previous file intact. Weights are
loaded from safetensors (no pickle); the training state is loaded with
``torch.load(weights_only=True)``, which refuses pickled code.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from attnmt.errors import AttnmtError, CheckpointError

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- atomic files

def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_path)``, fsync the result, then rename it to `path` in one step."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # not possible on some platforms (Windows)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: corrupted JSON ({err})") from None


# ----------------------------------------------------------------------------- weights

def save_weights(model: nn.Module, path: Path, metadata: dict[str, str] | None = None) -> None:
    """Save the model's state dict as safetensors (tied tensors are stored once each, cloned)."""
    from safetensors.torch import save_file

    tensors = {name: t.detach().to("cpu").contiguous().clone() for name, t in model.state_dict().items()}
    atomic_write(Path(path), lambda tmp: save_file(tensors, str(tmp), metadata=metadata or {}))


def load_weights_file(path: Path) -> dict[str, torch.Tensor]:
    """Read a safetensors file; a missing, truncated or foreign file raises `CheckpointError`."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path}: not a readable safetensors checkpoint (truncated or corrupted?): {err}") from None


def load_weights(model: nn.Module, path: Path) -> None:
    """Load safetensors weights into `model`; every parameter must be present with its shape."""
    tensors = load_weights_file(path)
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise CheckpointError(f"{path}: does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, tensor in tensors.items():
        if tensor.shape != own[name].shape:
            raise CheckpointError(f"{path}: {name} has shape {tuple(tensor.shape)}, the model expects {tuple(own[name].shape)}")
    model.load_state_dict(tensors, strict=True)


# ----------------------------------------------------------------------------- training state

def save_train_state(path: Path, state: dict[str, Any]) -> None:
    """Save optimizer/scheduler/counters/RNG state with torch.save (tensors and plain data only)."""
    atomic_write(Path(path), lambda tmp: torch.save(state, tmp))


def load_train_state(path: Path) -> dict[str, Any]:
    """Load a training state with ``weights_only=True``: a pickle that would run code is refused."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: training state not found (cannot resume)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, EOFError, ... here
        raise CheckpointError(f"{path}: refused or unreadable training state ({type(err).__name__}: "
                              f"{str(err).splitlines()[0] if str(err) else ''})") from None


# ----------------------------------------------------------------------------- run directory

def checkpoint_path(run_dir: Path, which: str = "best") -> Path:
    """Resolve 'best', 'last', 'average' (from `attnmt average`) or a file name to a weights file."""
    run_dir = Path(run_dir)
    if which in ("best", "last", "average"):
        pointer = run_dir / f"{which}.json"
        if not pointer.is_file():
            hint = (f"run `attnmt average {run_dir}` first" if which == "average"
                    else f"is {run_dir} a finished or running attnmt run?")
            raise CheckpointError(f"{pointer}: not found; {hint}")
        info = read_json(pointer)
        if not isinstance(info, dict) or "file" not in info:
            raise CheckpointError(f"{pointer}: expected a JSON object with a 'file' key")
        return run_dir / info["file"]
    path = Path(which)
    return path if path.is_absolute() or path.exists() else run_dir / which


def epoch_checkpoints(run_dir: Path) -> list[Path]:
    """The run's per-epoch weight files, oldest first."""
    return sorted((Path(run_dir) / "checkpoints").glob("epoch_*.safetensors"))


def average_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of several checkpoints of one model (in float64, cast back)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    first = None
    for path in paths:
        tensors = load_weights_file(path)
        if first is None:
            first = tensors
            total = {k: v.to(torch.float64) for k, v in tensors.items()}
            continue
        if set(tensors) != set(total):
            raise CheckpointError(f"{path}: has different parameters from {paths[0]}")
        for name, tensor in tensors.items():
            total[name] += tensor.to(torch.float64)
    return {k: (v / len(paths)).to(first[k].dtype) for k, v in total.items()}


def average_command(args) -> int:
    """`attnmt average RUN_DIR --last N`: write the mean of the last N epoch checkpoints."""
    from safetensors.torch import save_file

    run_dir = Path(args.run_dir)
    paths = epoch_checkpoints(run_dir)[-args.last:]
    if not paths:
        raise AttnmtError(f"{run_dir}: no checkpoints/epoch_*.safetensors to average")
    averaged = average_weights(paths)
    out = Path(args.output) if args.output else run_dir / "checkpoints" / f"average_last{len(paths)}.safetensors"
    atomic_write(out, lambda tmp: save_file(averaged, str(tmp), metadata={"averaged": ",".join(p.name for p in paths)}))
    if not args.output:
        write_json(run_dir / "average.json", {"file": str(out.relative_to(run_dir)), "from": [p.name for p in paths]})
    print(f"averaged {len(paths)} checkpoints -> {out}")
    return 0

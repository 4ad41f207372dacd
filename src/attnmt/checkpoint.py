"""Checkpoints that survive crashes and never run code: model weights and the resumable training
state as safetensors + JSON, and checkpoint averaging.

Every file goes through `files.atomic_write` (a crash at any moment leaves the previous file
intact). Tensors are read from safetensors and everything else from JSON: nothing is unpickled.
Which file lives where in a run directory is run_dir.py's business.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnmt.errors import CheckpointError
from attnmt.files import atomic_write, read_json, write_json

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- weights

def save_tensors(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None) -> None:
    """Write named tensors as a safetensors file, atomically."""
    from safetensors.torch import save_file

    atomic_write(Path(path), lambda tmp: save_file(tensors, str(tmp), metadata=metadata or {}))


def save_weights(model: nn.Module, path: Path, metadata: dict[str, str] | None = None) -> None:
    """Save the model's state dict as safetensors (tied tensors are stored once each, cloned)."""
    save_tensors({name: t.detach().to("cpu").contiguous().clone() for name, t in model.state_dict().items()},
                 path, metadata)


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

TRAIN_STATE = "train_state.json"
LEGACY_TRAIN_STATE = "train_state.pt"  # the pickle of attnmt before safetensors training states


def save_train_state(run_dir: Path, state: dict[str, Any]) -> None:
    """Save a training state (nested dicts/lists of plain values and tensors) as safetensors + JSON.

    The tensors go to a new ``checkpoints/train_state_NNNNNN.safetensors`` and the rest, with that
    file's name, to ``train_state.json``, written last: the JSON is the commit point, so a crash
    at any moment leaves a complete previous state. Older tensor files are then deleted.

    Raises:
        TypeError: a value that is neither plain data nor a tensor (a programming error).
    """
    run_dir = Path(run_dir)
    previous = _read_state_json(run_dir / TRAIN_STATE) if (run_dir / TRAIN_STATE).is_file() else {}
    number = int(previous.get("number", 0)) + 1
    tensors: dict[str, torch.Tensor] = {}
    body = _encode(state, tensors, "state")
    tensor_file = Path("checkpoints") / f"train_state_{number:06d}.safetensors"
    save_tensors(tensors, run_dir / tensor_file)
    write_json(run_dir / TRAIN_STATE, {"format": 1, "number": number, "tensors": str(tensor_file), "state": body})
    for old in (run_dir / "checkpoints").glob("train_state_*.safetensors"):
        if old.name != tensor_file.name:
            old.unlink(missing_ok=True)


def load_train_state(run_dir: Path) -> dict[str, Any]:
    """Load the state `save_train_state` wrote: JSON and safetensors only, nothing unpickled.

    Raises:
        CheckpointError: no state, a state in the old pickle format, or unreadable files.
    """
    run_dir = Path(run_dir)
    path = run_dir / TRAIN_STATE
    if not path.is_file():
        if (run_dir / LEGACY_TRAIN_STATE).is_file():
            raise CheckpointError(
                f"{run_dir / LEGACY_TRAIN_STATE}: a training state in the old pickle format, which attnmt no "
                f"longer reads. Its weights still work with evaluate/translate. To resume it, convert it once "
                f"(this unpickles it with torch.load(weights_only=True)): python -c \"from attnmt.checkpoint "
                f"import convert_legacy_train_state as c; c('{run_dir}')\"")
        raise CheckpointError(f"{path}: training state not found (cannot resume)")
    info = _read_state_json(path)
    if info.get("format") != 1 or "tensors" not in info or "state" not in info:
        raise CheckpointError(f"{path}: not an attnmt training state (expected format 1 with 'tensors' and 'state')")
    tensors = load_weights_file(run_dir / info["tensors"])
    try:
        return _decode(info["state"], tensors)
    except KeyError as err:
        raise CheckpointError(f"{path}: names tensor {err} missing from {info['tensors']}") from None


def convert_legacy_train_state(run_dir: Path) -> None:
    """Rewrite an old ``train_state.pt`` (pickle) as safetensors + JSON; the .pt file is kept.

    The pickle is read with ``torch.load(weights_only=True)``, which refuses pickled code.
    """
    run_dir = Path(run_dir)
    path = run_dir / LEGACY_TRAIN_STATE
    try:
        old = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, EOFError, ... here
        raise CheckpointError(f"{path}: refused or unreadable training state ({type(err).__name__}: "
                              f"{str(err).splitlines()[0] if str(err) else ''})") from None
    counters = dict(old["counters"])
    counters["update_in_epoch"] = counters.pop("batch_in_epoch", 0)
    state = {"weights": old["weights"], "optimizer": old["optimizer"], "schedule": old["schedule"],
             "counters": counters, "world_size": 1, "accum_steps": 1,
             "rng": {"cpu": [old["rng_cpu"]], **({"cuda": [old["rng_cuda"]]} if "rng_cuda" in old else {})}}
    if "plateau" in old:
        state["plateau"] = old["plateau"]
    save_train_state(run_dir, state)
    log.info("converted %s to %s", path, run_dir / TRAIN_STATE)


def _read_state_json(path: Path) -> dict:
    info = read_json(path)
    if not isinstance(info, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return info


_TENSOR, _INT_KEYS, _TUPLE = "__tensor__", "__int_keys__", "__tuple__"


def _encode(obj: Any, tensors: dict[str, torch.Tensor], name: str) -> Any:
    """Plain JSON for `obj`, with each tensor moved into `tensors` and replaced by its name."""
    if isinstance(obj, torch.Tensor):
        tensors[name] = obj.detach().to("cpu").contiguous().clone()
        return {_TENSOR: name}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {k: _encode(v, tensors, f"{name}.{k}") for k, v in obj.items()}
        if all(isinstance(k, int) and not isinstance(k, bool) for k in obj):  # optimizer state by param index
            return {_INT_KEYS: {str(k): _encode(v, tensors, f"{name}.{k}") for k, v in obj.items()}}
    if isinstance(obj, tuple):
        return {_TUPLE: [_encode(v, tensors, f"{name}.{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{name}.{i}") for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"{name}: a training state holds plain data and tensors, not {type(obj).__name__}")


def _decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {_TENSOR}:
            return tensors[obj[_TENSOR]]
        if set(obj) == {_INT_KEYS}:
            return {int(k): _decode(v, tensors) for k, v in obj[_INT_KEYS].items()}
        if set(obj) == {_TUPLE}:
            return tuple(_decode(v, tensors) for v in obj[_TUPLE])
        return {k: _decode(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    return obj


# ----------------------------------------------------------------------------- averaging

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

"""Checkpoints that survive crashes and never run code: model weights and the resumable training
state as safetensors + JSON, and checkpoint averaging.

Every file goes through `files.atomic_write` (a crash at any moment leaves the previous file
intact). Tensors are read from safetensors and everything else from JSON: nothing is unpickled.
Which file lives where in a run directory is run_dir.py's business.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from attnmt.errors import CheckpointError
from attnmt.files import atomic_copy, atomic_write, read_json, write_json

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- weights

DIGEST_KEY = "attnmt_sha256"  # safetensors metadata: the digest of the tensors, checked on every load


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over the tensors' names, dtypes, shapes and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().to("cpu").contiguous()
        digest.update(f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def save_tensors(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None) -> str:
    """Write named tensors as a safetensors file, atomically, with their digest in the metadata;
    returns the digest (what a pointer to the file records)."""
    from safetensors.torch import save

    digest = tensors_digest(tensors)
    metadata = {**(metadata or {}), DIGEST_KEY: digest}
    # serialized here and written by Python: a full disk is an OSError naming the file (WriteError)
    atomic_write(Path(path), lambda tmp: tmp.write_bytes(save(tensors, metadata=metadata)))
    return digest


def save_weights(model: nn.Module, path: Path, metadata: dict[str, str] | None = None) -> str:
    """Save the model's state dict as safetensors (tied tensors are stored once each, cloned);
    returns the digest of the tensors."""
    return save_tensors({name: t.detach().to("cpu").contiguous().clone() for name, t in model.state_dict().items()},
                        path, metadata)


def recorded_metadata(path: Path) -> dict[str, str]:
    """A safetensors file's metadata (without reading its tensors).

    Raises:
        CheckpointError: missing or unreadable file.
    """
    from safetensors import SafetensorError, safe_open

    if not Path(path).is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        with safe_open(str(path), framework="pt") as handle:
            return dict(handle.metadata() or {})
    except (SafetensorError, OSError, ValueError, RuntimeError, TypeError) as err:
        raise CheckpointError(f"{path}: not a readable safetensors checkpoint (truncated or corrupted?): {err}") from None


def recorded_digest(path: Path) -> str | None:
    """The digest a safetensors file's metadata records (None if it records none).

    Raises:
        CheckpointError: missing or unreadable file.
    """
    return recorded_metadata(path).get(DIGEST_KEY)


def weights_step(path: Path) -> int:
    """The update after which weights were saved (their metadata's `step`; -1 when unknown or unreadable)."""
    try:
        step = recorded_metadata(path).get("step", "")
    except CheckpointError:
        return -1
    return int(step) if step.isdigit() else -1


def load_weights_file(path: Path) -> dict[str, torch.Tensor]:
    """Read a safetensors file and check the digest its metadata records (files attnmt wrote
    before digests existed, and foreign files, have none: they are read as they are).

    Raises:
        CheckpointError: missing, truncated, unreadable, or its tensors do not match their digest.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        with safe_open(str(path), framework="pt") as handle:
            recorded = (handle.metadata() or {}).get(DIGEST_KEY)
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError, TypeError) as err:
        raise CheckpointError(f"{path}: not a readable safetensors checkpoint (truncated or corrupted?): {err}") from None
    if recorded is None:
        log.debug("%s: no %s in its metadata; read without a digest check", path, DIGEST_KEY)
    elif tensors_digest(tensors) != recorded:
        raise CheckpointError(f"{path}: corrupted: its tensors do not match the sha256 recorded when it was written")
    return tensors


def load_weights(model: nn.Module, path: Path) -> None:
    """Load safetensors weights into `model`: every parameter present, with the model's shape and
    dtype, and finite; otherwise nothing is loaded.

    Raises:
        CheckpointError: naming the file and the first tensor at fault.
    """
    load_state(model, load_weights_file(path), path)


def load_state(model: nn.Module, tensors: dict[str, torch.Tensor], path: Path) -> None:
    """`load_weights` for tensors already read from `path` (named in the errors)."""
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    unexpected = sorted(set(tensors) - set(own))
    if missing or unexpected:
        raise CheckpointError(f"{path}: does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, tensor in tensors.items():
        if tensor.shape != own[name].shape:
            raise CheckpointError(f"{path}: {name} has shape {tuple(tensor.shape)}, the model expects {tuple(own[name].shape)}")
        if tensor.dtype != own[name].dtype:
            raise CheckpointError(f"{path}: {name} is {tensor.dtype}, the model expects {own[name].dtype} "
                                  f"(weights are never cast on load)")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{path}: {name} holds NaN or infinite values")
    model.load_state_dict(tensors, strict=True)


# ----------------------------------------------------------------------------- training state

TRAIN_STATE = "train_state.json"
PREVIOUS_TRAIN_STATE = "train_state.prev.json"  # kept, so that a damaged newest state can be skipped
LEGACY_TRAIN_STATE = "train_state.pt"  # the pickle of attnmt before safetensors training states


def save_train_state(run_dir: Path, state: dict[str, Any]) -> set[str]:
    """Save a training state (nested dicts/lists of plain values and tensors) as safetensors + JSON.

    The tensors go to a new ``checkpoints/train_state_NNNNNN.safetensors`` and the rest, with that
    file's name and the sha256 of the JSON body, to ``train_state.json``, written last: the JSON
    is the commit point, so a crash at any moment leaves a complete state. The state it replaces
    becomes ``train_state.prev.json`` (with its files), the one `--resume` falls back to when the
    newest is damaged; older tensor files are deleted. Returns the files (relative to `run_dir`)
    the two kept states name (`train_state_files`).

    Raises:
        TypeError: a value that is neither plain data nor a tensor (a programming error).
    """
    run_dir = Path(run_dir)
    current = run_dir / TRAIN_STATE
    previous = _read_state_json(current) if current.is_file() else {}
    number = int(previous.get("number", 0)) + 1 if isinstance(previous.get("number"), int) else 1
    tensors: dict[str, torch.Tensor] = {}
    body = _encode(state, tensors, "state")
    tensor_file = Path("checkpoints") / f"train_state_{number:06d}.safetensors"
    save_tensors(tensors, run_dir / tensor_file)
    if current.is_file():  # copied, not moved: train_state.json is there at every moment
        atomic_copy(current, run_dir / PREVIOUS_TRAIN_STATE)
    write_json(current, {"format": 1, "number": number, "tensors": str(tensor_file), "state": body,
                         "sha256": _body_digest(body)})
    kept = train_state_files(run_dir)
    for old in (run_dir / "checkpoints").glob("train_state_*.safetensors"):
        if str(old.relative_to(run_dir)) not in kept:
            old.unlink(missing_ok=True)
    return kept


def _body_digest(body: Any) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def train_state_files(run_dir: Path) -> set[str]:
    """The files (relative to `run_dir`) that the newest and the previous training state name:
    their tensor files and the weights under their "weights" key; these are never deleted."""
    files = set()
    for name in (TRAIN_STATE, PREVIOUS_TRAIN_STATE):
        try:
            info = _read_state_json(Path(run_dir) / name)
        except CheckpointError:
            continue
        state = info.get("state")
        for value in (info.get("tensors"), state.get("weights") if isinstance(state, dict) else None):
            if isinstance(value, str):
                files.add(str(Path(value)))
    return files


def train_states(run_dir: Path) -> list[Path]:
    """The training states to resume from, newest first (the newest, then the previous one).

    Raises:
        CheckpointError: there is none (the old pickle format gets its own message).
    """
    run_dir = Path(run_dir)
    found = [run_dir / name for name in (TRAIN_STATE, PREVIOUS_TRAIN_STATE) if (run_dir / name).is_file()]
    if found:
        return found
    if (run_dir / LEGACY_TRAIN_STATE).is_file():
        raise CheckpointError(
            f"{run_dir / LEGACY_TRAIN_STATE}: a training state in the old pickle format, which attnmt no "
            f"longer reads. Its weights still work with evaluate/translate. To resume it, convert it once "
            f"(this unpickles it with torch.load(weights_only=True)): python -c \"from attnmt.checkpoint "
            f"import convert_legacy_train_state as c; c('{run_dir}')\"")
    weights = sorted(p.name for p in (run_dir / "checkpoints").glob("*.safetensors")
                     if not p.name.startswith(("train_state_", "resume_step")))
    if weights:  # stopped (a full disk, a kill) before its first resumable state: say what there is
        raise CheckpointError(f"{run_dir / TRAIN_STATE}: training state not found (cannot resume): the run stopped "
                              f"before it saved one; its weights {', '.join(weights[-3:])} in {run_dir / 'checkpoints'} "
                              f"still translate and evaluate; to train again, start it afresh with --overwrite")
    if any((run_dir / name).exists() for name in ("config.json", "metrics.jsonl")):  # killed before its first state
        raise CheckpointError(f"{run_dir / TRAIN_STATE}: training state not found (cannot resume): the run stopped "
                              f"before it saved its first one (at train.save_every_steps updates or an epoch's end); "
                              f"start it afresh: attnmt train CONFIG --run-dir {run_dir} --overwrite; or, once a run "
                              f"here has saved a state, continue it with --resume")
    raise CheckpointError(f"{run_dir / TRAIN_STATE}: training state not found (cannot resume): {run_dir} holds no run "
                          f"that attnmt train started; start one with attnmt train CONFIG --run-dir {run_dir}")


def load_train_state(run_dir: Path, path: Path | None = None) -> dict[str, Any]:
    """Load a state `save_train_state` wrote (default: the newest): JSON and safetensors only,
    nothing unpickled.

    Raises:
        CheckpointError: no state, a state in the old pickle format, unreadable or damaged files.
    """
    run_dir = Path(run_dir)
    path = Path(path) if path is not None else train_states(run_dir)[0]
    info = _read_state_json(path)
    if info.get("format") != 1 or not isinstance(info.get("tensors"), str) or "state" not in info:
        raise CheckpointError(f"{path}: not an attnmt training state (expected format 1 with 'tensors' and 'state')")
    if "sha256" in info and info["sha256"] != _body_digest(info["state"]):
        raise CheckpointError(f"{path}: corrupted: its state does not match the sha256 recorded when it was written")
    tensor_file = run_dir / info["tensors"]
    if not tensor_file.resolve().is_relative_to(run_dir.resolve()):
        raise CheckpointError(f"{path}: names {info['tensors']!r}, outside {run_dir}")
    tensors = load_weights_file(tensor_file)
    try:
        return _decode(info["state"], tensors)
    except KeyError as err:
        raise CheckpointError(f"{path}: names tensor {err} missing from {info['tensors']}") from None
    except (TypeError, ValueError, AttributeError) as err:
        raise CheckpointError(f"{path}: a malformed training state ({err})") from None


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

"""Devices: turn a device name from a config key or a command-line flag into a `torch.device`
that really exists here, or refuse it with a message naming the key or flag.

    resolve_device("auto")                        # cuda if available, else cpu
    resolve_device("cuda:1", key="--device")      # AttnmtError if this machine has no second GPU

Training (`train.device`), the translator and the CLI (`--device`) share this one check, so a
device that is accepted is a device that is used.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from attnmt.errors import AttnmtError

DEVICE_NAMES = "auto, cpu, cuda, cuda:N or mps"
if TYPE_CHECKING:
    import torch

_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


def check_device_name(name: str, *, key: str = "train.device") -> None:
    """Check the spelling of a device name only (not whether it exists on this machine).

    Raises:
        AttnmtError: `name` is not one of auto, cpu, cuda, cuda:N, mps; the message names `key`.
    """
    if not isinstance(name, str) or not _DEVICE.fullmatch(name):
        raise AttnmtError(f"{key}={name!r} must be {DEVICE_NAMES}")


def resolve_device(name: str, *, key: str = "train.device") -> torch.device:
    """The `torch.device` for `name` ("auto" picks CUDA when there is one, else the CPU).

    Raises:
        AttnmtError: a misspelled name, or a device this machine does not have; names `key`.
    """
    import torch  # here, so that config validation (which checks names only) does not load torch

    check_device_name(name, key=key)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise AttnmtError(f"{key}={name!r} but no CUDA device is available on this machine "
                              "(use cpu, or auto)")
        index = int(name.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise AttnmtError(f"{key}={name!r} but this machine has {torch.cuda.device_count()} CUDA "
                              f"device(s): cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if name == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise AttnmtError(f"{key}={name!r} but no Apple MPS device is available on this machine "
                          "(use cpu, or auto)")
    return torch.device(name)

"""Files that survive a crash: every file attnmt writes goes through `atomic_write`.

The content is written to a temporary file in the destination's folder, flushed, fsynced and
`os.replace`d into place (then the folder is fsynced), so a crash at any moment leaves either
the previous file or the new one, never a mix. JSON is read back with errors that name the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from attnmt.errors import CheckpointError


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_path)``, fsync the result, then rename it to `path` in one step.

    If `write` raises, the temporary file is removed and `path` is left as it was.
    """
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
    """Make a rename in `folder` durable; not possible on every platform (Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_copy(source: str | os.PathLike, path: str | os.PathLike) -> None:
    """Copy `source` to `path` atomically."""
    atomic_write(path, lambda tmp: shutil.copyfile(source, tmp))


def write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> None:
    atomic_write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike, error: type[Exception] = CheckpointError) -> Any:
    """Parse a JSON file; a missing or corrupted one raises `error` naming the file."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise error(f"{path}: corrupted JSON ({err})") from None


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

"""Files that survive a crash: every file attnmt writes goes through `atomic_write`.

The content is written to a temporary file in the destination's folder, flushed, fsynced and
`os.replace`d into place (then the folder is fsynced), so a crash at any moment leaves either
the previous file or the new one, never a mix. A write that fails (disk full, an I/O error, no
permission) is a `WriteError` naming the file and the cause, and leaves the previous file as it
was. JSON is read back with errors that name the file.

`writer_lock(folder)` makes a command the one writer of a folder (a run, an export, a sharded
output): an OS lock on a file in it, released by the kernel when its holder ends, however it ends.
`refuse_overwrite` refuses an output that is one of the command's inputs, before any work.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from attnmt.errors import AttnmtError, CheckpointError, WriteError

log = logging.getLogger(__name__)


def write_failed(path: str | os.PathLike, err: OSError, kept: str = "") -> WriteError:
    """The one-line error of a failed write of `path`: the file, the cause, and what is left."""
    cause = (os.strerror(err.errno) if err.errno  # numpy's tofile says only how much it wrote
             else f"{err.strerror or err} (a short write: the disk is full or a file size limit was reached)")
    if err.errno == errno.ENOSPC:
        cause += " (free some space, then run the command again)"
    return WriteError(f"{path}: could not be written: {cause}" + (f"; {kept}" if kept else ""))


@contextmanager
def writing(path: str | os.PathLike, kept: str = "") -> Iterator[None]:
    """Turn an OSError raised while writing `path` into a WriteError naming it (`kept`: what is
    left intact, said after the cause)."""
    try:
        yield
    except WriteError:
        raise
    except OSError as err:
        raise write_failed(err.filename or path, err, kept) from err


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp_path)``, fsync the result, then rename it to `path` in one step.

    If `write` raises, the temporary file is removed and `path` is left as it was.

    Raises:
        WriteError: an OSError on the way (disk full, I/O error): names `path` and the cause.
    """
    path = Path(path)
    kept = f"the previous {path.name} is unchanged" if path.exists() else "nothing was written"
    with writing(path, kept):
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


# ----------------------------------------------------------------------------- one writer per folder

LOCK_FILE = ".attnmt.lock"  # in the folder it guards; holds the holder's pid and command line


def _holder(handle) -> str:
    """Who holds the lock, as its holder wrote it ("pid 123: attnmt train ..."), or a fallback."""
    handle.seek(0)
    try:
        info = json.loads(handle.read(4096) or "null")
        return f"{' '.join(map(str, info['command']))} (pid {int(info['pid'])})"
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        return "another process (it wrote no readable name)"


_HELD: dict[tuple[Path, int], int] = {}  # (lock, thread) this process holds -> how many `with` blocks hold it


@contextmanager
def writer_lock(folder: str | os.PathLike, *, name: str = LOCK_FILE, wait: bool = False) -> Iterator[None]:
    """Hold the one-writer lock of `folder` (made if missing) for the `with` body.

    An OS lock (flock) on the file `name` in `folder` (default .attnmt.lock): the kernel releases
    it when the holder exits or is killed, so no stale lock is ever left behind. A process that
    holds it may take it again in the same thread (a command calling the library). Readers take no lock: every file is replaced
    whole (atomic_write), so they never see half of one.

    Raises:
        AttnmtError: another process holds it (unless `wait`): names that process's command and pid.
    """
    folder = Path(folder)
    path = folder / name
    key = (path.resolve(), threading.get_ident())
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)  # a file in its place: the OS's error, naming it
    with writing(path):
        handle = open(path, "a+", encoding="utf-8", errors="replace")
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise AttnmtError(f"{folder}: another attnmt is writing here: {_holder(handle)}; wait for it "
                                  f"to end (or stop it), then run this again") from None
            log.info("waiting for %s to finish writing %s", _holder(handle), folder)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:  # say who holds it; a full disk must not stop the command itself
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"pid": os.getpid(), "command": [Path(sys.argv[0]).name, *sys.argv[1:]]}) + "\n")
            handle.flush()
        except OSError:
            pass
        _HELD[key] = 1
        try:
            yield
        finally:
            del _HELD[key]


# ----------------------------------------------------------------------------- never overwrite an input

def refuse_overwrite(output: str | os.PathLike, inputs: dict[str, str | os.PathLike],
                     runs: dict[str, str | os.PathLike] | None = None) -> None:
    """Refuse, before any work, an `output` that is one of `inputs` (label -> file; the same file
    through a link, ./x against x, or a hard link counts) or lies inside one of `runs`
    (label -> folder read by the command), or is that folder itself.

    Raises:
        AttnmtError: naming the output and the input it would overwrite.
    """
    out = Path(output)
    resolved = out.resolve()
    for label, path in inputs.items():
        path = Path(path)
        same = resolved == path.resolve()
        if not same and out.exists() and path.exists():
            try:
                same = os.path.samefile(out, path)
            except OSError:
                pass
        if same:
            raise AttnmtError(f"{output}: is the {label} {path}; writing it would destroy the input: choose "
                              f"another output")
    for label, folder in (runs or {}).items():
        if resolved.is_relative_to(Path(folder).resolve()):
            raise AttnmtError(f"{output}: is inside the {label} {folder}, which this command reads: choose an "
                              f"output outside it")

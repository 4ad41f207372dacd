"""Files that survive a crash: every file attnmt writes goes through `atomic_write`.

The content is written to a temporary file in the destination's folder, flushed, fsynced and
`os.replace`d into place (then the folder is fsynced), so a crash at any moment leaves either
the previous file or the new one, never a mix. A write that fails (disk full, an I/O error, no
permission) is a `WriteError` naming the file and the cause, and leaves the previous file as it
was. JSON is read back with errors that name the file.

`writer_lock(folder)` makes a command the one writer of a folder (a run, an export, a sharded
output): an OS lock on a file in it, released by the kernel when its holder ends, however it ends
(forked children close their copy at the fork); the file is opened without following links and
written only when it is a plain file of its own; a lock whose recorded holder has ended is taken over.
`refuse_overwrite` is the one rule of every command that writes: an output never equals, contains
or lies inside what the command reads (links resolved), checked before any work. What a writing
verb may delete is one rule too: only what it recorded writing, file by file, in its record inside
the folder it owns (`record_written` / WRITTEN: each file's size and sha256); `refuse_replacing`
lets `--force` replace a folder only when everything in it is so recorded and unchanged, and
`staged_folder` deletes those files one by one, never a tree.

The digest of every record (`sha256_file`) reads a regular file only (a FIFO or device in a
record's place is refused at once, as untrusted.open_regular refuses them for every user's file).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

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
    """The hex sha256 of a file's bytes, read in blocks of 4 MiB (the one digest of every integrity
    record: runs, exports, prepared data, downloads, distillations).

    Raises:
        OSError: it cannot be read, or it is not a regular file (a FIFO or device in a record's
            place: refused at once rather than read for ever).
    """
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))  # a FIFO: at once
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # the one rule of untrusted.open_regular_binary
            raise OSError(errno.EINVAL, "it is not a regular file", str(path))
        os.set_blocking(fd, True)
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


# A line file's line: every break that str.splitlines() knows (\n, \r, \v, \f, \x1c-\x1e, \x85,
# U+2028, U+2029) becomes a space, so that a text reads back as one line whatever the reader splits on
_LINE_BREAKS = str.maketrans({c: " " for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str) -> str:
    """`text` as one line of a line file (without its "\\n"): a line break inside it becomes a space."""
    return text.translate(_LINE_BREAKS)


# ----------------------------------------------------------------------------- one writer per folder

LOCK_FILE = ".attnmt.lock"  # in the folder it guards; holds the holder's pid and command line
MAX_LOCK_BYTES = 1 << 16    # a lock file holds one short JSON line: a bigger file in its place is not ours
POLL_S = 0.2                # how often a waiting process tries the lock again
_OPEN_FLAGS = os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
_HOST = socket.gethostname()


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of `pid` from /proc, or None (no such
    process, or no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    try:
        return fields[0], int(fields[19])     # fields 3 (state) and 22 (starttime) of proc(5)
    except (IndexError, ValueError):
        return None


def _record() -> dict:
    """What a holder writes into its lock file: who it is, to be named, and recognised once dead."""
    proc = _proc_stat(os.getpid())
    return {"pid": os.getpid(), "command": [Path(sys.argv[0]).name, *sys.argv[1:]], "host": _HOST,
            **({"started": proc[1]} if proc else {})}


def _read_record(fd: int) -> dict | None:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8", errors="replace") or "null")
        if isinstance(info, dict) and isinstance(info.get("pid"), int) and isinstance(info.get("command"), list):
            return info
    except (OSError, ValueError):
        pass
    return None


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it ("attnmt train ... (pid 123)"), or a fallback."""
    info = _read_record(fd)
    if info is None:
        return "another process (it wrote no readable name)"
    return f"{' '.join(map(str, info['command']))} (pid {info['pid']})"


def _gone(info: dict | None) -> bool:
    """Whether the process a lock record names has certainly ended: on this host, and no such
    pid, a zombie, or a pid now used by a process started later. Unknown -> False (wait)."""
    if info is None or info.get("host", _HOST) != _HOST or info["pid"] == os.getpid() or info["pid"] <= 0:
        return False
    proc = _proc_stat(info["pid"])
    if proc is None:
        try:
            os.kill(info["pid"], 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False  # alive, another user's
        return False
    state, started = proc
    return state in ("Z", "X") or (isinstance(info.get("started"), int) and info["started"] != started)


def _openers(fd: int, limit: int = 8) -> list[int]:
    """Pids of this user's processes that hold the file of `fd` open (from /proc), for messages."""
    target = os.fstat(fd)
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError:
        return found
    for pid in pids:
        try:
            for entry in os.scandir(f"/proc/{pid}/fd"):
                st = os.stat(entry.path)  # follows the link to the open file
                if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                    found.append(pid)
                    break
        except OSError:
            continue
        if len(found) >= limit:
            break
    return found


class _LockFile:
    """An open lock file: opened without following a link, created with O_EXCL when new, and
    refused (untouched) when it is not a plain file of its own: a symbolic link, a hard link to
    another name, a device or FIFO, or a file too big to be a lock."""

    def __init__(self, path: Path):
        self.path = path
        with writing(path):
            for tries_left in reversed(range(3)):  # a file removed between the two opens: create it again
                try:
                    self.fd = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
                    break
                except FileExistsError:
                    try:
                        self.fd = os.open(path, _OPEN_FLAGS)
                        break
                    except FileNotFoundError:
                        if not tries_left:
                            raise
                    except OSError as err:
                        if err.errno != errno.ELOOP:
                            raise
                        raise AttnmtError(f"{path}: is a symbolic link (to {os.readlink(path)}); attnmt does not "
                                          f"follow links for its lock files, so the file it points to stays "
                                          f"untouched: remove the link, then run this again") from None
        self.owner = os.getpid()
        _OPEN_FDS.add(self.fd)
        st = os.fstat(self.fd)
        problem = ("is not a plain file" if not stat.S_ISREG(st.st_mode)
                   else f"has {st.st_nlink} names (a hard link to another file)" if st.st_nlink != 1
                   else f"holds {st.st_size} bytes, not a lock of attnmt's" if st.st_size > MAX_LOCK_BYTES else "")
        if problem:
            self.close()
            raise AttnmtError(f"{path}: {problem}; attnmt writes its lock only into a file of its own and left this "
                              f"one untouched: remove it, then run this again")

    def try_lock(self) -> bool:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def is_at_path(self) -> bool:
        """Whether the path still names this file (a lock taken over is unlinked from under it)."""
        try:
            st, here = os.stat(self.path, follow_symlinks=False), os.fstat(self.fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino)

    def write_record(self) -> None:
        try:  # say who holds it; a full disk must not stop the command itself
            data = (json.dumps(_record()) + "\n").encode("utf-8")
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, data, 0)
        except OSError:
            pass

    def close(self) -> None:
        """Close it (the kernel lets go of the lock with the last descriptor); only in the process
        that opened it: a forked child's copy was closed at the fork."""
        if self.fd >= 0 and os.getpid() == self.owner:
            _OPEN_FDS.discard(self.fd)
            os.close(self.fd)
        self.fd = -1


_HELD: dict[tuple[Path, int], int] = {}  # (lock, thread) this process holds -> how many `with` blocks hold it
_OPEN_FDS: set[int] = set()              # the lock files this process has open


def _close_after_fork() -> None:
    """In a forked child (preparation workers, a user's os.fork): close the lock files the parent
    holds. Their locks belong to the open file, which a child would otherwise share and keep held
    after the parent died (the cause of issue 50's hang: orphaned workers held the cache's lock)."""
    for fd in _OPEN_FDS:
        try:
            os.close(fd)
        except OSError:
            pass
    _OPEN_FDS.clear()
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_after_fork)


def _take_over(lock: _LockFile, folder: Path, name: str) -> str:
    """If the lock's recorded holder has ended though the lock is still held (a process that
    inherited it outlived it), unlink the file so that a new one can be locked; said in a warning.
    Serialised by a second lock, so that two waiters never both take it. Returns "held" (its
    holder lives, or may), "free" (let go meanwhile: `lock` is now taken) or "new" (taken over,
    or by another waiter first: open the file again)."""
    first = _read_record(lock.fd)
    if not _gone(first):
        return "held"
    time.sleep(POLL_S)  # a new holder writes its record at once: a stale record does not stay
    if lock.try_lock():
        return "free"
    if _read_record(lock.fd) != first:
        return "held"
    guard = _LockFile(folder / f"{name}.takeover")
    try:
        fcntl.flock(guard.fd, fcntl.LOCK_EX)
        if not lock.is_at_path():
            return "new"
        openers = _openers(lock.fd)
        log.warning("%s: its holder %s is no longer running, but the lock is still held%s; taking it over",
                    lock.path, _holder(lock.fd),
                    f" by processes it left behind (pid {', '.join(map(str, openers))}: stop them)" if openers
                    else " by a process it left behind")
        os.unlink(lock.path)
        return "new"
    finally:
        guard.close()


@contextmanager
def writer_lock(folder: str | os.PathLike, *, name: str = LOCK_FILE, wait: bool = False) -> Iterator[None]:
    """Hold the one-writer lock of `folder` (made if missing) for the `with` body.

    An OS lock (flock) on the file `name` in `folder` (default .attnmt.lock): the kernel releases
    it when the holder exits or is killed, so no stale lock is left behind; forked children close
    their copy at the fork, so none keeps it after the holder ends. The file is opened without
    following links and is written only when it is a plain file of its own (`_LockFile`). A lock
    still held though the process its file names has ended is said and taken over. A process
    that holds it may take it again in the same thread (a command calling the library). Readers
    take no lock: every file is replaced whole (atomic_write), so they never see half of one.

    Raises:
        AttnmtError: another process holds it (unless `wait`): names that process's command and
            pid; or the lock's path is a link or not a file of attnmt's (left untouched).
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
    said = False
    for _ in range(100):
        lock = _LockFile(path)
        try:
            taken = lock.try_lock()
            while not taken:
                outcome = _take_over(lock, folder, name)
                if outcome != "held":
                    taken = outcome == "free"
                    break
                if not wait:
                    raise AttnmtError(f"{folder}: another attnmt is writing here: {_holder(lock.fd)}; wait for it "
                                      f"to end (or stop it), then run this again")
                if not said:
                    log.info("waiting for %s to finish writing %s", _holder(lock.fd), folder)
                    said = True
                time.sleep(POLL_S)
                taken = lock.try_lock()
            if not (taken and lock.is_at_path()):  # taken over, or unlinked by its last holder: a new file
                lock.close()
                continue
        except BaseException:
            lock.close()
            raise
        break
    else:
        raise AttnmtError(f"{path}: replaced 100 times while attnmt took its lock (is another program removing "
                          f"it?): run this again")
    lock.write_record()
    _HELD[key] = 1
    try:
        yield
    finally:
        del _HELD[key]
        lock.close()


# ----------------------------------------------------------------------------- never overwrite an input

def _real(path: str | os.PathLike) -> Path:
    """`path` absolute, with `.`, `..` and every link along it resolved (what it names on disk)."""
    return Path(path).resolve()


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether `a` and `b` are one file on disk (a hard link counts); False when either is missing."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _writes_nothing_over(path: Path) -> bool:
    """An existing output that is neither a file nor a folder (a device such as /dev/null, a pipe):
    writing it replaces nothing, so it cannot destroy an input."""
    return path.exists() and not path.is_file() and not path.is_dir()


PathPairs = Mapping[str, "str | os.PathLike"] | Iterable[tuple[str, "str | os.PathLike"]]


def _pairs(paths: PathPairs | None) -> list[tuple[str, str | os.PathLike]]:
    if paths is None:
        return []
    return list(paths.items()) if isinstance(paths, Mapping) else list(paths)


def refuse_overwrite(output: str | os.PathLike, inputs: PathPairs | None = None,
                     runs: PathPairs | None = None) -> None:
    """The one rule for every command that writes: an output may never equal, contain or lie
    inside an input or a run (a folder) that the command reads, after resolving links.

    `inputs` (label -> file) and `runs` (label -> folder) are what the command reads (mappings, or
    (label, path) pairs where one label names several files); the output
    is refused, before any work, when it is one of them (the same path after resolving `.`, `..`
    and symlinks, or the same file through a hard link), lies inside one of them, or holds one of
    them (a folder an export or `--force` could replace). An output that is a device or a pipe
    (/dev/null, /dev/stdout) replaces nothing and passes.

    Raises:
        AttnmtError: one line naming the output and the input or run it would destroy.
    """
    out = Path(output)
    if _writes_nothing_over(out):
        return
    resolved = _real(out)
    reads = [(label, read, False) for label, read in _pairs(inputs)]
    reads += [(label, read, True) for label, read in _pairs(runs)]
    for label, read, is_run in reads:
        read_path = Path(read)
        real = _real(read_path)
        if resolved == real or _same_file(out, read_path):
            if is_run:
                raise AttnmtError(f"{output}: is inside the {label} {read} (it is that folder), which this command "
                                  f"reads: choose an output outside it")
            raise AttnmtError(f"{output}: is the {label} {read}; writing it would destroy the input: choose "
                              f"another output")
        if resolved.is_relative_to(real):
            raise AttnmtError(f"{output}: is inside the {label} {read}, which this command reads: choose an "
                              f"output outside it")
        if real.is_relative_to(resolved):
            raise AttnmtError(f"{output}: holds the {label} {read}, which this command reads; replacing it would "
                              f"destroy the input: choose an output outside it")
        linked = _hard_link_into(out, real) if is_run else None
        if linked is not None:
            raise AttnmtError(f"{output}: is {linked} (a hard link), a file of the {label} {read}, which this command "
                              f"reads; writing it would destroy the input: choose another output")


def _hard_link_into(output: Path, folder: Path) -> Path | None:
    """The file inside `folder` that `output` is a hard link of, if any (only looked for when
    `output` is a file with more than one link)."""
    try:
        if not output.is_file() or output.stat().st_nlink < 2 or not folder.is_dir():
            return None
    except OSError:
        return None
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            if _same_file(output, Path(dirpath) / name):
                return Path(dirpath) / name
    return None


# ----------------------------------------------------------------------------- what a writing verb may delete

WRITTEN = "attnmt_written.json"  # inside a folder a verb wrote whole: every file it wrote there, with its digest
WRITTEN_FORMAT = "attnmt-written-1"
MAX_WRITTEN_BYTES = 1 << 20      # a record lists a few dozen files: a bigger file in its place is not one


def _walk(folder: Path) -> tuple[list[str], list[str], list[str]]:
    """(regular files, folders, anything else: links, pipes, devices) under `folder`, as relative
    POSIX names, without following links."""
    files, folders, other = [], [], []
    for dirpath, dirnames, filenames in os.walk(folder):
        base = Path(dirpath)
        for name in dirnames + filenames:
            path = base / name
            rel = path.relative_to(folder).as_posix()
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                files.append(rel)
            elif stat.S_ISDIR(mode):
                folders.append(rel)
            else:
                other.append(rel)
        dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
    return files, folders, other


def record_written(folder: str | os.PathLike, *, kind: str) -> None:
    """Record every file in `folder` (subfolders too) as written by attnmt: its size and sha256,
    in WRITTEN inside it (the last file written). What `refuse_replacing` and `staged_folder` may
    later delete is what this lists, unchanged, and nothing else.

    Raises:
        ValueError: the folder holds a link or something that is not a file (attnmt writes none).
    """
    folder = Path(folder)
    files, _, other = _walk(folder)
    if other:
        raise ValueError(f"{folder}: holds {other[0]}, which is not a file")
    entries = {name: {"bytes": (folder / name).stat().st_size, "sha256": sha256_file(folder / name)}
               for name in sorted(files) if name != WRITTEN}
    write_json(folder / WRITTEN, {"format": WRITTEN_FORMAT, "kind": kind, "files": entries})


def written_record(folder: str | os.PathLike) -> dict | None:
    """The files a verb recorded writing into `folder` (name -> {bytes, sha256}); None when there is
    no record, or the file in its place is not one (too big, not JSON, names outside the folder)."""
    path = Path(folder) / WRITTEN
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode) or os.lstat(path).st_size > MAX_WRITTEN_BYTES:
            return None
        record = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    files = record.get("files") if isinstance(record, dict) and record.get("format") == WRITTEN_FORMAT else None
    if not isinstance(files, dict):
        return None
    for name, entry in files.items():
        parts = Path(name).parts
        if (not isinstance(name, str) or not parts or Path(name).is_absolute() or ".." in parts or name == WRITTEN
                or not isinstance(entry, dict) or not isinstance(entry.get("bytes"), int)
                or not isinstance(entry.get("sha256"), str)):
            return None
    return files


def _foreign(folder: Path, files: dict) -> list[str]:
    """What in `folder` its record does not account for: a file it does not list or that changed
    since (size, sha256), a link, a FIFO or device, a folder holding no recorded file."""
    found, folders, other = _walk(folder)
    foreign = list(other)
    for name in found:
        if name == WRITTEN:
            continue
        entry = files.get(name)
        path = folder / name
        if entry is None or path.stat().st_size != entry["bytes"] or sha256_file(path) != entry["sha256"]:
            foreign.append(name + ("" if entry is None else " (changed since attnmt wrote it)"))
    needed = {parent.as_posix() for name in files for parent in Path(name).parents if parent.as_posix() != "."}
    foreign += [name + "/" for name in folders if name not in needed]
    return sorted(foreign)


def remove_written(folder: str | os.PathLike) -> list[str]:
    """Delete, file by file, what `folder`'s record lists (each a regular file of the recorded
    size), then the record and the folders left empty; never anything else. Returns what is left
    (empty: the folder is gone)."""
    folder = Path(folder)
    files = written_record(folder) or {}
    for name, entry in files.items():
        path = folder / name
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size == entry["bytes"]:
            path.unlink()
    (folder / WRITTEN).unlink(missing_ok=True)
    for dirpath, _, _ in sorted(os.walk(folder), key=lambda item: -len(item[0])):  # deepest first
        try:
            os.rmdir(dirpath)
        except OSError:  # not empty: something attnmt did not write
            pass
    return [] if not os.path.lexists(folder) else sorted(_walk(folder)[0] + _walk(folder)[2])


@contextmanager
def staged_folder(output: str | os.PathLike, *, kind: str = "an output of attnmt") -> Iterator[Path]:
    """A new temporary folder beside `output` for the body to fill, its files then recorded
    (`record_written`, as `kind`) and renamed into `output`'s place when the body ends without
    an error; removed otherwise. An earlier folder there (which the caller has checked with
    `refuse_replacing` may go) is checked again, moved aside, and only the files its record lists
    are deleted: a file that appeared meanwhile is kept, said in a warning. `output` is taken
    literally (`.` and `..` resolved, links not), so the staging folder is never inside it.

    Raises:
        AttnmtError: the earlier folder no longer passes `refuse_replacing` (nothing replaced).
    """
    target = Path(os.path.abspath(output))
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield staging
        record_written(staging, kind=kind)
        if os.path.lexists(target) and target.is_dir() and not target.is_symlink() and any(target.iterdir()):
            refuse_replacing(target, kind=kind, flag="--force")  # again: minutes may have passed
            aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.rmdir(aside)
            os.rename(target, aside)
            staging.rename(target)
            left = remove_written(aside)
            if left:
                log.warning("%s: kept (it holds %s, which attnmt did not write and which appeared while it wrote %s)",
                            aside, ", ".join(left[:5]), target)
        else:
            if target.is_dir() and not target.is_symlink():
                target.rmdir()  # empty
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def refuse_replacing_file(path: str | os.PathLike, *, force: bool, earlier: str, ours: Callable[[Path], bool],
                          not_ours: str) -> None:
    """An output file over an existing path only with `force`, and then only over one that
    `ours` says this verb wrote and nobody changed (its own record); never a link, a folder or any
    other file. `earlier` and `not_ours` say, in the messages, what may be replaced and what the
    path is not.

    Raises:
        AttnmtError: naming the file and why.
    """
    if not os.path.lexists(path):
        return
    if not force:
        raise AttnmtError(f"{path}: exists; --force replaces {earlier} there: choose another output or add --force")
    if not ours(Path(path)):
        raise AttnmtError(f"{path}: is not {not_ours}; --force replaces only that: choose another output")


def refuse_replacing(folder: str | os.PathLike, *, kind: str, flag: str) -> None:
    """What `--force` / `--overwrite` may replace: nothing, an empty folder, or a folder holding
    only what an earlier output of `kind` recorded writing into it (its WRITTEN record: each
    file, unchanged since). Never a file, a link, or a folder holding anything else, whatever
    its name (issue 66 group D: names were matched, and a user's keep.model/ went).

    Raises:
        AttnmtError: naming the folder, what is foreign in it and what `flag` replaces.
    """
    path = Path(folder)
    if not os.path.lexists(path):
        return
    if path.is_symlink():
        raise AttnmtError(f"{folder}: is a link; {flag} replaces only a folder ({kind}): give the folder itself "
                          f"or another output")
    if not path.is_dir():
        raise AttnmtError(f"{folder}: is a file, not a folder; {flag} replaces only {kind}: choose another output")
    if not any(path.iterdir()):
        return
    files = written_record(path)
    if files is None:
        raise AttnmtError(f"{folder}: holds files attnmt did not write (no record of its own, {WRITTEN}: it is not "
                          f"{kind}, or one written before attnmt recorded its files); {flag} replaces only {kind}: "
                          f"choose another output, or move them away")
    foreign = _foreign(path, files)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise AttnmtError(f"{folder}: holds files attnmt did not write ({shown}); {flag} replaces only {kind}: "
                          f"choose another output, or move them away")


def check_folder_output(output: str | os.PathLike, runs: Mapping[str, str | os.PathLike], *, force: bool, kind: str,
                        flag: str = "--force", marker: str | None = None, owned: Callable | None = None) -> None:
    """A folder output (an export): never over what the command reads (`refuse_overwrite`); an
    existing non-empty one only with `force`, and then only what an earlier output recorded
    writing there (`refuse_replacing`; `staged_folder` writes the record). `marker` and `owned`
    (names a kind of output holds) are no rule any more: the record decides; callers may drop them.

    Raises:
        AttnmtError: naming the output and the reason.
    """
    refuse_overwrite(output, {}, runs)  # before --force could delete anything
    path = Path(output)
    if force:
        refuse_replacing(path, kind=kind, flag=flag)
    elif os.path.lexists(path) and (not path.is_dir() or any(path.iterdir())):
        raise AttnmtError(f"{output}: exists and is not empty (use {flag} to replace an earlier export there)")

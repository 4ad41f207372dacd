"""Where POST /translate_file keeps its results until GET /download_file/<name> serves them: one
folder the server owns, names nobody can guess, a lifetime, and a cap on how many are kept.

    store = FileStore(None, expire_s=3600, max_files=1000)   # a temporary folder, removed by close()
    name = store.save(b"...", ".html")                        # "kV3...Q.html" (secrets.token_urlsafe)
    store.find(name)                                          # its Path, or None: unknown, expired, not a name

A name is checked against NAME (URL-safe base64 and a known suffix, nothing else) before any path
is built from it, so no name can reach outside the folder; expiry is by modification time, checked
on every lookup and swept on every save.

The store serves and expires only what it wrote: every name it saves is kept in its record
(`.DIR.attnmt-files.json` beside a given folder DIR, replaced atomically after each change; in
memory for a temporary folder), read back at start-up so that a restarted server still knows its
files. A file it did not write (a user's, even one named like a translation) is never served,
swept nor deleted. One server uses a --files-dir at a time (the lock `.DIR.lock` beside it); the
folder itself holds the translated files only.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from attnmt.documents import OUTPUT_SUFFIX
from attnmt.documents import SUFFIXES as DOCUMENT_SUFFIXES
from attnmt.errors import AttnmtError, WriteError
from attnmt.files import atomic_write, read_json, write_json, writer_lock
from attnmt.server.api_errors import ApiError

NAME_BYTES = 24  # 192 random bits: 32 URL-safe characters
SUFFIXES = tuple(s for s in DOCUMENT_SUFFIXES if s not in OUTPUT_SUFFIX)  # what translations are stored as
NAME = re.compile(r"[A-Za-z0-9_-]{32}(?:" + "|".join(re.escape(s) for s in SUFFIXES) + ")")
RECORD = ".{}.attnmt-files.json"  # beside the folder: {"format": RECORD_FORMAT, "files": [the names it keeps]}
RECORD_FORMAT = "attnmt-filestore-1"

log = logging.getLogger(__name__)


class FileStore:
    """Translated files in `folder` (None: a new temporary folder, deleted on close), each kept
    `expire_s` seconds, at most `max_files` at once.

    Raises:
        AttnmtError: `folder` cannot be made or written to.
    """

    def __init__(self, folder: str | os.PathLike | None, *, expire_s: float, max_files: int,
                 clock: Callable[[], float] = time.time):
        self.owned = folder is None
        self._held = ExitStack()
        try:  # fail at start-up, not on the first file
            self.folder = Path(tempfile.mkdtemp(prefix="attnmt-files-") if folder is None else folder)
            self.folder.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=self.folder).close()
            target = Path(os.path.abspath(self.folder))
            self.record = None if self.owned else target.parent / RECORD.format(target.name)
            if not self.owned:  # one server per folder: its record is this process's alone
                self._held.enter_context(writer_lock(target.parent, name=f".{target.name}.lock"))
        except OSError as err:
            raise AttnmtError(f"--files-dir {folder}: cannot write files there ({err.strerror or err})") from None
        except AttnmtError as err:
            raise AttnmtError(f"--files-dir {err}") from None
        self.expire_s = expire_s
        self.max_files = max_files
        self.clock = clock
        self._lock = threading.Lock()  # the record, between the server's threads
        self._names = self._read_record()

    def _read_record(self) -> set[str]:
        """The names an earlier server on this folder saved (that are still there); none when
        there is no record, or it is not one (then nothing in the folder is the store's)."""
        path = self.record
        if path is None or not path.exists():
            return set()
        try:
            record = read_json(path, AttnmtError)
        except (AttnmtError, OSError) as err:
            log.warning("%s: not readable (%s): the files it named are left alone", path, err)
            return set()
        files = record.get("files") if isinstance(record, dict) and record.get("format") == RECORD_FORMAT else None
        if not isinstance(files, list):
            log.warning("%s: not a record of this store: the files in %s are left alone", path, self.folder)
            return set()
        return {name for name in files if isinstance(name, str) and NAME.fullmatch(name)
                and self._own_file(self.folder / name)}

    def _write_record(self) -> None:
        if self.record is not None:
            write_json(self.record, {"format": RECORD_FORMAT, "files": sorted(self._names)})

    @staticmethod
    def _own_file(path: Path) -> bool:
        return not path.is_symlink() and path.is_file()  # the store writes no links: one is not its own

    def _stored(self) -> list[Path]:
        return [self.folder / name for name in sorted(self._names)]

    def _expired(self, path: Path) -> bool:
        try:
            return path.stat().st_mtime + self.expire_s <= self.clock()
        except FileNotFoundError:
            return True

    def _forget(self, names: list[str]) -> None:
        """Delete the store's files `names` and drop them from the record (caller holds _lock);
        something else in a name's place (a link, a folder) is dropped from the record, not deleted."""
        for name in names:
            if self._own_file(self.folder / name):
                (self.folder / name).unlink(missing_ok=True)
        self._names.difference_update(names)
        try:
            self._write_record()
        except WriteError as err:  # the files are gone; a stale name is dropped at the next start
            log.warning("%s", err)

    def sweep(self) -> int:
        """Delete the expired files (the store's own only); how many are left."""
        with self._lock:
            expired = [path.name for path in self._stored() if not self._own_file(path) or self._expired(path)]
            if expired:
                self._forget(expired)
            return len(self._names)

    def save(self, data: bytes, suffix: str) -> str:
        """Store `data` under a new random name ending in `suffix`; its name.

        Raises:
            ApiError: 429 when `max_files` unexpired files are already kept; 507 when the file
                cannot be written (a full disk: nothing half-written is kept).
        """
        if suffix not in SUFFIXES:
            raise ValueError(f"suffix={suffix!r}: expected one of {', '.join(SUFFIXES)}")
        if self.sweep() >= self.max_files:
            raise ApiError(429, f"Too many translated files are waiting to be downloaded ({self.max_files}); "
                                f"try again when some have expired")
        name = secrets.token_urlsafe(NAME_BYTES) + suffix
        try:
            atomic_write(self.folder / name, lambda tmp: tmp.write_bytes(data))
            with self._lock:
                self._names.add(name)
                try:
                    self._write_record()
                except WriteError:  # unrecorded, it would never be served nor expire: not kept
                    self._names.discard(name)
                    (self.folder / name).unlink(missing_ok=True)
                    raise
        except WriteError as err:
            cause = str(err).partition(": could not be written: ")[2].partition(";")[0] or "an I/O error"
            raise ApiError(507, f"The server could not store the translated file ({cause}); try again later") from None
        return name

    def find(self, name: str) -> Path | None:
        """The stored file called `name`, or None when `name` is not a store name, is not one the
        store saved (a foreign file, whatever its name), or has expired (then it is deleted)."""
        if not NAME.fullmatch(name) or name not in self._names:  # a file the store did not write is not found
            return None
        path = self.folder / name
        if not self._own_file(path) or self._expired(path):
            with self._lock:
                self._forget([name])
            return None
        return path

    def close(self) -> None:
        """Remove the folder when the store made it; release a given one."""
        self._held.close()
        if self.owned:
            shutil.rmtree(self.folder, ignore_errors=True)

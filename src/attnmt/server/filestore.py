"""Where POST /translate_file keeps its results until GET /download_file/<name> serves them: one
folder the server owns, names nobody can guess, a lifetime, and a cap on how many are kept.

    store = FileStore(None, expire_s=3600, max_files=1000)   # a temporary folder, removed by close()
    name = store.save(b"...", ".html")                        # "kV3...Q.html" (secrets.token_urlsafe)
    store.find(name)                                          # its Path, or None: unknown, expired, not a name

A name is checked against NAME (URL-safe base64 and a known suffix, nothing else) before any path
is built from it, so no name can reach outside the folder; expiry is by modification time, checked
on every lookup and swept on every save.

The store serves and expires only what it wrote: every file it saves is kept in its record
(RECORD inside the folder it owns, with each file's size and sha256, replaced atomically after
each change; in memory for a temporary folder), read back at start-up so that a restarted server
still knows its files. A name the record lists is the store's only while the file is the one it
wrote (its size and sha256): a record edited to list a user's file (issue 66 group D: one kept
beside the folder, in its parent, was forged so) gets that file left alone, never deleted. A file
it did not write (a user's, even one named like a translation) is never served, swept nor
deleted. One server uses a --files-dir at a time (the lock .attnmt.lock inside it).
"""

from __future__ import annotations

import hashlib
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
from attnmt.files import atomic_write, read_json, sha256_file, write_json, writer_lock
from attnmt.server.api_errors import ApiError

NAME_BYTES = 24  # 192 random bits: 32 URL-safe characters
SUFFIXES = tuple(s for s in DOCUMENT_SUFFIXES if s not in OUTPUT_SUFFIX)  # what translations are stored as
NAME = re.compile(r"[A-Za-z0-9_-]{32}(?:" + "|".join(re.escape(s) for s in SUFFIXES) + ")")
RECORD = ".attnmt-files.json"  # inside the folder: {"format": RECORD_FORMAT, "files": {name: {bytes, sha256}}}
RECORD_FORMAT = "attnmt-filestore-2"
OLD_RECORD = ".{}.attnmt-files.json"  # where attnmt before issue 66 kept it: beside the folder, in its parent

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
            self.record = None if self.owned else target / RECORD
            if not self.owned:  # one server per folder: its record is this process's alone
                self._held.enter_context(writer_lock(target))
                old = target.parent / OLD_RECORD.format(target.name)
                if old.exists():
                    log.warning("%s: a record of an earlier attnmt, kept beside the folder, is no longer read: the "
                                "files it names are left alone (delete them and it yourself)", old)
        except OSError as err:
            raise AttnmtError(f"--files-dir {folder}: cannot write files there ({err.strerror or err})") from None
        except AttnmtError as err:
            raise AttnmtError(f"--files-dir {err}") from None
        self.expire_s = expire_s
        self.max_files = max_files
        self.clock = clock
        self._lock = threading.Lock()  # the record, between the server's threads
        self._files: dict[str, dict] = self._read_record()  # name -> {bytes, sha256}: what the store wrote

    @property
    def _names(self) -> set[str]:
        return set(self._files)

    def _read_record(self) -> dict[str, dict]:
        """The files an earlier server on this folder saved, each still the one it wrote (size and
        sha256); none when there is no record, or it is not one (then nothing in the folder is the
        store's). A listed name whose file is not the one recorded is left alone, said once."""
        path = self.record
        if path is None or not path.exists():
            return {}
        try:
            record = read_json(path, AttnmtError)
        except (AttnmtError, OSError) as err:
            log.warning("%s: not readable (%s): the files it named are left alone", path, err)
            return {}
        files = record.get("files") if isinstance(record, dict) and record.get("format") == RECORD_FORMAT else None
        if not isinstance(files, dict):
            log.warning("%s: not a record of this store: the files in %s are left alone", path, self.folder)
            return {}
        kept, refused = {}, []
        for name, entry in files.items():
            if not (NAME.fullmatch(name) and isinstance(entry, dict) and isinstance(entry.get("bytes"), int)
                    and isinstance(entry.get("sha256"), str)):
                refused.append(name)
            elif self._own_file(self.folder / name, entry):
                kept[name] = {"bytes": entry["bytes"], "sha256": entry["sha256"]}
            elif os.path.lexists(self.folder / name):
                refused.append(name)
        if refused:
            log.warning("%s: lists %d file(s) that are not the ones the store wrote (%s): left alone", path,
                        len(refused), ", ".join(refused[:3]))
        return kept

    def _write_record(self) -> None:
        if self.record is not None:
            write_json(self.record, {"format": RECORD_FORMAT, "files": dict(sorted(self._files.items()))})

    @staticmethod
    def _own_file(path: Path, entry: dict | None = None) -> bool:
        """A plain file (the store writes no links), and with `entry` the one it records (size, sha256)."""
        if path.is_symlink() or not path.is_file():
            return False
        if entry is None:
            return True
        try:
            return path.stat().st_size == entry["bytes"] and sha256_file(path) == entry["sha256"]
        except OSError:
            return False

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
            if self._own_file(self.folder / name, self._files.get(name)):  # still the file it wrote
                (self.folder / name).unlink(missing_ok=True)
            self._files.pop(name, None)
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
                self._files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                try:
                    self._write_record()
                except WriteError:  # unrecorded, it would never be served nor expire: not kept
                    self._files.pop(name, None)
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

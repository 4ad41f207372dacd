"""Where POST /translate_file keeps its results until GET /download_file/<name> serves them: one
folder the server owns, names nobody can guess, a lifetime, and a cap on how many are kept.

    store = FileStore(None, expire_s=3600, max_files=1000)   # a temporary folder, removed by close()
    name = store.save(b"...", ".html")                        # "kV3...Q.html" (secrets.token_urlsafe)
    store.find(name)                                          # its Path, or None: unknown, expired, not a name

A name is checked against NAME (URL-safe base64 and a known suffix, nothing else) before any path
is built from it, so no name can reach outside the folder; expiry is by modification time, checked
on every lookup and swept on every save.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

from attnmt.documents import OUTPUT_SUFFIX
from attnmt.documents import SUFFIXES as DOCUMENT_SUFFIXES
from attnmt.errors import AttnmtError, WriteError
from attnmt.files import atomic_write
from attnmt.server.api_errors import ApiError

NAME_BYTES = 24  # 192 random bits: 32 URL-safe characters
SUFFIXES = tuple(s for s in DOCUMENT_SUFFIXES if s not in OUTPUT_SUFFIX)  # what translations are stored as
NAME = re.compile(r"[A-Za-z0-9_-]{32}(?:" + "|".join(re.escape(s) for s in SUFFIXES) + ")")


class FileStore:
    """Translated files in `folder` (None: a new temporary folder, deleted on close), each kept
    `expire_s` seconds, at most `max_files` at once.

    Raises:
        AttnmtError: `folder` cannot be made or written to.
    """

    def __init__(self, folder: str | os.PathLike | None, *, expire_s: float, max_files: int,
                 clock: Callable[[], float] = time.time):
        self.owned = folder is None
        try:  # fail at start-up, not on the first file
            self.folder = Path(tempfile.mkdtemp(prefix="attnmt-files-") if folder is None else folder)
            self.folder.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=self.folder).close()
        except OSError as err:
            raise AttnmtError(f"--files-dir {folder}: cannot write files there ({err.strerror or err})") from None
        self.expire_s = expire_s
        self.max_files = max_files
        self.clock = clock

    def _stored(self) -> list[Path]:
        return [p for p in self.folder.iterdir() if NAME.fullmatch(p.name) and p.is_file()]

    def _expired(self, path: Path) -> bool:
        try:
            return path.stat().st_mtime + self.expire_s <= self.clock()
        except FileNotFoundError:
            return True

    def sweep(self) -> int:
        """Delete the expired files; how many are left."""
        left = 0
        for path in self._stored():
            if self._expired(path):
                path.unlink(missing_ok=True)
            else:
                left += 1
        return left

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
        except WriteError as err:
            cause = str(err).partition(": could not be written: ")[2].partition(";")[0] or "an I/O error"
            raise ApiError(507, f"The server could not store the translated file ({cause}); try again later") from None
        return name

    def find(self, name: str) -> Path | None:
        """The stored file called `name`, or None when `name` is not a store name, is unknown or
        has expired (then it is deleted)."""
        if not NAME.fullmatch(name):
            return None
        path = self.folder / name
        if path.is_symlink() or not path.is_file():  # the store writes no links: one is not its own
            return None
        if self._expired(path):
            path.unlink(missing_ok=True)
            return None
        return path

    def close(self) -> None:
        """Remove the folder when the store made it."""
        if self.owned:
            shutil.rmtree(self.folder, ignore_errors=True)

"""Line files for the commands: one record per line, read the same way from a file and from stdin."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import IO, Iterable, Iterator

from attnmt.errors import AttnmtError


def read_lines(handle: Iterable[str]) -> Iterator[str]:
    """The lines of `handle` without their line ending."""
    for line in handle:
        yield line.rstrip("\r\n")


def read_file(path: str) -> list[str]:
    """All lines of a UTF-8 file (undecodable bytes replaced).

    Raises:
        AttnmtError: the file cannot be read; names it.
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return list(read_lines(handle))
    except OSError as err:
        raise AttnmtError(f"{path}: cannot read ({err.strerror})") from None


@contextmanager
def open_input(path: str | None) -> Iterator[IO[str]]:
    """The file `path` for reading, or stdin when None."""
    if path is None:
        yield sys.stdin
        return
    with open(path, encoding="utf-8", errors="replace") as handle:
        yield handle


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    """The file `path` for writing, or stdout when None."""
    if path is None:
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8") as handle:
        yield handle

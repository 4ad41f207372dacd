"""Line files for the commands: one record per line, read the same way from a file and from stdin.

The rule: a line ends at "\\n" only, and a "\\r" right before that "\\n" is dropped (CRLF files).
Everything else some reader takes for a line break (a lone "\\r", NUL, form feed, vertical tab,
U+001C..U+001E, U+0085, U+2028, U+2029) stays inside its line, so `attnmt translate` writes one
output line per input line whatever the input holds. Bytes are UTF-8; undecodable ones become
U+FFFD. Files and stdin are read as bytes and split here, never by Python's universal newlines.
A line longer than bounds.LINE_BYTES (1 MiB) is refused naming file:line and the limit; lines are
read in bounded pieces, so /dev/zero or a file without line breaks ends at once, in bounded memory.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import IO, Iterable, Iterator

from attnmt.errors import AttnmtError
from attnmt.files import one_line
from attnmt.untrusted import bounded_lines


def decode_line(line: bytes | str) -> str:
    """One line as read (bytes or text, with or without its "\\n") -> its text, without the ending."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="replace")  # "\n" is never inside a UTF-8 sequence: per line is safe
    if line.endswith("\n"):
        line = line[:-2] if line.endswith("\r\n") else line[:-1]
    return line


def read_lines(handle: Iterable[bytes] | Iterable[str], where: str = "<stdin>") -> Iterator[str]:
    """The lines of `handle` by the rule above, streamed in bounded pieces (untrusted.bounded_lines:
    a line past LINE_BYTES is refused naming `where`:line). A binary handle (what `open_input`
    gives) splits at b"\\n" only; a text handle must have been opened with newline="\\n"
    (io.StringIO's default)."""
    for line in bounded_lines(handle, where):
        yield decode_line(line)


def read_file(path: str) -> list[str]:
    """All lines of a UTF-8 file by the rule above.

    Raises:
        AttnmtError: the file cannot be read; names it.
        DataError: a line past bounds.LINE_BYTES, naming file:line.
    """
    try:
        with open(path, "rb") as handle:
            return list(read_lines(handle, path))
    except OSError as err:
        raise AttnmtError(f"{path}: cannot read ({err.strerror})") from None


def _stdin() -> IO:
    """The standard input as bytes (its text layer would split at a lone \\r); a text stream that
    has no bytes below it (a test's io.StringIO) as it is."""
    stream = sys.stdin
    if stream is None or stream.closed:
        raise AttnmtError("no standard input to read: give -i FILE")
    return getattr(stream, "buffer", stream)


@contextmanager
def open_input(path: str | None) -> Iterator[IO]:
    """The file `path` (binary) for `read_lines`, or stdin when None."""
    if path is None:
        yield _stdin()
        return
    with open(path, "rb") as handle:
        yield handle


def output_line(text: str) -> str:
    """`text` as one output line, its "\\n" at the end (files.one_line: a break inside it becomes a space)."""
    return one_line(text) + "\n"


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    """The file `path` for writing (UTF-8, "\\n" line ends), or stdout when None."""
    if path is None:
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        yield handle

"""Line files for the commands: one record per line, read the same way from a file and from stdin.

The rule: a line ends at "\\n" only, and a "\\r" right before that "\\n" is dropped (CRLF files).
Everything else some reader takes for a line break (a lone "\\r", NUL, form feed, vertical tab,
U+001C..U+001E, U+0085, U+2028, U+2029) stays inside its line, so `attnmt translate` writes one
output line per input line whatever the input holds. Bytes are UTF-8; undecodable ones become
U+FFFD. Files and stdin are read as bytes and split here, never by Python's universal newlines.
A line longer than bounds.LINE_BYTES (1 MiB) is refused naming file:line and the limit; lines are
read in bounded pieces, so a file without line breaks ends at once, in bounded memory. A file named
is read only when it is a regular file (untrusted.open_regular: a FIFO, a device such as /dev/zero, a
link to one are refused at once), but for the one streamed line by line (`translate -i`), which
may be a named pipe (`-i <(zcat f.gz)`: it waits for its writer); one read whole within
untrusted.MAX_READ_BYTES; one that starts like a document or an archive (a .docx named .txt: a zip) is
refused saying what it is (documents.safety.what_it_is).
"""

from __future__ import annotations

import os
import stat
import sys
from contextlib import contextmanager
from typing import IO, Iterable, Iterator

from attnmt.errors import AttnmtError, DataError
from attnmt.files import one_line
from attnmt.untrusted import MAX_READ_BYTES, bounded_lines, open_regular

STDIN_HINT = " (pipe text in on the standard input instead)"


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


def refuse_binary(path: str, head: bytes) -> None:
    """A line file that starts like a document or an archive (a .docx named .txt: a zip) is refused
    saying what it is, before it is read as lines (issue 66 group C: 330 s to 1.4 GB of nonsense).

    Raises:
        DataError: naming the file and what it is.
    """
    from attnmt.documents.safety import what_it_is

    found = what_it_is(head)
    if found is not None:
        raise DataError(f"{path}: is {found}, not a text file of lines; a document is translated by its extension "
                        f"(-i FILE.docx, .pptx, .odt, .epub, .pdf, ...): give it its own")


@contextmanager
def open_text_file(path: str, *, limit: int | None = None, hint: str = STDIN_HINT,
                   pipes: bool = False) -> Iterator[IO]:
    """A line file named on the command line, open (binary) for `read_lines`: a regular file
    (untrusted.open_regular), not a document or archive (`refuse_binary`), at most `limit` bytes.
    With `pipes` (a file streamed line by line, in bounded pieces: `translate -i <(zcat f.gz)`) a
    named pipe is read too, as it comes; a device (/dev/zero) never.

    Raises:
        AttnmtError: it cannot be read, it is not a regular file (or pipe) or not text, or it is
            over `limit`.
    """
    if pipes and _is_pipe(path):
        handle = open(path, "rb")  # waits for its writer, as a pipe does
    else:
        handle = open_regular(path, hint=hint, error=None)  # a missing file: the OSError, as before
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if limit is not None and size > limit:
            raise AttnmtError(f"{path}: {size:,} bytes, over the {limit:,} bytes that attnmt reads whole")
        refuse_binary(path, handle.peek(16)[:16])
        yield handle


def _is_pipe(path: str) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


def check_text_input(path: str) -> None:
    """Refuse, before any work, a line file that `open_text_file` would refuse (a sharded job reads
    it later, in pieces). A named pipe passes unopened: `open_input` streams it."""
    if _is_pipe(path):
        return
    with open_text_file(path):
        pass


def read_file(path: str) -> list[str]:
    """All lines of a UTF-8 file by the rule above (within untrusted.MAX_READ_BYTES).

    Raises:
        AttnmtError: the file cannot be read, is not a regular file or is over the limit; names it.
        DataError: a line past bounds.LINE_BYTES, naming file:line.
    """
    try:
        with open_text_file(path, limit=MAX_READ_BYTES) as handle:
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
    """The file `path` (binary, `open_text_file`) for `read_lines`, or stdin when None."""
    if path is None:
        yield _stdin()
        return
    with open_text_file(path, pipes=True) as handle:  # streamed: a named pipe too
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

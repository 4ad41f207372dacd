"""Untrusted YAML, JSON and zip archives read within bounds: size, nesting depth and alias count
(a zip's entries, sizes and ratios) are checked before anything is expanded, so a hostile file
ends in one error instead of a hang, a RecursionError or gigabytes of memory (issue 24 items 2
and 9; a zip: documents/safety.py's documents and interop/argos's packages).

    text = read_text(path, error=ConfigError)         # refused past MAX_BYTES, before parsing
    data = load_yaml(text, source=str(path))          # refused past MAX_DEPTH levels or MAX_ALIASES aliases
    data = load_json(text, source=str(path))          # refused past MAX_DEPTH levels
    data = plain_copy(data, source=str(path))         # an unshared copy of at most MAX_VALUES values
    for line in bounded_lines(handle, "in.txt"):      # a text file's lines, none past LINE_BYTES (file:line)
    data = read_input(path, limit=N, error=DataError)  # a user's file: a regular one, at most N bytes
    package = ZipPackage(data, "x.docx", ZipLimits())  # a zip's entries, checked before and while inflating

A user's file is read only when it is a regular file (`open_regular`, `read_input`: a FIFO, a
device such as /dev/zero, a socket or a folder is refused before a byte is read, a link followed
to what it names), a whole one within a size limit named in the message: the one reader of
documents, line files, glossaries and configs (issue 66 group C).

YAML aliases (``*name``) are shared references when loaded: a "billion laughs" file of 9 levels
is a few hundred bytes and a few dozen objects. It grows only when something walks it as a tree,
so `plain_copy` walks it under a value budget and stops at the first value past it.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml

from attnmt.bounds import LINE_BYTES
from attnmt.errors import AttnmtError, ConfigError, DataError

MAX_BYTES = 64 * 1024    # a file; the largest shipped config is about 2 KB
MAX_DEPTH = 16           # nested mappings and lists; a config needs 3
MAX_ALIASES = 64         # `*name` references in one YAML document
MAX_VALUES = 10_000      # values (scalars, lists, mappings) once aliases are expanded; a config has ~100

# What PyYAML's safe constructors raise on a scalar they cannot build: `2020-13-45` or `!!int 0x`
# (ValueError), an int past Python's digit limit (ValueError), `!!int ""` or `!!float ""`
# (IndexError), `!!bool ""` (KeyError), `!!timestamp ""` (AttributeError).
_CONSTRUCTOR_ERRORS = (ValueError, ArithmeticError, LookupError, AttributeError, TypeError)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def read_text(path: Path, *, error: type[Exception] = ConfigError) -> str:
    """The UTF-8 text of `path`, refused past MAX_BYTES before it is parsed.

    Raises:
        error: the file is larger than MAX_BYTES, or not UTF-8 (OSError is left to the caller: a
            FIFO or device is one, open_regular_binary's).
    """
    with open_regular_binary(path) as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise error(f"{path}: larger than {MAX_BYTES} bytes: not a config file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{path}: not UTF-8 text: {err}") from None


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader that refuses nesting past MAX_DEPTH and aliases past MAX_ALIASES while
    composing, before any object is built (composing and building are recursive in PyYAML)."""

    def __init__(self, stream: str, *, source: str, error: type[Exception]):
        super().__init__(stream)
        self.source, self.error, self.depth, self.aliases = source, error, 0, 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        line = self.peek_event().start_mark.line + 1
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise self.error(f"{self.source}:{line}: more than {MAX_ALIASES} YAML aliases (*name)")
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"{self.source}:{line}: nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml(text: str, *, source: str, error: type[Exception] = ConfigError,
              invalid: type[Exception] | None = None) -> Any:
    """One YAML document (safe tags only) as shared plain data; walk it with `plain_copy`.

    Raises:
        error: nesting past MAX_DEPTH or aliases past MAX_ALIASES; names `source` and the line.
        invalid: (default: `error`) not valid YAML, or a value Python cannot build (a 13th month,
            an int past Python's digit limit).
    """
    loader = None
    try:
        loader = _BoundedLoader(text, source=source, error=error)  # reads and checks the characters
        return loader.get_single_data()
    except error:
        raise
    except yaml.MarkedYAMLError as err:  # one line: file:line:column and the problem
        mark = err.problem_mark or err.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise (invalid or error)(f"{where}: not valid YAML: {err.problem or err.context}") from None
    except (yaml.YAMLError, *_CONSTRUCTOR_ERRORS) as err:
        raise (invalid or error)(f"{source}: not valid YAML: {_one_line(err)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def json_depth(text: str) -> int:
    """How deep the brackets of a JSON text nest (strings skipped), without parsing it."""
    depth = deepest = 0
    for char in _JSON_STRING.sub('""', text):
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def load_json(text: str, *, source: str, error: type[Exception] = ConfigError) -> Any:
    """A JSON value, refused past MAX_DEPTH levels before `json.loads` recurses into it.

    Raises:
        error: nesting past MAX_DEPTH, or not valid JSON (numbers past Python's digit limit
            included); names `source`.
    """
    if json_depth(text) > MAX_DEPTH:
        raise error(f"{source}: nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except ValueError as err:  # JSONDecodeError, and ints past sys.get_int_max_str_digits()
        raise error(f"{source}: not valid JSON: {_one_line(err)}") from None


def plain_copy(value: Any, *, source: str, error: type[Exception] = ConfigError, at: str = "") -> Any:
    """An unshared copy of nested dicts, lists and tuples (tuples become lists), refused when it
    holds more than MAX_VALUES values or nests deeper than MAX_DEPTH, checked value by value so
    that the walk stops there (a shared or recursive structure is never expanded further).

    Raises:
        error: over a bound; names `source` and the dotted path (`at` is the path of `value`).
    """
    budget = [MAX_VALUES]

    def copy(item: Any, path: str, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise error(f"{source}: more than {MAX_VALUES} values once YAML aliases are expanded "
                        f"(at {path or 'the top'})")
        if depth > MAX_DEPTH:
            raise error(f"{source}: {path or 'the top'} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            return {k: copy(v, f"{path}.{_short(k)}" if path else _short(k), depth + 1) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [copy(v, path, depth + 1) for v in item]
        return item

    return copy(value, at, 1)


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _short(key: Any) -> str:
    """A mapping key for a message: at most 40 characters (an int past Python's digit limit too)."""
    try:
        text = key if isinstance(key, str) else repr(key)
    except ValueError:
        text = f"<an int of {key.bit_length()} bits>"
    return text if len(text) <= 40 else text[:37] + "..."


def bounded_lines(handle: Any, where: str, limit: int = LINE_BYTES) -> Iterator[Any]:
    """The lines of `handle` (each with its "\\n", as the handle splits them), read in pieces of at
    most `limit` + 1 so that no line past `limit` is ever held whole: /dev/zero or a file without
    line breaks ends at once, in bounded memory. A handle without `readline` (a list of lines
    already read) is checked line by line.

    Raises:
        DataError: `where:N: a line longer than limit bytes`, at the first such line.
    """
    readline = getattr(handle, "readline", None)
    pieces: Iterable[Any] = (iter(lambda: readline(limit + 1), handle.read(0)) if readline is not None
                             else iter(handle))
    for number, line in enumerate(pieces, 1):
        if len(line) > limit and not (len(line) == limit + 1 and line[-1:] in ("\n", b"\n")):
            raise DataError(f"{where}:{number}: a line longer than {limit} bytes (the most attnmt reads as one "
                            f"line; is it a text file, one sentence per line?)")
        yield line


# ----------------------------------------------------------------------------- zip archives

class ArchiveError(DataError):
    """A stranger's file (a document, a zip archive, a model package) that cannot be read: names the
    file and the part at fault, on one line: a name from inside the file (a zip member's) may hold
    control characters, shown escaped. documents.safety calls it DocumentError."""

    def __init__(self, message: str):
        super().__init__("".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                                 for c in message))


class ArchiveTooLarge(ArchiveError):
    """A file over one of its limits (size, ratio, entries; a document's paragraphs, nesting).
    documents.safety calls it DocumentTooLarge (the service answers 413)."""


RATIO_FLOOR = 1_000_000  # entries smaller than this inflated are not held to max_ratio


@dataclass(frozen=True)
class ZipLimits:
    """What one zip archive may hold (documents.safety.Limits adds a document's own limits)."""

    max_entries: int = 10_000              # files in the zip
    max_unpacked_bytes: int = 256_000_000  # all entries inflated (held in memory)
    max_ratio: float = 200.0               # inflated / compressed, per entry over RATIO_FLOOR bytes


class ZipPackage:
    """The entries of a zip archive, checked before any is inflated: count, encryption, declared
    sizes and compression ratios; each entry is then inflated under a byte budget, so an entry
    that inflates past its declared size is caught as it grows.

    `limits`: any value with max_entries, max_unpacked_bytes and max_ratio (ZipLimits, or
    documents.safety.Limits).

    Raises:
        ArchiveError / ArchiveTooLarge: a corrupt or encrypted archive, or one over `limits`.
    """

    def __init__(self, data: bytes, name: str, limits: ZipLimits):
        self.name = name
        self.limits = limits
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except Exception as err:  # zipfile's refusals: BadZipFile, NotImplementedError, ValueError, ...
            raise ArchiveError(f"{name}: a corrupt zip archive ({type(err).__name__}: {err})") from None
        if len(infos) > limits.max_entries:
            raise ArchiveTooLarge(f"{name}: holds {len(infos)} files; at most {limits.max_entries} are read")
        total = 0
        for info in infos:
            if info.flag_bits & 0x1:
                raise ArchiveError(f"{name}: {info.filename} is encrypted: save the document without a password")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ArchiveError(f"{name}: {info.filename} uses compression method {info.compress_type}; "
                                    f"only stored and deflated entries are read")
            total += info.file_size
            if info.file_size > RATIO_FLOOR and info.file_size > limits.max_ratio * max(info.compress_size, 1):
                raise ArchiveTooLarge(f"{name}: {info.filename} inflates {info.file_size / max(info.compress_size, 1):.0f}"
                                       f"-fold (at most {limits.max_ratio:.0f}): refused as a zip bomb")
        if total > limits.max_unpacked_bytes:
            raise ArchiveTooLarge(f"{name}: its files inflate to {total:,} bytes; at most "
                                   f"{limits.max_unpacked_bytes:,} are read")
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            raise ArchiveError(f"{name}: a zip archive that names one file twice")
        self.infos = {info.filename: info for info in infos}
        self.order = names
        self.inflated = {part: self._inflate(part) for part in names}  # every CRC checked before any work

    def has(self, part: str) -> bool:
        return part in self.infos

    def names(self) -> list[str]:
        return list(self.order)

    def read(self, part: str, *, limit: int | None = None) -> bytes:
        """The inflated bytes of `part` (read once, under its declared size and the limits)."""
        if part not in self.infos:
            raise ArchiveError(f"{self.name}: {part} is missing (not a complete {self._kind()} file)")
        data = self.inflated[part]
        if limit is not None and len(data) > limit:
            raise ArchiveTooLarge(f"{self.name}: {part} is {len(data):,} bytes; at most {limit:,} are read")
        return data

    def _inflate(self, part: str) -> bytes:
        """`part` inflated, stopped as soon as it grows past its declared size."""
        info = self.infos[part]
        budget = info.file_size
        chunks, size = [], 0
        try:
            with self.zip.open(info) as stream:
                while chunk := stream.read(1 << 16):
                    size += len(chunk)
                    if size > budget:  # more than the entry declared: a lying header
                        raise ArchiveTooLarge(f"{self.name}: {part} inflates past its declared "
                                               f"{info.file_size:,} bytes: refused as a zip bomb")
                    chunks.append(chunk)
        except ArchiveError:
            raise
        except Exception as err:  # BadZipFile (a CRC), zlib.error, EOFError, NotImplementedError, ...
            raise ArchiveError(f"{self.name}: {part} is corrupt ({type(err).__name__}: {err})") from None
        return b"".join(chunks)

    def _kind(self) -> str:
        return self.name.rsplit(".", 1)[-1] if "." in self.name else "zip"

    def write(self, replaced: dict[str, bytes]) -> bytes:
        """The archive again, entry for entry in its order, with `replaced` entries' new bytes
        (a `mimetype` entry stays first and stored, as OpenDocument and EPUB require); a part of
        `replaced` the archive does not hold is added after them (deflated, dated 1980-01-01)."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
            for part in self.order:
                info = self.infos[part]
                data = replaced[part] if part in replaced else self.read(part)
                entry = zipfile.ZipInfo(part, date_time=info.date_time)
                entry.external_attr = info.external_attr
                stored = part == "mimetype" or info.compress_type == zipfile.ZIP_STORED
                entry.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
                target.writestr(entry, data)
            for part, data in replaced.items():
                if part not in self.infos:
                    target.writestr(zipfile.ZipInfo(part), data, compress_type=zipfile.ZIP_DEFLATED)
        return out.getvalue()


# ----------------------------------------------------------------------------- a user's file: regular, bounded

MAX_READ_BYTES = 1 << 30  # a file read whole into memory (line files for compare / score, a glossary): 1 GiB
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular_binary(path: str | os.PathLike):
    """`path` open for reading (binary) when it is a regular file; OSError otherwise (a folder:
    IsADirectoryError). Opened without blocking (a FIFO without a writer would wait), checked on
    the open file (no race with a rename), then made blocking for the reads."""
    fd = os.open(path, _READ_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"it is {_kind(mode)}, not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: str | os.PathLike, *, error: type[Exception] | None = AttnmtError, hint: str = ""):
    """A user's file open for reading (binary), when it is a regular file (a link: what it names).
    A FIFO, a device (/dev/zero, through a link too), a socket or a folder is refused before a
    byte is read: attnmt would wait for ever or read without end.

    Raises:
        error: it cannot be opened, or it is not a regular file; names it (and `hint`, said after).
            With `error` None, an OSError of the open (no such file, no permission) is left to the
            caller, and a file of another kind is an AttnmtError.
    """
    try:
        return open_regular_binary(path)
    except IsADirectoryError:
        raise (error or AttnmtError)(f"{path}: is a folder, not a file") from None
    except OSError as err:
        cause = err.strerror or str(err)
        if err.errno == errno.EINVAL and "regular file" in cause:
            link = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
            raise (error or AttnmtError)(f"{path}: {cause}{link}: attnmt reads only regular files{hint}") from None
        if error is None:
            raise
        raise error(f"{path}: cannot read it ({cause})") from None


def read_input(path: str | os.PathLike, *, limit: int = MAX_READ_BYTES, error: type[Exception] = AttnmtError,
               too_large: type[Exception] | None = None, what: str = "a file attnmt reads whole",
               hint: str = "") -> bytes:
    """The bytes of a user's file (`open_regular`), refused past `limit` bytes before they are
    read (and if it grows past them while read).

    Raises:
        error: as open_regular; too_large (default `error`): over `limit`, naming the file, its
            size and the limit.
    """
    with open_regular(path, error=error, hint=hint) as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise (too_large or error)(f"{path}: {max(size, len(data)):,} bytes, over the {limit:,} bytes that attnmt "
                                   f"reads for {what}")
    return data

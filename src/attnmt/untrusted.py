"""Untrusted YAML and JSON read within bounds: size, nesting depth and alias count are checked
before anything is expanded, so a hostile file ends in one error instead of a hang, a
RecursionError or gigabytes of memory (issue 24 items 2 and 9).

    text = read_text(path, error=ConfigError)         # refused past MAX_BYTES, before parsing
    data = load_yaml(text, source=str(path))          # refused past MAX_DEPTH levels or MAX_ALIASES aliases
    data = load_json(text, source=str(path))          # refused past MAX_DEPTH levels
    data = plain_copy(data, source=str(path))         # an unshared copy of at most MAX_VALUES values
    for line in bounded_lines(handle, "in.txt"):      # a text file's lines, none past LINE_BYTES (file:line)

YAML aliases (``*name``) are shared references when loaded: a "billion laughs" file of 9 levels
is a few hundred bytes and a few dozen objects. It grows only when something walks it as a tree,
so `plain_copy` walks it under a value budget and stops at the first value past it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml

from attnmt.bounds import LINE_BYTES
from attnmt.errors import ConfigError, DataError

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
        error: the file is larger than MAX_BYTES, or not UTF-8 (OSError is left to the caller).
    """
    with open(path, "rb") as f:
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

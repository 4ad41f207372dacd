"""gettext catalogues (.po, .pot), read and written by attnmt itself, line by line: what is not a
translated string comes back byte for byte.

    document = PoDocument(data, "de.po", Limits(), "en", Existing())
    document.sentences                  # the msgids (and msgid_plurals) that need a translation
    document.render(translations)       # the same bytes, with those msgstr lines written (and flagged)

Read: the header's `Content-Type: ...; charset=X` says how the file is decoded (ISO-8859-1,
KOI8-R, ...; UTF-8 when it names none or the template's `CHARSET`); it is written back in that
charset (a translation it cannot hold turns the file into UTF-8, the header's charset with it, so
nothing is lost). Every line is checked as msgfmt checks it, and a file that is not a catalogue
is refused naming the line: a string without its closing quote, an unknown escape, text after a
string, a keyword out of its place, msgstr[N] past 99 or out of order, a plural msgid without
plural msgstrs.

Written (localization.py's policy): an entry without a translation gets one, and an entry with
one is kept unless `retranslate`; each translation attnmt writes gets the `fuzzy` flag, and with
`review_below` one less confident also a translator comment `# attnmt: confidence 0.31 (below
0.50)` before its other comments (review.py; a plural entry: its least confident form); the one
an earlier run wrote on an entry written again goes, in every case. A plural entry gets as many
forms as the header's `nplurals` (a file without one: as many as the entry has, at least 2):
msgstr[0] from msgid, the others from msgid_plural. An entry without letters (`%d / %d`) gets
its msgid. Placeholders, tags, URLs and the whitespace and newlines at a
string's two ends come back as they were (protected.py, markup.place_spans). Only the msgstr
lines of the entries written change (wrapped as msgcat wraps, at 79 columns), their flags line
and attnmt's own review comment; the header's empty `Language:` is filled with the target
language; comments, references, msgctxt, obsolete (#~) and previous (#|) entries, the header's
other fields and every other line stay exactly as they were.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from typing import Sequence

from attnmt.documents.localization import FUZZY, Existing
from attnmt.documents.markup import AlignedTranslation
from attnmt.documents.paragraphs import Units, build_unit, plain_text, text
from attnmt.documents.review import AUTHOR, LowConfidence
from attnmt.documents.safety import DocumentError, Limits

CHARSET = re.compile(rb'"Content-Type:[^"\n]*?charset=\s*([-\w.:+]+)', re.IGNORECASE)
NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
KEYWORD = re.compile(r"(msgctxt|msgid_plural|msgid|msgstr)(?:\[(\d*)\])?(?=\s|\")")
MAX_FORMS = 99
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "a": "\a", "b": "\b", "f": "\f", "v": "\v",
           "'": "'", "?": "?"}
WIDTH = 79  # msgcat's default
REVIEW_COMMENT = f"# {AUTHOR}: confidence "  # how attnmt's review comment begins (review.py)


@dataclass
class PoString:
    """A keyword and its string: the lines [first, end) of the file hold it."""

    keyword: str
    value: str
    first: int
    end: int
    index: int | None = None  # msgstr[N]'s N


@dataclass
class PoEntry:
    """An entry: its comment lines start at `start`; `flags` is the line of its `#,` comment;
    a new flags line goes before line `mark_at` (its `#|` lines, or its first keyword);
    `reviews` are the lines of the review comments attnmt wrote on it before."""

    start: int
    flags: int | None = None
    mark_at: int | None = None
    fuzzy: bool = False
    strings: list[PoString] = field(default_factory=list)
    reviews: list[int] = field(default_factory=list)

    def get(self, keyword: str) -> PoString | None:
        return next((s for s in self.strings if s.keyword == keyword), None)

    @property
    def msgstrs(self) -> list[PoString]:
        return [s for s in self.strings if s.keyword == "msgstr"]


def parse_string(value: str, where: str) -> str:
    """The text of one quoted PO string (`"..."`, C escapes).

    Raises:
        DocumentError: naming `where` (file: line N).
    """
    if not value.startswith('"'):
        raise DocumentError(f"{where}: a string must be in double quotes, not {value[:40]!r}")
    out, i, n = [], 1, len(value)
    while i < n:
        char = value[i]
        if char == '"':
            rest = value[i + 1:].strip()
            if rest:
                raise DocumentError(f"{where}: text after the string's closing quote: {rest[:40]!r}")
            return "".join(out)
        if char == "\\":
            if i + 1 >= n:
                break
            escape = value[i + 1]
            if escape in ESCAPES:
                out.append(ESCAPES[escape])
                i += 2
            elif escape in "01234567":
                digits = re.match(r"[0-7]{1,3}", value[i + 1:]).group()
                out.append(chr(int(digits, 8)))
                i += 1 + len(digits)
            elif escape == "x" and re.match(r"[0-9A-Fa-f]", value[i + 2:i + 3]):
                digits = re.match(r"[0-9A-Fa-f]{1,2}", value[i + 2:]).group()
                out.append(chr(int(digits, 16)))
                i += 2 + len(digits)
            else:
                raise DocumentError(f"{where}: an unknown escape sequence \\{escape} in a string")
            continue
        out.append(char)
        i += 1
    raise DocumentError(f"{where}: a string without its closing quote")


def quote(value: str) -> str:
    """`value` as the inside of a PO string (escaped as gettext writes it)."""
    out = []
    for char in value:
        if char == "\\" or char == '"':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return "".join(out)


def string_lines(keyword: str, value: str) -> list[str]:
    """`keyword "value"` as msgcat writes it: one line when it fits in WIDTH columns and has no
    newline before its end; else `keyword ""` and a line for each piece, cut after each newline
    and at the last space that fits (never inside an escape sequence)."""
    escaped = quote(value)
    if "\n" not in value[:-1] and len(keyword) + len(escaped) + 3 <= WIDTH:
        return [f'{keyword} "{escaped}"']
    lines = [f'{keyword} ""']
    line: list[str] = []   # the escaped characters of the line being filled
    size, space = 0, -1    # its length, and the position after its last space
    for char in value:
        token = quote(char)
        if line and size + len(token) + 2 > WIDTH:
            cut = space if space > 0 else len(line)
            lines.append('"' + "".join(line[:cut]) + '"')
            line = line[cut:]
            size = sum(len(t) for t in line)
            space = -1
        line.append(token)
        size += len(token)
        if char == " ":
            space = len(line)
        if char == "\n":
            lines.append('"' + "".join(line) + '"')
            line, size, space = [], 0, -1
    if line:
        lines.append('"' + "".join(line) + '"')
    return lines


def _decode(data: bytes, name: str) -> tuple[str, str, bool]:
    """The file's text, the charset it is in, and whether it began with a UTF-8 byte-order mark."""
    bom = data.startswith(codecs.BOM_UTF8)
    if bom:
        data = data[len(codecs.BOM_UTF8):]
    match = CHARSET.search(data[:1_000_000])
    charset = match.group(1).decode("ascii") if match and not bom else "utf-8"
    if charset.upper() == "CHARSET":  # a template's placeholder
        charset = "utf-8"
    try:
        charset = codecs.lookup(charset).name
    except LookupError:
        line = data.count(b"\n", 0, match.start()) + 1
        raise DocumentError(f"{name}: line {line}: the header's charset {charset!r} is not one attnmt can "
                            f"read") from None
    try:
        return data.decode(charset), charset, bom
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        label = "UTF-8" if charset == "utf-8" else f"{charset} (the charset its header declares)"
        raise DocumentError(f"{name}: line {line}: not valid {label} (byte 0x{data[err.start]:02x} at offset "
                            f"{err.start})") from None


def parse_entries(lines: Sequence[str], name: str) -> list[PoEntry]:
    """The entries of a catalogue's lines (obsolete `#~` entries are comments here).

    Raises:
        DocumentError: naming the line of the first thing msgfmt would refuse.
    """
    entries: list[PoEntry] = []
    entry: PoEntry | None = None
    comments: PoEntry | None = None  # the comment lines read since the last entry
    current: PoString | None = None  # the string continuation lines add to

    def close() -> None:
        nonlocal entry
        if entry is not None:
            _check(entry, name)
            entries.append(entry)
        entry = None

    for i, raw in enumerate(lines):
        line = raw.strip()
        where = f"{name}: line {i + 1}"
        if not line:
            close()
            comments, current = None, None
            continue
        if line.startswith("#"):
            close()
            current = None
            comments = comments or PoEntry(start=i)
            if line.startswith("#,"):
                comments.flags = i
                comments.fuzzy = FUZZY in [flag.strip() for flag in line[2:].split(",")]
            elif line.startswith("#|") and comments.mark_at is None:
                comments.mark_at = i
            elif line.startswith(REVIEW_COMMENT):
                comments.reviews.append(i)
            continue
        if line.startswith('"'):
            if current is None:
                raise DocumentError(f"{where}: a string that continues no keyword")
            current.value += parse_string(line, where)
            current.end = i + 1
            continue
        match = KEYWORD.match(line)
        if match is None:
            raise DocumentError(f"{where}: not a line of a PO file (a keyword msgctxt, msgid, msgid_plural, "
                                f"msgstr, a string or a # comment): {line[:40]!r}")
        keyword, index = match.group(1), match.group(2)
        if index is not None and keyword != "msgstr":
            raise DocumentError(f"{where}: {keyword}[...]: only msgstr has plural forms")
        if index is not None and (not index.isdigit() or len(index) > 2):
            raise DocumentError(f"{where}: msgstr[{index[:24]}]: a plural form's index is a number from 0 to "
                                f"{MAX_FORMS}")
        if keyword in ("msgctxt", "msgid") and entry is not None and entry.msgstrs:
            close()  # an entry that begins without a blank line before it
        if entry is None:
            if keyword not in ("msgctxt", "msgid"):
                raise DocumentError(f"{where}: {keyword} before the msgid it belongs to")
            entry = comments or PoEntry(start=i)
            comments = None
        string = PoString(keyword, parse_string(line[match.end():].strip(), where), i, i + 1,
                          int(index) if index is not None else None)
        _order(entry, string, where)
        if entry.mark_at is None:
            entry.mark_at = i
        entry.strings.append(string)
        current = string
    close()
    return entries


def _order(entry: PoEntry, string: PoString, where: str) -> None:
    """Keywords in gettext's order: [msgctxt] msgid [msgid_plural] msgstr | msgstr[0] msgstr[1] ..."""
    seen = [s.keyword for s in entry.strings]
    allowed = {"msgctxt": not seen, "msgid": seen in ([], ["msgctxt"]),
               "msgid_plural": bool(seen) and seen[-1] == "msgid",
               "msgstr": bool(seen) and seen[-1] in ("msgid", "msgid_plural", "msgstr")}[string.keyword]
    if not allowed:
        raise DocumentError(f"{where}: {string.keyword} out of its place (after {seen[-1] if seen else 'nothing'})")
    plural = "msgid_plural" in seen
    if string.keyword == "msgstr":
        earlier = entry.msgstrs
        if plural != (string.index is not None):
            raise DocumentError(f"{where}: " + ("a plural entry's translations are msgstr[0], msgstr[1], ..."
                                                if plural else "msgstr[N] in an entry without msgid_plural"))
        if earlier and not plural:
            raise DocumentError(f"{where}: a second msgstr in one entry")
        if plural and string.index != len(earlier):
            raise DocumentError(f"{where}: msgstr[{string.index}] where msgstr[{len(earlier)}] comes next")


def _check(entry: PoEntry, name: str) -> None:
    if entry.get("msgid") is None:
        raise DocumentError(f"{name}: line {entry.start + 1}: an entry without a msgid")
    if not entry.msgstrs:
        line = entry.strings[-1].first + 1
        raise DocumentError(f"{name}: line {line}: a msgid without its msgstr")


def _header_fields(value: str) -> dict[str, str]:
    fields = {}
    for line in value.split("\n"):
        key, sep, rest = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), rest.strip())
    return fields


class PoDocument:
    def __init__(self, data: bytes, name: str, limits: Limits, target_lang: str | None = None,
                 existing: Existing = Existing(), *, review_below: float | None = None):
        source, self.charset, self.bom = _decode(data, name)
        self.name = name
        self.lines = [line + "\n" for line in source.split("\n")]  # only "\n" ends a line (not \f, U+2028)
        self.lines[-1] = self.lines[-1][:-1]
        if not self.lines[-1]:
            self.lines.pop()
        entries = parse_entries(self.lines, name)
        header = next((e for e in entries if e.get("msgid").value == "" and e.get("msgctxt") is None), None)
        fields = _header_fields(header.msgstrs[0].value) if header is not None else {}
        match = NPLURALS.search(fields.get("plural-forms", ""))
        self.nplurals = int(match.group(1)) if match else None
        if self.nplurals is not None and not 1 <= self.nplurals <= MAX_FORMS:
            raise DocumentError(f"{name}: line {header.start + 1}: the header's nplurals={self.nplurals}; "
                                f"a language has from 1 to {MAX_FORMS} plural forms")
        self.edits: dict[int, tuple[int, list[str]]] = {}  # first line -> (end line, new lines)
        self.inserts: dict[int, list[str]] = {}            # line -> the lines put before it
        if header is not None and target_lang and fields.get("language", None) == "":
            self._fill_language(header, target_lang)
        self.units = Units(name, limits.max_paragraphs, review_below)
        todo = [e for e in entries if e is not header and e.get("msgid").value]
        self.units.count(len(todo), name)
        self.values: dict[int, list[str | None]] = {}  # entry number -> each form's new text
        self.review: dict[int, LowConfidence] = {}     # entry number -> its least confident form's mark
        self.entries = todo
        for number, entry in enumerate(todo):
            forms = entry.msgstrs
            if not existing.translates(has_translation=any(s.value for s in forms)):
                continue
            msgid, plural = entry.get("msgid").value, entry.get("msgid_plural")
            count = 1 if plural is None else (self.nplurals or max(len(forms), 2))
            sources = [msgid] + [plural.value] * (count - 1) if plural is not None else [msgid]
            self.values[number] = [None] * len(sources)
            for form, text_ in enumerate(sources):
                self._add(number, form, text_)

    def _add(self, number: int, form: int, source: str) -> None:
        def store(content, base) -> None:
            self.values[number][form] = plain_text(content)

        def mark(note: LowConfidence) -> None:
            if number not in self.review or note.confidence < self.review[number].confidence:
                self.review[number] = note

        unit = build_unit([text(source)], store)
        if unit is None:
            self.values[number][form] = source  # nothing to translate: the same text
        else:
            unit.mark = mark
        self.units.add(unit)

    def _fill_language(self, header: PoEntry, target_lang: str) -> None:
        string = header.msgstrs[0]
        for i in range(string.first, string.end):
            line = self.lines[i]
            body = line.rstrip("\r\n")
            if re.fullmatch(r'\s*(msgstr\s+)?"Language:\s*(\\n)?"\s*', body):
                prefix = body[:body.index('"')]
                self.edits[i] = (i + 1, [f'{prefix}"Language: {quote(target_lang)}\\n"' + line[len(body):]])
                return

    @property
    def sentences(self) -> list[str]:
        return self.units.sentences

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        self.units.render(translations)
        for number, values in self.values.items():
            entry = self.entries[number]
            old = entry.msgstrs
            ending = _ending(self.lines[old[0].first]) or "\n"
            last_ending = _ending(self.lines[old[-1].end - 1])
            new: list[str] = []
            for form, value in enumerate(values):
                keyword = "msgstr" if entry.get("msgid_plural") is None else f"msgstr[{form}]"
                new.extend(line + ending for line in string_lines(keyword, value or ""))
            new[-1] = new[-1][:-len(ending)] + last_ending
            self.edits[old[0].first] = (old[-1].end, new)
            for line in entry.reviews:  # the mark of a translation that is no longer there
                self.edits[line] = (line + 1, [])
            if number in self.review:  # a translator comment: first, before the flags
                self.inserts.setdefault(entry.start, []).append(f"# {AUTHOR}: {self.review[number].text}{ending}")
            if not entry.fuzzy:
                if entry.flags is not None:
                    flags = self.lines[entry.flags]
                    body = flags.rstrip("\r\n")
                    self.edits[entry.flags] = (entry.flags + 1, [f"{body}, {FUZZY}{flags[len(body):]}"])
                else:
                    self.inserts.setdefault(entry.mark_at, []).append(f"#, {FUZZY}{ending}")
        out, i = [], 0
        while i < len(self.lines):
            if i in self.inserts:
                out.extend(self.inserts[i])
            if i in self.edits:
                end, replacement = self.edits[i]
                out.extend(replacement)
                i = end
            else:
                out.append(self.lines[i])
                i += 1
        return self._encode("".join(out))

    def _encode(self, text_: str) -> bytes:
        bom = codecs.BOM_UTF8 if self.bom else b""
        try:
            return bom + text_.encode(self.charset)
        except UnicodeEncodeError:  # a translation the file's charset cannot hold: the file becomes UTF-8
            converted = re.sub(r'("Content-Type:[^"\n]*?charset=\s*)[-\w.:+]+', r"\g<1>UTF-8", text_, count=1,
                               flags=re.IGNORECASE)
            return bom + converted.encode("utf-8")


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]

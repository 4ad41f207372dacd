"""Text without a zip around it: .txt (line by line), .html (markup.py) and .pdf (text out).

A .txt file keeps every line: empty lines and lines without letters as they are, each line's
indentation and "\\r" around its translation. A .pdf comes back as .txt: pypdf (BSD) extracts the
text of each page; lines are joined into paragraphs (a blank line, or a short line ending a
sentence, ends one; a hyphen at a line's end joins the word), each paragraph translated and
written on its own line, a blank line between paragraphs and a form feed between pages. Layout,
fonts and pictures are not kept: writing a PDF back would need its text positions re-flowed.
The work a PDF may take is bounded (Limits.max_pdf_stream_bytes: its pages' content streams
inflated; Limits.max_pdf_operations: operations pypdf's extraction runs, a form drawn N times
counted N times), and lines are joined in linear time.
"""

from __future__ import annotations

import io
import re
from typing import Sequence

from attnmt.documents.paragraphs import Units, build_unit, plain_text, text
from attnmt.documents.safety import DocumentError, DocumentTooLarge, Limits
from attnmt.documents.markup import AlignedTranslation, MarkupDocument

MAX_PAGES = 5_000


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 text (a byte-order mark dropped); DocumentError naming the offset otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DocumentError(f"{name}: not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})") from None


class _Lines:
    """Lines written back in place: `lines[i]` becomes the plain text of unit i's translation."""

    def __init__(self, lines: list[str], name: str, limits: Limits, *, joiner: str = "\n"):
        self.lines = lines
        self.joiner = joiner
        self.units = Units(name, limits.max_paragraphs)
        self.units.count(len(lines), name)
        for i, line in enumerate(lines):
            self.units.add(build_unit([text(line)], self._writer(i)))

    def _writer(self, i: int):
        def write(content, base) -> None:
            self.lines[i] = plain_text(content)
        return write

    @property
    def sentences(self) -> list[str]:
        return self.units.sentences

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        self.units.render(translations)
        return self.joiner.join(self.lines).encode("utf-8")


class TextDocument(_Lines):
    """A .txt file, line by line."""

    def __init__(self, data: bytes, name: str, limits: Limits):
        super().__init__(decode_text(data, name).split("\n"), name, limits)


class HtmlDocument:
    """An .html file: markup.MarkupDocument (blocks as sentences, inline tags placed by alignment).
    HTML that cannot be parsed, or nests past markup.MAX_DEPTH, is a DocumentError as `format:
    "html"` answers it (400), not a limit."""

    def __init__(self, data: bytes, name: str, limits: Limits):
        html = decode_text(data, name)
        try:
            self.markup = MarkupDocument(html)
        except Exception as err:  # the parser's or markup's refusal (nested past markup.MAX_DEPTH)
            raise DocumentError(f"{name} is not HTML that can be translated: {err}") from None
        Units(name, limits.max_paragraphs).count(len(self.markup.runs), name)

    @property
    def sentences(self) -> list[str]:
        return self.markup.sentences

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        return self.markup.render(list(translations)).encode("utf-8")


SENTENCE_END = re.compile(r"[.!?:;\"'»”)]\s*$")


def pdf_paragraphs(page_text: str) -> list[str]:
    """A page's extracted lines joined into paragraphs, in time linear in the text (each
    paragraph's lines are joined once, at its end)."""
    lines = [line.strip() for line in page_text.splitlines()]
    longest = max((len(line) for line in lines), default=0)
    paragraphs: list[str] = []
    current: list[str] = []  # the lines (and the spaces between them) of the paragraph being read

    def end() -> None:
        if current:
            paragraphs.append("".join(current))
            current.clear()

    for line in lines:
        if not line:
            end()
            continue
        last = current[-1] if current else ""
        if last.endswith("-") and len(last) > 1 and last[-2].isalpha() and line[:1].islower():
            current[-1] = last[:-1]  # a word hyphenated across the line end, joined
        elif current:
            current.append(" ")
        current.append(line)
        if SENTENCE_END.search(line) and len(line) < 0.7 * longest:
            end()
    end()
    return paragraphs


class _PdfBudget:
    """The work a PDF's text may take: content-stream operations, counted as pypdf's extraction
    runs them (a Form XObject drawn 1,000 times counts 1,000 times), stopped past the limit."""

    class Spent(Exception):
        pass

    def __init__(self, limit: int):
        self.limit = limit
        self.count = 0

    def visit(self, operator, operands, cm, tm) -> None:
        self.count += 1
        if self.count > self.limit:
            raise self.Spent()


def _stream_bytes(page, limit: int) -> int:
    """The inflated bytes of a page's contents and of every Form XObject it can draw (each
    counted once), checked as each is inflated (pypdf bounds each stream's inflation)."""
    from pypdf.generic import IndirectObject

    total = len(page.get_contents().get_data()) if page.get_contents() is not None else 0
    seen, stack = set(), [page.get("/Resources")]
    while stack and total <= limit:
        resources = stack.pop()
        resources = resources.get_object() if isinstance(resources, IndirectObject) else resources
        if not hasattr(resources, "get"):
            continue
        xobjects = resources.get("/XObject")
        xobjects = xobjects.get_object() if xobjects is not None else {}
        for ref in (xobjects.values() if hasattr(xobjects, "values") else ()):
            key = (ref.idnum, ref.generation) if isinstance(ref, IndirectObject) else id(ref)
            if key in seen:
                continue
            seen.add(key)
            xobject = ref.get_object()
            if getattr(xobject, "get", lambda k: None)("/Subtype") == "/Form":
                total += len(xobject.get_data())
                stack.append(xobject.get("/Resources"))
    return total


class PdfDocument(_Lines):
    """A .pdf file's text (pypdf), translated into a .txt."""

    output_suffix = ".txt"

    def __init__(self, data: bytes, name: str, limits: Limits):
        from pypdf import PdfReader

        try:
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted and not reader.decrypt(""):
                raise DocumentError(f"{name}: the PDF is encrypted: save it without a password")
            count = len(reader.pages)
        except DocumentError:
            raise
        except Exception as err:  # pypdf's many kinds of refusal of a broken file
            raise DocumentError(f"{name}: a PDF that cannot be read ({type(err).__name__}: {err})") from None
        if count > MAX_PAGES:
            raise DocumentTooLarge(f"{name}: {count} pages; at most {MAX_PAGES} are read")
        budget = _PdfBudget(limits.max_pdf_operations)
        lines: list[str] = []
        for number in range(count):
            where = f"{name}: page {number + 1}"
            try:
                page = reader.pages[number]
                size = _stream_bytes(page, limits.max_pdf_stream_bytes)
                if size > limits.max_pdf_stream_bytes:
                    raise DocumentTooLarge(f"{where}: its content streams inflate past "
                                           f"{limits.max_pdf_stream_bytes:,} bytes; at most that is read")
                page_text = page.extract_text(visitor_operand_before=budget.visit) or ""
            except (DocumentError, _PdfBudget.Spent) as err:
                if isinstance(err, DocumentError):
                    raise
                raise DocumentTooLarge(f"{where}: the PDF's pages draw more than {budget.limit:,} operations "
                                       f"up to here; at most that many are read (extract its text "
                                       f"with another tool and translate the .txt)") from None
            except Exception as err:
                if budget.count > budget.limit:  # pypdf wrapped the stop in an error of its own
                    raise DocumentTooLarge(f"{where}: the PDF's pages draw more than {budget.limit:,} "
                                           f"operations up to here; at most that many are read") from None
                raise DocumentError(f"{where}: its text cannot be extracted "
                                    f"({type(err).__name__}: {err})") from None
            if number:
                lines.append("\f")
            for paragraph in pdf_paragraphs(page_text):
                lines.extend([paragraph, ""])
        if not any(line.strip() for line in lines):
            raise DocumentError(f"{name}: the PDF has no text to extract (a scan needs OCR first)")
        super().__init__(lines, name, limits)

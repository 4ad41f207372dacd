"""Word (.docx), PowerPoint (.pptx), OpenDocument text (.odt) and presentations (.odp): zip
archives of XML parts, translated part by part, every other entry copied as it was.

Which parts hold text that is translated:
- .docx: word/document.xml (body, tables, text boxes), header*.xml, footer*.xml, footnotes.xml,
  endnotes.xml, comments.xml; paragraphs are w:p (xml_text.WORD).
- .pptx: ppt/slides/slide*.xml, ppt/notesSlides/notesSlide*.xml (speaker notes); a:p (DRAWING).
  Layouts and masters (their "Click to add title" prompts) are left alone.
- .odt, .odp: content.xml and styles.xml (headers, footers); text:p and text:h (ODF), notes,
  frames and text boxes included. An .odt may be a text document, its template (.ott), a
  Writer/Web document (.oth, mimetype ...opendocument.text-web) or a master document (.odm);
  an .odp a presentation or its template (.otp).

With `review_below`, a paragraph of the body (word/document.xml; content.xml) translated less
confidently gets a comment (comments.py: a Word comment in a .docx, an annotation in an .odt);
headers, footers, notes and the comments themselves get none, and neither do slides (review.py).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Sequence

from attnmt.documents.comments import OdfAnnotations, WordComments
from attnmt.documents.paragraphs import Units
from attnmt.documents.safety import DocumentError, Limits, ZipPackage, parse_xml, serialize_xml
from attnmt.documents.xml_text import (CODE_STYLE, DRAWING, WORD, MixedDialect, RunDialect, mixed_unit,
                                       run_unit)
from attnmt.documents.markup import AlignedTranslation

TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def _t(name: str) -> str:
    return f"{{{TEXT_NS}}}{name}"


def _odf_code(element) -> bool:
    return bool(CODE_STYLE.search(element.get(_t("style-name"), "")))


ODF = MixedDialect(groups=frozenset({_t("a"), _t("meta"), _t("ruby-base")}), styles=frozenset({_t("span")}),
                   breaks=frozenset({_t("tab"), _t("line-break")}), spaces=_t("s"), spaces_count=_t("c"),
                   code=_odf_code)

# suffix -> (required part, parts translated (a pattern), paragraph tags, dialect)
FORMATS = {
    ".docx": ("word/document.xml", re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml"),
              (f"{{{WORD.ns}}}p",), WORD),
    ".pptx": ("ppt/presentation.xml", re.compile(r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml"),
              (f"{{{DRAWING.ns}}}p",), DRAWING),
    ".odt": ("content.xml", re.compile(r"(content|styles)\.xml"), (_t("p"), _t("h")), ODF),
    ".odp": ("content.xml", re.compile(r"(content|styles)\.xml"), (_t("p"), _t("h")), ODF),
}
_ODF_TYPE = "application/vnd.oasis.opendocument"
# the mimetypes a zip read as .odt / .odp may declare: the document, its template, and (Writer)
# LibreOffice's Writer/Web and master documents, whose content.xml is a text document's
MIMETYPES = {".odt": frozenset(f"{_ODF_TYPE}.{kind}" for kind in ("text", "text-template", "text-web",
                                                                  "text-master", "text-master-template")),
             ".odp": frozenset(f"{_ODF_TYPE}.{kind}" for kind in ("presentation", "presentation-template"))}
REVIEWED_PART = {".docx": "word/document.xml", ".odt": "content.xml"}  # whose paragraphs get review comments


def _part_order(name: str) -> tuple:
    """Slides and headers in their numeric order (slide2 before slide10)."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


class OfficeDocument:
    """A .docx, .pptx, .odt or .odp: `sentences`, then `render(translations)` -> the file's bytes
    (a body paragraph less confident than `review_below` commented: .docx, .odt)."""

    def __init__(self, data: bytes, suffix: str, name: str, limits: Limits, *, review_below: float | None = None):
        required, parts, tags, dialect = FORMATS[suffix]
        self.package = ZipPackage(data, name, limits)
        if not self.package.has(required):
            raise DocumentError(f"{name}: not a {suffix} file ({required} is missing)")
        if suffix in MIMETYPES and self.package.has("mimetype"):
            mimetype = self.package.read("mimetype", limit=200).decode("ascii", "replace").strip()
            if mimetype not in MIMETYPES[suffix]:
                raise DocumentError(f"{name}: not a {suffix} file (its mimetype is {mimetype[:80]!r})")
        self.units = Units(name, limits.max_paragraphs, review_below)
        self.trees = {}
        self.marks = (WordComments(self.package, self.trees, limits) if suffix == ".docx" else
                      OdfAnnotations() if suffix == ".odt" else None)  # what writes the review comments
        for part in sorted((p for p in self.package.names() if parts.fullmatch(p)), key=_part_order):
            where = f"{name}: {part}"
            root = parse_xml(self.package.read(part), where, limits)
            self.trees[part] = root
            paragraphs = list(root.iter(*tags))  # document order; a note's paragraphs after their own
            self.units.count(len(paragraphs), where)
            reviewed = review_below is not None and part == REVIEWED_PART.get(suffix)
            for paragraph in paragraphs:
                if isinstance(dialect, RunDialect):
                    unit = run_unit(paragraph, dialect, limit=limits.max_depth, where=where)
                elif dialect.code(paragraph):  # a code paragraph stays as it is
                    continue
                else:
                    unit = mixed_unit(paragraph, dialect, limit=limits.max_depth, where=where)
                if unit is not None and reviewed and self.marks.anchors(paragraph):
                    unit.mark = partial(self.marks.add, paragraph)
                self.units.add(unit)

    @property
    def sentences(self) -> list[str]:
        return self.units.sentences

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        self.units.render(translations)
        parts = {part: serialize_xml(root) for part, root in self.trees.items()}
        return self.package.write({**parts, **(self.marks.parts() if self.marks is not None else {})})

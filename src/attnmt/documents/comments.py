"""Review marks as the office formats' own comments (review.py): a Word comment in a .docx, an
OpenDocument annotation in an .odt, each by "attnmt" and spanning the paragraph it is about.

    comments = WordComments(package, trees, limits)  # the .docx's zip and its parsed parts (office.py)
    comments.add(paragraph, note)     # a w:p of word/document.xml, a review.LowConfidence
    comments.parts()                  # what to write: comments.xml, its relationship, its content type

    OdfAnnotations().add(paragraph, note)   # a text:p / text:h of content.xml; nothing more to write

Word (ISO/IEC 29500-1, 17.13.4): the comment's text is a w:comment of word/comments.xml (the
part, its relationship from word/document.xml and its [Content_Types].xml override are made when
the document has none); the paragraph gets w:commentRangeStart after its properties, and
w:commentRangeEnd and a run holding w:commentReference at its end. ODF 1.2 (part 1, 14.1-2): an
office:annotation (dc:creator, a text:p) opens the paragraph and an office:annotation-end of the
same office:name closes it, so the comment covers the paragraph's text. Only elements are added:
the paragraph's runs, spans and text stay as the translation wrote them.
"""

from __future__ import annotations

from typing import Any

from lxml import etree

from attnmt.documents.review import AUTHOR, LowConfidence
from attnmt.documents.safety import Limits, parse_xml, serialize_xml
from attnmt.documents.xml_text import W

COMMENTS_PART = "word/comments.xml"
RELATIONSHIPS_PART = "word/_rels/document.xml.rels"
CONTENT_TYPES_PART = "[Content_Types].xml"
COMMENTS_TYPE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/comments"
COMMENTS_MEDIA = "application/vnd.openxmlformats-officedocument.wordprocessingml.comments+xml"
PACKAGE_RELATIONSHIPS = "http://schemas.openxmlformats.org/package/2006/relationships"
CONTENT_TYPES = "http://schemas.openxmlformats.org/package/2006/content-types"

FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"

OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
DC = "http://purl.org/dc/elements/1.1/"


def _w(name: str) -> str:
    return f"{{{W}}}{name}"


class WordComments:
    """The comments added to one .docx: `add` anchors one around a paragraph, `parts` gives the
    parts to write back (none while nothing was added, so a document without marks is unchanged).

    Args:
        package: the document's safety.ZipPackage (its relationships and content types are read from it).
        trees: the parsed parts being translated (office.py): word/comments.xml among them when the
            document has comments, which the new ones join.
        limits: what the relationships and content types may hold when they are read.
    """

    def __init__(self, package, trees: dict[str, Any], limits: Limits):
        self.package = package
        self.trees = trees
        self.limits = limits
        self.root = None    # word/comments.xml's tree, the document's own or a new one
        self.made = False   # the part is new: it needs its relationship and content type
        self.next_id: int | None = None
        self.added = 0

    def _take_id(self) -> str:
        """A w:id no comment, bookmark or revision of the parts uses (they share one space)."""
        if self.next_id is None:
            used = [int(value) for tree in self.trees.values() for element in tree.iter()
                    if (value := element.get(_w("id"))) is not None and value.lstrip("-").isdigit()]
            self.next_id = max(used, default=-1) + 1
        self.next_id += 1
        return str(self.next_id - 1)

    def add(self, paragraph, note: LowConfidence) -> None:
        """A comment by AUTHOR saying `note`, around the whole of `paragraph` (a w:p)."""
        if self.root is None:
            self.root = self.trees.get(COMMENTS_PART)
            self.made = self.root is None
            if self.made:
                self.root = etree.Element(_w("comments"), nsmap={"w": W})
        number = self._take_id()
        properties = paragraph.find(_w("pPr"))
        start = etree.Element(_w("commentRangeStart"), {_w("id"): number})
        paragraph.insert(paragraph.index(properties) + 1 if properties is not None else 0, start)
        etree.SubElement(paragraph, _w("commentRangeEnd"), {_w("id"): number})
        reference = etree.SubElement(paragraph, _w("r"))
        etree.SubElement(reference, _w("commentReference"), {_w("id"): number})
        comment = etree.SubElement(self.root, _w("comment"), {_w("id"): number, _w("author"): AUTHOR,
                                                              _w("initials"): AUTHOR})
        run = etree.SubElement(etree.SubElement(comment, _w("p")), _w("r"))
        etree.SubElement(run, _w("t")).text = note.comment
        self.added += 1

    @staticmethod
    def anchors(paragraph) -> bool:
        """Whether a comment goes on `paragraph`: not in an mc:Fallback (a copy of a text box that
        Word draws only when it cannot read the mc:Choice beside it, whose paragraph has its own)."""
        return not any(ancestor.tag == FALLBACK for ancestor in paragraph.iterancestors())

    def parts(self) -> dict[str, bytes]:
        """The parts the comments change: word/comments.xml, and when it is new the document's
        relationships and content types (made when the package has none); {} when none was added."""
        if not self.added:
            return {}
        out = {COMMENTS_PART: serialize_xml(self.root)}
        if self.made:
            out[RELATIONSHIPS_PART] = self._relate()
            out[CONTENT_TYPES_PART] = self._declare()
        return out

    def _read(self, part: str, root: str):
        """The package's `part`, or a new one whose root is `root` (a package without it)."""
        if self.package.has(part):
            return parse_xml(self.package.read(part), f"{self.package.name}: {part}", self.limits)
        return etree.Element(root, nsmap={None: etree.QName(root).namespace})

    def _relate(self) -> bytes:
        relationships = self._read(RELATIONSHIPS_PART, f"{{{PACKAGE_RELATIONSHIPS}}}Relationships")
        ids = {element.get("Id") for element in relationships}
        number = 1
        while f"rId{number}" in ids:
            number += 1
        etree.SubElement(relationships, f"{{{PACKAGE_RELATIONSHIPS}}}Relationship",
                         {"Id": f"rId{number}", "Type": COMMENTS_TYPE, "Target": "comments.xml"})
        return serialize_xml(relationships)

    def _declare(self) -> bytes:
        types = self._read(CONTENT_TYPES_PART, f"{{{CONTENT_TYPES}}}Types")
        etree.SubElement(types, f"{{{CONTENT_TYPES}}}Override",
                         {"PartName": f"/{COMMENTS_PART}", "ContentType": COMMENTS_MEDIA})
        return serialize_xml(types)


class OdfAnnotations:
    """The annotations added to one .odt: `add` spans one over a paragraph (as WordComments: `anchors`, `parts`)."""

    def __init__(self):
        self.added = 0
        self.names: set[str] | None = None  # the office:name values the document's annotations use

    def _take_name(self, paragraph) -> str:
        if self.names is None:
            self.names = {element.get(f"{{{OFFICE}}}name") for element in paragraph.getroottree().iter(
                f"{{{OFFICE}}}annotation", f"{{{OFFICE}}}annotation-end")}
        self.added += 1
        while f"attnmt-review-{self.added}" in self.names:  # a document attnmt marked before
            self.added += 1
        return f"attnmt-review-{self.added}"

    def add(self, paragraph, note: LowConfidence) -> None:
        """An office:annotation by AUTHOR saying `note` at the start of `paragraph` (a text:p or
        text:h), closed by its office:annotation-end after the paragraph's last content."""
        name = self._take_name(paragraph)
        annotation = etree.Element(f"{{{OFFICE}}}annotation", {f"{{{OFFICE}}}name": name},
                                   nsmap={"office": OFFICE, "dc": DC, "text": TEXT})
        etree.SubElement(annotation, f"{{{DC}}}creator").text = AUTHOR
        etree.SubElement(annotation, f"{{{TEXT}}}p").text = note.comment
        annotation.tail, paragraph.text = paragraph.text, None  # the paragraph's first text follows it
        paragraph.insert(0, annotation)
        etree.SubElement(paragraph, f"{{{OFFICE}}}annotation-end", {f"{{{OFFICE}}}name": name})

    @staticmethod
    def anchors(paragraph) -> bool:
        """Whether an annotation goes on `paragraph`: not on an annotation's own text (an
        annotation holds none)."""
        return not any(ancestor.tag == f"{{{OFFICE}}}annotation" for ancestor in paragraph.iterancestors())

    def parts(self) -> dict[str, bytes]:
        """The parts the annotations add besides content.xml: none (they live in its paragraphs)."""
        return {}

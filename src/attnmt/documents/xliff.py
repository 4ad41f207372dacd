"""XLIFF 1.0, 1.1, 1.2 and 2.0 (lxml): each <source> that has no translation gets a <target>.

    document = XliffDocument(data, "app.xlf", Limits(), "en", Existing())
    document.sentences; document.render(translations)    # the same XML, targets written and marked

1.x (1.1 is what translate-toolkit and many tools write; 1.0 and 1.1 also without a namespace):
each trans-unit; 2.0: each segment. The <target> is a copy of the <source> with its text
translated; inline codes (<g>, <pc>, <mrk> wrap text; <x/>, <ph>, <bpt>, <ept>, <sc>, <ec>, ...
are kept whole) placed by alignment, placeholders and URLs kept (protected.py). Units with
translate="no" (or inside a group with it) are left alone. A unit whose <target> has text is kept
as it is (localization.py's policy), unless `retranslate`; each target attnmt writes is marked
for review (1.x: state="needs-review-translation" state-qualifier="mt-suggestion", the unit's
`approved` removed; 2.0: the segment's state="initial" subState="attnmt:mt"). The file's
target-language (1.x) / trgLang (2.0) is set where a target is written and none is given.

With `review_below`, a target less confident also gets a note (review.py), where the schema
puts notes: 1.x `<note from="attnmt" priority="1">confidence 0.31 (below 0.50)</note>` after the
<target>; 2.0 `<note category="attnmt" priority="1">` in the unit's <notes> (made before its
<originalData> and segments when it has none), naming the segment when the unit has several.
A note attnmt left on a target it writes again goes, in every case.
"""

from __future__ import annotations

import copy
from typing import Sequence

from lxml import etree

from attnmt.documents.localization import (XLIFF1_QUALIFIER, XLIFF1_STATE, XLIFF2_STATE, XLIFF2_SUBSTATE,
                                           Existing)
from attnmt.documents.markup import AlignedTranslation
from attnmt.documents.paragraphs import Units, build_unit
from attnmt.documents.review import AUTHOR, LowConfidence
from attnmt.documents.safety import DocumentError, Limits, parse_xml, serialize_xml
from attnmt.documents.xml_text import MixedDialect, fill_mixed, mixed_pieces

XLIFF10 = "urn:oasis:names:tc:xliff:document:1.0"
XLIFF11 = "urn:oasis:names:tc:xliff:document:1.1"
XLIFF12 = "urn:oasis:names:tc:xliff:document:1.2"
XLIFF20 = "urn:oasis:names:tc:xliff:document:2.0"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


def _name(ns: str | None, local: str) -> str:
    return f"{{{ns}}}{local}" if ns else local


def _dialect(ns: str | None, groups: str) -> MixedDialect:
    return MixedDialect(groups=frozenset(_name(ns, g) for g in groups.split()))


VERSION_1 = "g mrk"    # 1.x: <g>, <mrk> wrap text; <x/>, <bx/>, <ex/>, <ph>, <bpt>, <ept>, <it>, <sub>: atoms
VERSION_2 = "pc mrk"   # 2.0: <pc>, <mrk> wrap text; <ph/>, <sc/>, <ec/>, <cp/>: atoms
NAMESPACES = {XLIFF10: 1, XLIFF11: 1, XLIFF12: 1, XLIFF20: 2, None: 1}


def _has_text(element) -> bool:
    return element is not None and ("".join(element.itertext()).strip() != "" or len(element) > 0)


def _translatable(element) -> bool:
    """No translate="no" on it or on a <group> or <file> around it."""
    while element is not None:
        if element.get("translate", "yes") == "no":
            return False
        element = element.getparent()
    return True


class XliffDocument:
    def __init__(self, data: bytes, name: str, limits: Limits, target_lang: str | None = None,
                 existing: Existing = Existing(), *, review_below: float | None = None):
        self.root = parse_xml(data, name, limits)
        root_name = etree.QName(self.root)
        ns = root_name.namespace
        if root_name.localname != "xliff" or ns not in NAMESPACES:
            raise DocumentError(f"{name}: not an XLIFF 1.0, 1.1, 1.2 or 2.0 file (its root is {self.root.tag!r})")
        version = NAMESPACES[ns]
        if ns is None and self.root.get("version", "1.2") not in ("1.0", "1.1", "1.2"):
            raise DocumentError(f"{name}: an XLIFF root without a namespace must be version 1.0, 1.1 or 1.2, "
                                f"not {self.root.get('version')!r}")
        dialect = _dialect(ns, VERSION_1 if version == 1 else VERSION_2)
        q = lambda local: _name(ns, local)  # noqa: E731
        holders = list(self.root.iter(q("trans-unit") if version == 1 else q("segment")))
        self.units = Units(name, limits.max_paragraphs, review_below)
        self.units.count(len(holders), name)
        written_files = set()
        for number, holder in enumerate(holders, 1):
            unit_element = holder if version == 1 else holder.getparent()
            if not _translatable(unit_element):
                continue
            source = holder.find(q("source"))
            if source is None:
                raise DocumentError(f"{name}: {etree.QName(holder).localname} {holder.get('id') or number} "
                                    f"(line {holder.sourceline}) has no <source>")
            old = holder.find(q("target"))
            if not existing.translates(has_translation=_has_text(old)):
                continue
            where = f"{name}: line {holder.sourceline}"
            target = copy.deepcopy(source)
            target.tag = q("target")
            for attribute in list(target.attrib):
                if attribute != XML_SPACE:
                    del target.attrib[attribute]
            pieces = mixed_pieces(target, dialect, 0, limits.max_depth, where)
            unit = build_unit(pieces, lambda content, base, t=target: fill_mixed(t, content, base), styled=True)
            if unit is None and _has_text(old):
                continue  # nothing to translate, and a target there already
            if old is not None:
                for attribute, value in old.attrib.items():  # xml:lang and the like, not its state
                    if attribute not in ("state", "state-qualifier") and attribute not in target.attrib:
                        target.set(attribute, value)
                target.tail = old.tail
                holder.replace(old, target)
            else:
                target.tail = source.tail
                source.addnext(target)
            self._mark(holder, target, version)
            _drop_old_notes(holder, version, q)
            written_files.add(next((a for a in holder.iterancestors(q("file"))), None))
            if unit is not None and version == 1:
                unit.mark = lambda note, t=target: _note_1(t, note)
            elif unit is not None:
                unit.mark = lambda note, h=holder: _note_2(h, note, q)
            self.units.add(unit)
        if target_lang and version == 1:
            for file in written_files:
                if file is not None and not file.get("target-language"):
                    file.set("target-language", target_lang)
        elif target_lang and written_files and not self.root.get("trgLang"):
            self.root.set("trgLang", target_lang)

    @staticmethod
    def _mark(holder, target, version: int) -> None:
        if version == 1:
            target.set("state", XLIFF1_STATE)
            target.set("state-qualifier", XLIFF1_QUALIFIER)
            if "approved" in holder.attrib:
                del holder.attrib["approved"]
        else:
            holder.set("state", XLIFF2_STATE)
            holder.set("subState", XLIFF2_SUBSTATE)

    @property
    def sentences(self) -> list[str]:
        return self.units.sentences

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        self.units.render(translations)
        return serialize_xml(self.root)


def _indent_before(element) -> str | None:
    """The whitespace before `element` in its parent (None: text, not only whitespace)."""
    previous = element.getprevious()
    before = previous.tail if previous is not None else element.getparent().text
    return before if before is None or not before.strip() else None


def _note_1(target, note: LowConfidence) -> None:
    """XLIFF 1.x: the trans-unit's note on its `target`, right after it (notes may follow the
    target in any order with the unit's other groups), indented as the target is."""
    element = etree.Element(_name(etree.QName(target).namespace, "note"), {"from": AUTHOR, "priority": "1"})
    element.text = note.text
    element.tail, target.tail = target.tail, _indent_before(target) or target.tail
    target.addnext(element)


def _segment_prefix(segment, q) -> str:
    """How a 2.0 note names its segment: "" in a unit of one, else "segment ID: " (its id, or its number)."""
    segments = segment.getparent().findall(q("segment"))
    return "" if len(segments) < 2 else f"segment {segment.get('id') or segments.index(segment) + 1}: "


def _note_2(segment, note: LowConfidence, q) -> None:
    """XLIFF 2.0: a note in the unit's <notes>, which comes after elements of other namespaces
    and before <originalData> and the segments."""
    unit = segment.getparent()
    notes = unit.find(q("notes"))
    if notes is None:
        notes = etree.Element(q("notes"))
        first = next(child for child in unit if child.tag in (q("originalData"), q("segment"), q("ignorable")))
        notes.tail = _indent_before(first)
        first.addprevious(notes)
    element = etree.SubElement(notes, q("note"), {"category": AUTHOR, "priority": "1"})
    element.text = _segment_prefix(segment, q) + note.text


def _remove(element) -> None:
    """`element` taken out, what stood after it (its tail) kept in its place."""
    previous, parent = element.getprevious(), element.getparent()
    if previous is not None:
        previous.tail = element.tail
    else:
        parent.text = element.tail
    parent.remove(element)


def _drop_old_notes(holder, version: int, q) -> None:
    """The notes attnmt left on the target of `holder` (a 1.x trans-unit, a 2.0 segment) in an
    earlier run: they were about a translation that is replaced (2.0: an emptied <notes> too)."""
    if version == 1:
        for note in holder.findall(q("note")):
            if note.get("from") == AUTHOR:
                _remove(note)
        return
    notes = holder.getparent().find(q("notes"))
    if notes is None:
        return
    prefix = _segment_prefix(holder, q)
    for note in notes.findall(q("note")):
        if note.get("category") == AUTHOR and (note.text or "").startswith(prefix + "confidence "):
            _remove(note)
    if not len(notes):
        _remove(notes)

"""The localizers' formats: gettext .po/.pot (polib, MIT) and XLIFF 1.2 / 2.0 (lxml).

.po: each entry's msgid is translated into its msgstr (a plural entry: msgstr[0] from msgid, the
other forms from msgid_plural, as many as the header's nplurals, else 2); comments, flags,
references, msgctxt, obsolete entries and the header are kept (its Language set to the target).
An entry without letters gets its msgid as msgstr. Placeholders (%s, %(name)s, %1$d, {name},
${name}) and tags are never read by the model: they come back exactly, placed at their relative
position (paragraphs.PLACEHOLDER).

XLIFF: each <source> (1.2: trans-unit; 2.0: segment) gets a <target> (replacing one that is
there), a copy of the source with its text translated; inline codes (<g>, <pc>, <mrk> wrap text;
<x/>, <ph>, <bpt>, <ept>, <sc>, <ec>, ... are kept whole) placed by alignment. Units with
translate="no" are left alone. The file's target-language (1.2) / trgLang (2.0) is set.
"""

from __future__ import annotations

import copy
import re
from typing import Sequence

from lxml import etree

from attnmt.documents.paragraphs import PLACEHOLDER, URL, Units, build_unit, plain_text, text
from attnmt.documents.plain import decode_text
from attnmt.documents.safety import DocumentError, Limits, parse_xml, serialize_xml
from attnmt.documents.xml_text import MixedDialect, fill_mixed, mixed_pieces
from attnmt.documents.markup import AlignedTranslation

PROTECTED = re.compile(f"{URL.pattern}|{PLACEHOLDER.pattern}")
NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")


class PoDocument:
    def __init__(self, data: bytes, name: str, limits: Limits, target_lang: str | None = None):
        import polib

        source = decode_text(data, name)
        if "\n" not in source or polib._is_file(source):  # polib reads a string that names a file as that file
            source += "\n"
        try:
            self.po = polib.pofile(source, encoding="utf-8")
        except (OSError, ValueError, UnicodeError) as err:
            raise DocumentError(f"{name}: not a gettext PO file: {err}") from None
        self.units = Units(name, limits.max_paragraphs)
        entries = [e for e in self.po if not e.obsolete and e.msgid]
        self.units.count(len(entries), name)
        match = NPLURALS.search(self.po.metadata.get("Plural-Forms", ""))
        self.nplurals = min(int(match.group(1)), 6) if match else 2
        if target_lang:
            self.po.metadata["Language"] = target_lang
        for entry in entries:
            if entry.msgid_plural:
                forms = [entry.msgid] + [entry.msgid_plural] * (self.nplurals - 1)
                for form, msgid in enumerate(forms):
                    self._add(msgid, lambda value, e=entry, f=form: e.msgstr_plural.__setitem__(f, value))
            else:
                self._add(entry.msgid, lambda value, e=entry: setattr(e, "msgstr", value))

    def _add(self, msgid: str, store) -> None:
        unit = build_unit([text(msgid)], lambda content, base: store(plain_text(content)), protect=PROTECTED)
        if unit is None:
            store(msgid)  # nothing to translate: the same text
        self.units.add(unit)

    @property
    def sentences(self) -> list[str]:
        return self.units.sentences

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        self.units.render(translations)
        return str(self.po).encode("utf-8")


XLIFF12 = "urn:oasis:names:tc:xliff:document:1.2"
XLIFF20 = "urn:oasis:names:tc:xliff:document:2.0"


def _dialect(ns: str, groups: str, atoms: str) -> MixedDialect:
    return MixedDialect(groups=frozenset(f"{{{ns}}}{g}" for g in groups.split()), protect=PROTECTED)


XLIFF_DIALECTS = {XLIFF12: _dialect(XLIFF12, "g mrk", "x bx ex ph bpt ept it sub"),
                  XLIFF20: _dialect(XLIFF20, "pc mrk", "ph sc ec cp")}


class XliffDocument:
    def __init__(self, data: bytes, name: str, limits: Limits, target_lang: str | None = None):
        self.root = parse_xml(data, name, limits)
        ns = etree.QName(self.root).namespace
        if etree.QName(self.root).localname != "xliff" or ns not in XLIFF_DIALECTS:
            raise DocumentError(f"{name}: not an XLIFF 1.2 or 2.0 file (its root is {self.root.tag!r})")
        dialect = XLIFF_DIALECTS[ns]
        q = lambda local: f"{{{ns}}}{local}"  # noqa: E731
        if target_lang and ns == XLIFF12:
            for file in self.root.iter(q("file")):
                file.set("target-language", target_lang)
        elif target_lang:
            self.root.set("trgLang", target_lang)
        holders = list(self.root.iter(q("trans-unit") if ns == XLIFF12 else q("segment")))
        self.units = Units(name, limits.max_paragraphs)
        self.units.count(len(holders), name)
        for number, holder in enumerate(holders, 1):
            unit_element = holder if ns == XLIFF12 else holder.getparent()
            if unit_element is not None and unit_element.get("translate", "yes") == "no":
                continue
            source = holder.find(q("source"))
            if source is None:
                raise DocumentError(f"{name}: {etree.QName(holder).localname} {holder.get('id') or number} "
                                    f"(line {holder.sourceline}) has no <source>")
            target = copy.deepcopy(source)
            target.tag = q("target")
            for name_ in list(target.attrib):
                if name_ == "{http://www.w3.org/XML/1998/namespace}space":
                    continue
                del target.attrib[name_]
            old = holder.find(q("target"))
            if old is not None:
                holder.replace(old, target)
            else:
                target.tail = source.tail
                source.addnext(target)
            where = f"{name}: line {holder.sourceline}"
            pieces = mixed_pieces(target, dialect, 0, limits.max_depth, where)
            self.units.add(build_unit(pieces, lambda content, base, t=target: fill_mixed(t, content),
                                      protect=PROTECTED))

    @property
    def sentences(self) -> list[str]:
        return self.units.sentences

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        self.units.render(translations)
        return serialize_xml(self.root)

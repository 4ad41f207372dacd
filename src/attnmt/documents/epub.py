"""EPUB books (.epub): a zip of XHTML chapters, translated by markup.py (blocks as sentences,
inline tags placed by alignment), with the table of contents (toc.ncx labels) and the title in
the package document. Every other entry (pictures, styles, fonts, the manifest) is copied; the
mimetype entry stays first and stored. No EPUB library is used (EbookLib is AGPL).
"""

from __future__ import annotations

import posixpath
from typing import Sequence
from urllib.parse import unquote


from attnmt.documents.paragraphs import Units
from attnmt.documents.plain import decode_text
from attnmt.documents.safety import DocumentError, DocumentTooLarge, Limits, ZipPackage, parse_xml, serialize_xml
from attnmt.documents.xml_text import MixedDialect, mixed_unit
from attnmt.documents.markup import AlignedTranslation, MarkupDocument, TooDeep

CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
OPF = "http://www.idpf.org/2007/opf"
DC = "http://purl.org/dc/elements/1.1/"
NCX = "http://www.daisy.org/z3986/2005/ncx/"
XHTML_TYPES = {"application/xhtml+xml", "text/html"}
PLAIN = MixedDialect(groups=frozenset())


class EpubDocument:
    def __init__(self, data: bytes, name: str, limits: Limits):
        self.package = ZipPackage(data, name, limits)
        container = parse_xml(self.package.read("META-INF/container.xml"), f"{name}: META-INF/container.xml", limits)
        rootfile = container.find(f".//{{{CONTAINER}}}rootfile")
        if rootfile is None or not rootfile.get("full-path"):
            raise DocumentError(f"{name}: META-INF/container.xml names no package document (rootfile)")
        self.opf_path = rootfile.get("full-path")
        where = f"{name}: {self.opf_path}"
        self.trees = {self.opf_path: parse_xml(self.package.read(self.opf_path), where, limits)}
        self.units = Units(name, limits.max_paragraphs)
        opf = self.trees[self.opf_path]
        for title in opf.iter(f"{{{DC}}}title"):
            self.units.count(1, where)
            self.units.add(mixed_unit(title, PLAIN, limit=limits.max_depth, where=where))
        base = posixpath.dirname(self.opf_path)
        self.chapters: list[tuple[str, MarkupDocument]] = []
        for item in opf.iter(f"{{{OPF}}}item"):
            path = posixpath.normpath(posixpath.join(base, unquote(item.get("href", ""))))
            media = item.get("media-type", "")
            if not self.package.has(path) or path in self.trees:
                continue
            part = f"{name}: {path}"
            if media in XHTML_TYPES:
                try:
                    chapter = MarkupDocument(decode_text(self.package.read(path), part))
                except TooDeep as err:
                    raise DocumentTooLarge(f"{part}: {err}") from None
                except ValueError as err:
                    if isinstance(err, DocumentError):
                        raise
                    raise DocumentError(f"{part}: {err}") from None
                self.units.count(len(chapter.runs), part)
                self.chapters.append((path, chapter))
            elif media == "application/x-dtbncx+xml":
                root = parse_xml(self.package.read(path), part, limits)
                self.trees[path] = root
                labels = list(root.iter(f"{{{NCX}}}text"))
                self.units.count(len(labels), part)
                for label in labels:
                    self.units.add(mixed_unit(label, PLAIN, limit=limits.max_depth, where=part))
        if not self.chapters:
            raise DocumentError(f"{name}: its package document lists no XHTML chapter found in the archive")

    @property
    def sentences(self) -> list[str]:
        return self.units.sentences_with(self.chapters)

    def render(self, translations: Sequence[AlignedTranslation]) -> bytes:
        shares = self.units.render_with(self.chapters, translations)  # the NCX labels written into their trees
        replaced = {path: serialize_xml(root) for path, root in self.trees.items()}
        for (path, chapter), share in zip(self.chapters, shares):
            replaced[path] = chapter.render(share).encode("utf-8")
        return self.package.write(replaced)

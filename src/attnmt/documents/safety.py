"""A document is a zip of XML from a stranger: read it within limits, or refuse it in one line.

    limits = Limits()                                  # or Limits.for_upload(file_limit_bytes)
    check_kind(data, ".docx", "report.docx", kind=ZIP)  # a PDF named .docx, an encrypted Office file: refused
    package = ZipPackage(data, "report.docx", limits)  # entries, sizes and ratios checked before inflating
    tree = parse_xml(package.read("word/document.xml"), "report.docx: word/document.xml", limits)  # no DTDs
    package.write({"word/document.xml": new_bytes})    # the same zip, those entries replaced

Every refusal is a DocumentError naming the file and the part (and a DocumentTooLarge when it
is a limit: the service answers 413 for those, 400 for the rest). docs/reliability.md lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

# the generic part (the errors, a zip read within limits) moved to the untrusted-input module: an
# Argos package (interop/argos) is a stranger's zip too; documents import them from here as before
from attnmt.untrusted import RATIO_FLOOR, ZipPackage  # noqa: F401
from attnmt.untrusted import ArchiveError as DocumentError
from attnmt.untrusted import ArchiveTooLarge as DocumentTooLarge


@dataclass(frozen=True)
class Limits:
    """What one document may hold. The defaults fit a book; `for_upload` scales to the service."""

    max_entries: int = 10_000              # files in the zip
    max_unpacked_bytes: int = 256_000_000  # all entries inflated
    max_ratio: float = 200.0               # inflated / compressed, per entry over RATIO_FLOOR bytes
    max_part_bytes: int = 64_000_000       # one XML part, inflated (what lxml holds as a tree)
    max_paragraphs: int = 100_000          # paragraph elements of a document, empty ones included
    max_depth: int = 128                   # elements nested inside one paragraph (markup.MAX_DEPTH)
    max_pdf_operations: int = 5_000_000    # content-stream operations a PDF's text extraction runs
    max_pdf_stream_bytes: int = 32_000_000  # a PDF page's content streams (and its forms') inflated

    @classmethod
    def for_upload(cls, upload_bytes: int) -> Limits:
        """Limits for a file of at most `upload_bytes` sent to the service: 64x its size inflated;
        a PDF's extraction at most one operation for every 2 bytes of the limit (256,000 for a 512 kB
        limit: refused after 7 s on a 2-core AMD EPYC; a page of text draws some 2,000)."""
        unpacked = max(64 * upload_bytes, 4_000_000)
        return cls(max_entries=2_000, max_unpacked_bytes=unpacked, max_part_bytes=unpacked,
                   max_paragraphs=50_000, max_pdf_operations=max(upload_bytes // 2, 100_000),
                   max_pdf_stream_bytes=max(8 * upload_bytes, 2_000_000))


ZIP = "a zip archive"  # the kinds a format's bytes must be (formats.Format.kind), as what_it_is names them
PDF = "a PDF file"
SIGNATURES = (  # how a file starts -> what it is (for "a .docx that is really a .pdf")
    (b"%PDF-", PDF),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an OLE2 compound file (a password-protected Office document, "
                                          "or an old .doc/.ppt): save it without a password in the new format"),
    (b"PK\x03\x04", ZIP),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"{\\rtf", "an RTF file"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"\x1f\x8b", "a gzip file"),
)


def what_it_is(data: bytes) -> str | None:
    for signature, name in SIGNATURES:
        if data.startswith(signature):
            return name
    return None


def check_kind(data: bytes, suffix: str, name: str, *, kind: str | None = None) -> None:
    """Refuse an empty file, and one whose bytes are not the `kind` its format must be (ZIP for
    the zip formats, PDF for .pdf; None: any bytes, a text format's decoding checks them).

    Raises:
        DocumentError: naming what the file looks like.
    """
    if not data.strip():
        raise DocumentError(f"{name}: the file is empty")
    if kind is None:
        return
    found = what_it_is(data)
    if found != kind:
        raise DocumentError(f"{name}: not a {suffix} file: it is {found}" if found else
                            f"{name}: not a {suffix} file (a {suffix} is {kind}; this is not one)")


def xml_parser() -> etree.XMLParser:
    """lxml with no entity resolution, no DTD loading, no network and libxml2's own size limits."""
    return etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, huge_tree=False,
                           remove_blank_text=False, remove_comments=False)


ENTITIES_REFUSED = ("declares XML entities or other DTD declarations (refused: a document does not need them, "
                    "and they can expand without bound or read local files)")


def parse_xml(data: bytes, where: str, limits: Limits) -> etree._Element:
    """A part's XML root. Parsed first (in whatever encoding it declares: UTF-8, UTF-16, UTF-7,
    ...), with nothing resolved or loaded; then a DOCTYPE that declares anything (entities,
    elements, attributes: an internal subset) is refused, and so is any entity reference left in
    the tree, so that a refused part is never written back for the next tool to resolve.

    Raises:
        DocumentError: naming `where` (file: part), for XML that declares entities or does not parse.
    """
    if len(data) > limits.max_part_bytes:
        raise DocumentTooLarge(f"{where}: {len(data):,} bytes of XML; at most {limits.max_part_bytes:,} are read")
    try:
        root = etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as err:
        if "Excessive depth" in err.msg:
            raise DocumentTooLarge(f"{where}: elements nested more than 256 deep; refused") from None
        if "entity" in err.msg.lower() or "entities" in err.msg.lower():  # an amplification, an undefined one
            raise DocumentError(f"{where}: {ENTITIES_REFUSED} ({err.msg})") from None
        raise DocumentError(f"{where}: not well-formed XML (line {err.lineno}: {err.msg})") from None
    except ValueError as err:  # lxml's refusal of some inputs (e.g. a string with an encoding declaration)
        raise DocumentError(f"{where}: not XML that can be read ({err})") from None
    if root is None:
        raise DocumentError(f"{where}: no XML content")
    docinfo = root.getroottree().docinfo
    if docinfo.internalDTD is not None and _declares(data, docinfo.internalDTD, docinfo.encoding):
        raise DocumentError(f"{where}: {ENTITIES_REFUSED}")
    if any(True for _ in root.iter(etree.Entity)):
        raise DocumentError(f"{where}: {ENTITIES_REFUSED}")
    return root


_SUBSET = re.compile(r"<!DOCTYPE\b[^\[>]*\[(.*?)\]\s*>", re.DOTALL)
_DECLARATION = re.compile(r"<!(?:ENTITY|ELEMENT|ATTLIST|NOTATION)\b")


def _declares(data: bytes, dtd, encoding: str | None) -> bool:
    """Whether a parsed part's DOCTYPE declares anything: entities or elements as libxml2 read
    them, or an attribute list or notation in its internal subset (read in the encoding the
    parser found, so UTF-16 or UTF-7 hides nothing)."""
    if any(True for _ in dtd.iterentities()) or any(True for _ in dtd.iterelements()):
        return True
    try:
        text = data.decode(encoding or "utf-8", "replace")
    except LookupError:
        text = data.decode("utf-8", "replace")
    subset = _SUBSET.search(text)
    return bool(subset and _DECLARATION.search(subset.group(1)))


def serialize_xml(root: etree._Element) -> bytes:
    """A part's XML as bytes, with the XML declaration the Office formats expect."""
    return etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8", standalone=True)

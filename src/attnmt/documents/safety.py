"""A document is a zip of XML from a stranger: read it within limits, or refuse it in one line.

    limits = Limits()                                  # or Limits.for_upload(file_limit_bytes)
    check_kind(data, ".docx", "report.docx", kind=ZIP)  # a PDF named .docx, an encrypted Office file: refused
    package = ZipPackage(data, "report.docx", limits)  # entries, sizes and ratios checked before inflating
    tree = parse_xml(package.read("word/document.xml"), "report.docx: word/document.xml", limits)
    package.write({"word/document.xml": new_bytes})    # the same zip, those entries replaced

Every refusal is a DocumentError naming the file and the part (and a DocumentTooLarge when it
is a limit: the service answers 413 for those, 400 for the rest). docs/reliability.md lists them.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from lxml import etree

from attnmt.errors import DataError


class DocumentError(DataError):
    """A document that cannot be read or translated: names the file and the part at fault, on one
    line: a name from inside the file (a zip member's) may hold control characters, shown escaped."""

    def __init__(self, message: str):
        super().__init__("".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                                 for c in message))


class DocumentTooLarge(DocumentError):
    """A document over one of the limits (size, ratio, entries, paragraphs, nesting)."""


@dataclass(frozen=True)
class Limits:
    """What one document may hold. The defaults fit a book; `for_upload` scales to the service."""

    max_entries: int = 10_000              # files in the zip
    max_unpacked_bytes: int = 256_000_000  # all entries inflated
    max_ratio: float = 200.0               # inflated / compressed, per entry over RATIO_FLOOR bytes
    max_part_bytes: int = 64_000_000       # one XML part, inflated (what lxml holds as a tree)
    max_paragraphs: int = 100_000          # paragraph elements of a document, empty ones included
    max_depth: int = 128                   # elements nested inside one paragraph (markup.MAX_DEPTH)

    @classmethod
    def for_upload(cls, upload_bytes: int) -> Limits:
        """Limits for a file of at most `upload_bytes` sent to the service: 64x its size inflated."""
        unpacked = max(64 * upload_bytes, 4_000_000)
        return cls(max_entries=2_000, max_unpacked_bytes=unpacked, max_part_bytes=unpacked,
                   max_paragraphs=50_000)


RATIO_FLOOR = 1_000_000  # entries smaller than this inflated are not held to max_ratio

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


class ZipPackage:
    """The entries of a zip archive, checked before any is inflated: count, encryption, declared
    sizes and compression ratios; each entry is then inflated under a byte budget, so an entry
    that inflates past its declared size is caught as it grows.

    Raises:
        DocumentError / DocumentTooLarge: a corrupt or encrypted archive, or one over `limits`.
    """

    def __init__(self, data: bytes, name: str, limits: Limits):
        self.name = name
        self.limits = limits
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except Exception as err:  # zipfile's refusals: BadZipFile, NotImplementedError, ValueError, ...
            raise DocumentError(f"{name}: a corrupt zip archive ({type(err).__name__}: {err})") from None
        if len(infos) > limits.max_entries:
            raise DocumentTooLarge(f"{name}: holds {len(infos)} files; at most {limits.max_entries} are read")
        total = 0
        for info in infos:
            if info.flag_bits & 0x1:
                raise DocumentError(f"{name}: {info.filename} is encrypted: save the document without a password")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise DocumentError(f"{name}: {info.filename} uses compression method {info.compress_type}; "
                                    f"only stored and deflated entries are read")
            total += info.file_size
            if info.file_size > RATIO_FLOOR and info.file_size > limits.max_ratio * max(info.compress_size, 1):
                raise DocumentTooLarge(f"{name}: {info.filename} inflates {info.file_size / max(info.compress_size, 1):.0f}"
                                       f"-fold (at most {limits.max_ratio:.0f}): refused as a zip bomb")
        if total > limits.max_unpacked_bytes:
            raise DocumentTooLarge(f"{name}: its files inflate to {total:,} bytes; at most "
                                   f"{limits.max_unpacked_bytes:,} are read")
        names = [info.filename for info in infos]
        if len(set(names)) != len(names):
            raise DocumentError(f"{name}: a zip archive that names one file twice")
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
            raise DocumentError(f"{self.name}: {part} is missing (not a complete {self._kind()} file)")
        data = self.inflated[part]
        if limit is not None and len(data) > limit:
            raise DocumentTooLarge(f"{self.name}: {part} is {len(data):,} bytes; at most {limit:,} are read")
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
                        raise DocumentTooLarge(f"{self.name}: {part} inflates past its declared "
                                               f"{info.file_size:,} bytes: refused as a zip bomb")
                    chunks.append(chunk)
        except DocumentError:
            raise
        except Exception as err:  # BadZipFile (a CRC), zlib.error, EOFError, NotImplementedError, ...
            raise DocumentError(f"{self.name}: {part} is corrupt ({type(err).__name__}: {err})") from None
        return b"".join(chunks)

    def _kind(self) -> str:
        return self.name.rsplit(".", 1)[-1] if "." in self.name else "zip"

    def write(self, replaced: dict[str, bytes]) -> bytes:
        """The archive again, entry for entry in its order, with `replaced` entries' new bytes
        (a `mimetype` entry stays first and stored, as OpenDocument and EPUB require)."""
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
        return out.getvalue()


def xml_parser() -> etree.XMLParser:
    """lxml with no entity resolution, no DTD loading, no network and libxml2's own size limits."""
    return etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, huge_tree=False,
                           remove_blank_text=False, remove_comments=False)


def parse_xml(data: bytes, where: str, limits: Limits) -> etree._Element:
    """A part's XML root; entity declarations (a "billion laughs" or an external entity) refused
    before parsing.

    Raises:
        DocumentError: naming `where` (file: part), for XML that declares entities or does not parse.
    """
    if b"<!ENTITY" in data or b"<!entity" in data:
        raise DocumentError(f"{where}: declares XML entities (refused: a document does not need them, "
                            f"and they can expand without bound or read local files)")
    if len(data) > limits.max_part_bytes:
        raise DocumentTooLarge(f"{where}: {len(data):,} bytes of XML; at most {limits.max_part_bytes:,} are read")
    try:
        root = etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as err:
        if "Excessive depth" in err.msg:
            raise DocumentTooLarge(f"{where}: elements nested more than 256 deep; refused") from None
        raise DocumentError(f"{where}: not well-formed XML (line {err.lineno}: {err.msg})") from None
    if root is None:
        raise DocumentError(f"{where}: no XML content")
    return root


def serialize_xml(root: etree._Element) -> bytes:
    """A part's XML as bytes, with the XML declaration the Office formats expect."""
    return etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8", standalone=True)

"""Documents from strangers: zip bombs, entity expansion, external entities, encrypted and corrupt
files, a .docx that is a PDF, deep nesting, 100,000 empty paragraphs. Each is one DocumentError
(DocumentTooLarge for limits) naming the file and the part, raised quickly and without inflating
the bomb; and Hypothesis mutates valid documents: reading one either works or is refused so."""

from __future__ import annotations

import io
import random
import resource
import time
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from attnmt.documents import DocumentError, DocumentTooLarge, Limits, read_document, translate_document

from support import document_samples as samples

DOCUMENT = "word/document.xml"


def body(xml: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{samples.W}"><w:body>{xml}'
            f"</w:body></w:document>").encode()


@pytest.fixture(scope="module")
def docx():
    return samples.docx_bytes()


def refused(data: bytes, suffix: str, pattern: str, kind=DocumentError, **kw):
    start = time.monotonic()
    with pytest.raises(kind, match=pattern):
        read_document(data, suffix, name=f"x{suffix}", **kw)
    assert time.monotonic() - start < 10


def bomb(docx: bytes, size: int) -> bytes:
    """`docx` with an entry of `size` zero bytes, written in chunks (never held whole)."""
    out = io.BytesIO(samples.zip_with(docx, {}))
    with zipfile.ZipFile(out, "a", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("word/media/zeros.bin", "w", force_zip64=True) as entry:
            for _ in range(size // (1 << 20)):
                entry.write(bytes(1 << 20))
    return out.getvalue()


def test_a_zip_bomb_is_refused_before_inflating(docx):
    bombed = bomb(docx, 300 << 20)  # 300 MiB of zeros in about 300 kB
    assert len(bombed) < 2_000_000
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    refused(bombed, ".docx", r"x\.docx: word/media/zeros\.bin inflates \d+-fold .*zip bomb", DocumentTooLarge)
    small = Limits(max_unpacked_bytes=1_000_000, max_ratio=10_000)
    refused(bombed, ".docx", r"x\.docx: its files inflate to [\d,]+ bytes; at most 1,000,000", DocumentTooLarge,
            limits=small)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 100_000  # kB: the bomb was never inflated


def test_an_entry_that_lies_about_its_size(docx):
    document = zipfile.ZipFile(io.BytesIO(docx)).read(DOCUMENT)
    noise = b"<!--" + random.Random(0).randbytes(700_000).hex().encode() + b"-->"  # compresses about 2-fold
    data = bytearray(samples.zip_with(docx, {DOCUMENT: document + noise}))
    archive = zipfile.ZipFile(io.BytesIO(bytes(data)))
    info = archive.getinfo(DOCUMENT)
    real = info.file_size
    # the central directory and the local header both claim 100 bytes fewer than the entry inflates to
    central = data.rfind(info.filename.encode(), 0) - 46
    data[central + 24:central + 28] = (real - 100).to_bytes(4, "little")
    local = info.header_offset
    data[local + 22:local + 26] = (real - 100).to_bytes(4, "little")
    refused(bytes(data), ".docx", r"word/document\.xml (inflates past its declared|is corrupt)")


@pytest.mark.parametrize("xml,pattern", [
    ('<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
     '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>', r"word/document\.xml: declares XML entities"),
    ('<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>', r"word/document\.xml: declares XML entities"),
])
def test_entities_are_refused(docx, xml, pattern):
    bad = body("<w:p><w:r><w:t>&c;&x;</w:t></w:r></w:p>").replace(b"?><w:document", f"?>{xml}<w:document".encode())
    refused(samples.zip_with(docx, {DOCUMENT: bad}), ".docx", pattern)


def test_xliff_and_po_entities_and_paths(tmp_path):
    refused(b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><xliff>&e;</xliff>',
            ".xliff", r"x\.xliff: declares XML entities")
    refused(b"<xliff><file>", ".xliff", r"x\.xliff: not well-formed XML \(line 1")
    refused(b'<root xmlns="urn:x">a</root>', ".xliff", r"not an XLIFF 1\.2 or 2\.0 file")
    secret = tmp_path / "secret.po"
    secret.write_text('msgid "Geheim Hund"\nmsgstr ""\n')
    # polib reads a string that names a file as that file: an upload holding a path is text, not that file
    refused(str(secret).encode(), ".po", r"x\.po: not a gettext PO file: Syntax error in po file \(line 1\)")


def test_encrypted_corrupt_and_disguised_files(docx):
    encrypted = bytearray(docx)
    encrypted[6] |= 0x1  # the local header's flag ...
    position = bytes(encrypted).rfind(b"PK\x01\x02")
    while position >= 0:  # ... and every central directory entry's
        encrypted[position + 8] |= 0x1
        position = bytes(encrypted).rfind(b"PK\x01\x02", 0, position)
    refused(bytes(encrypted), ".docx", r"x\.docx: .* is encrypted: save the document without a password")
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600
    refused(ole, ".docx", r"not a \.docx file: it is an OLE2 compound file \(a password-protected")
    refused(samples.pdf_bytes([["Hund"]]), ".docx", r"x\.docx: not a \.docx file: it is a PDF file")
    refused(docx[: len(docx) // 2], ".docx", r"x\.docx: a corrupt zip archive")
    refused(b"PK\x03\x04" + b"\0" * 100, ".odt", r"x\.odt: a corrupt zip archive")
    refused(samples.odt_bytes(), ".docx", r"x\.docx: not a \.docx file \(word/document\.xml is missing\)")
    refused(samples.odp_bytes(), ".odt", r"x\.odt: not a \.odt file \(its mimetype is 'application/vnd\.oasis"
                                         r"\.opendocument\.presentation'\)")
    refused(samples.docx_bytes()[:0] + b" ", ".docx", r"x\.docx: the file is empty")
    refused(b"%PDF-1.4\n garbage", ".pdf", r"x\.pdf: a PDF that cannot be read|x\.pdf: the PDF has no text")
    broken = samples.zip_with(docx, {DOCUMENT: b"<w:document><w:body>"})
    refused(broken, ".docx", r"x\.docx: word/document\.xml: not well-formed XML \(line 1")
    refused(b"\nnur Text\n", ".srt", r"x\.srt: line 1: not a subtitle block")
    refused(b"Hund \xff", ".srt", r"x\.srt: not valid UTF-8 \(byte 0xff at offset 5\)")


def test_deep_nesting_and_many_empty_paragraphs(docx):
    for depth, limit in ((150, 128), (300, 256)):  # attnmt's limit inside a paragraph; libxml2's in a part
        deep = body("<w:p>" + "<w:hyperlink>" * depth + "<w:r><w:t>Hund</w:t></w:r>" + "</w:hyperlink>" * depth + "</w:p>")
        refused(samples.zip_with(docx, {DOCUMENT: deep}), ".docx",
                rf"word/document\.xml: elements nested more than {limit} deep", DocumentTooLarge)
    odt = samples.odt_bytes()
    content = zipfile.ZipFile(io.BytesIO(odt)).read("content.xml")
    deep_odt = content.replace(b">Hund <", b">" + b"<text:span>" * 200 + b"Hund" + b"</text:span>" * 200 + b" <")
    refused(samples.zip_with(odt, {"content.xml": deep_odt}), ".odt", r"content\.xml: elements nested more than 128",
            DocumentTooLarge)
    empty = body("<w:p/>" * 100_001)
    start = time.monotonic()
    refused(samples.zip_with(docx, {DOCUMENT: empty}), ".docx",
            r"x\.docx: word/document\.xml: more than 100,000 paragraphs \(empty ones included\)", DocumentTooLarge)
    assert time.monotonic() - start < 10
    refused(b"Hund" + b"\n" * 100_001, ".txt", r"x\.txt: more than 100,000 paragraphs", DocumentTooLarge)


def test_a_paragraph_that_is_not_prose_is_never_sent(docx):
    cells = body("<w:p><w:r><w:t>12,5 %</w:t></w:r></w:p><w:p><w:r><w:t>https://example.org</w:t></w:r></w:p>"
                 "<w:p/><w:p><w:r><w:t>  </w:t></w:r></w:p>")
    document = read_document(samples.zip_with(docx, {DOCUMENT: cells}), ".docx")
    assert [s for s in document.sentences if "12" in s or "example" in s] == []


MUTABLE = {".docx": samples.docx_bytes, ".odt": samples.odt_bytes, ".pptx": samples.pptx_bytes,
           ".epub": samples.epub_bytes}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(suffix=st.sampled_from(sorted(MUTABLE)), position=st.floats(0, 1), value=st.binary(min_size=1, max_size=8),
       cut=st.booleans())
def test_mutated_documents_are_read_or_refused(suffix, position, value, cut):
    data = _SAMPLES.setdefault(suffix, MUTABLE[suffix]())
    at = int(position * (len(data) - 1))
    mutated = data[:at] if cut else data[:at] + value + data[at + len(value):]
    try:
        translate_document(mutated, suffix, samples.fake_translate, name="m" + suffix)
    except DocumentError as err:
        assert str(err).startswith("m" + suffix + ":") and "\n" not in str(err)


def test_a_member_name_with_a_line_break_is_shown_escaped_on_one_line():
    """Found by the test above: the central directory names a member `OEBPS/st<LF>le.css` (its local
    header `OEBPS/style.css`); the refusal names it escaped, the message one line."""
    data = samples.epub_bytes()
    at = data.rindex(b"OEBPS/style.css")  # the central directory's copy (the local header's comes first)
    mutated = data[:at] + b"OEBPS/st\nle.css" + data[at + len(b"OEBPS/style.css"):]
    with pytest.raises(DocumentError) as caught:
        translate_document(mutated, ".epub", samples.fake_translate, name="m.epub")
    assert str(caught.value).startswith("m.epub: OEBPS/st\\nle.css is corrupt") and "\n" not in str(caught.value)


_SAMPLES: dict[str, bytes] = {}


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.sampled_from("<>&/\"'=!-[] \nabgxpmrstcdeDOCTYPENTIY1.:{}%"), max_size=300))
def test_xml_and_text_formats_never_fail_otherwise(text):
    for suffix in (".xliff", ".po", ".srt"):
        try:
            translate_document(text.encode(), suffix, samples.fake_translate, name="f" + suffix)
        except DocumentError as err:
            assert str(err).startswith("f" + suffix + ":")


def test_a_corrupt_entry_is_found_on_opening(docx):
    """Every entry is CRC-checked when the file is read, not when the translation is written (a
    corrupt picture found only then was a 500 in the service)."""
    out = io.BytesIO(samples.zip_with(docx, {}))
    with zipfile.ZipFile(out, "a") as archive:
        archive.writestr(zipfile.ZipInfo("word/media/picture.bin"), b"A" * 1000, compress_type=zipfile.ZIP_STORED)
    data = bytearray(out.getvalue())
    at = bytes(data).index(b"A" * 1000)
    data[at + 500] = ord("B")  # the bytes no longer match the CRC the headers record
    refused(bytes(data), ".docx", r"x\.docx: word/media/picture\.bin is corrupt \(BadZipFile: Bad CRC-32")

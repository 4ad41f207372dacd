"""One sample file of every document format, and what each format is by its own specification,
written out here by hand (not read from src/attnmt/documents/formats.py): the tests of the table
(tests/documents/test_formats.py) and of /translate_file (tests/server/test_document_files.py)
check the table and the service against these.

    data = sample(".docx")                  # a .docx made by python-docx (document_samples.py)
    SPEC[".pdf"].output                     # ".txt": what a .pdf is translated into
    SPEC[".docx"].media_type                # the IANA-registered type the service sends it as
"""

from __future__ import annotations

from typing import NamedTuple

from support import document_samples as samples


class Spec(NamedTuple):
    aliases: tuple[str, ...]   # other spellings of the extension
    media_type: str            # without parameters (charset)
    zipped: bool               # a zip archive (OOXML, ODF, OCF containers)
    output: str                # the extension of its translation
    sentence: str              # a paragraph of sample(suffix) that its reader must find


_OOXML = "application/vnd.openxmlformats-officedocument"
SPEC = {
    ".txt": Spec((), "text/plain", False, ".txt", "Hund rot ."),                       # RFC 2046
    ".html": Spec((".htm",), "text/html", False, ".html", "Hund rot ."),               # WHATWG HTML
    ".docx": Spec((), f"{_OOXML}.wordprocessingml.document", True, ".docx", "Hund rot Haus blau ."),  # ECMA-376
    ".pptx": Spec((), f"{_OOXML}.presentationml.presentation", True, ".pptx", "Haus rot"),
    # OASIS ODF 1.2: a template (.ott), LibreOffice's Writer/Web (.oth) and a master document (.odm) are text documents
    ".odt": Spec((".ott", ".oth", ".odm"), "application/vnd.oasis.opendocument.text", True, ".odt", "Haus groß"),
    ".odp": Spec((".otp",), "application/vnd.oasis.opendocument.presentation", True, ".odp", "Hund rot Haus ."),
    ".epub": Spec((), "application/epub+zip", True, ".epub", "Hund rot Haus ."),       # EPUB 3 OCF
    ".srt": Spec((), "application/x-subrip", False, ".srt", "Hund rot Haus ."),        # no IANA entry; de facto
    ".po": Spec((".pot",), "text/x-gettext-translation", False, ".po", "Hund rot Haus"),  # GNU gettext manual
    ".xliff": Spec((".xlf",), "application/xliff+xml", False, ".xliff", "Hund rot Haus"),  # IANA, XLIFF 2.0
    ".pdf": Spec((), "application/pdf", False, ".txt", "Hund rot Haus ."),             # RFC 8118
}


def sample(suffix: str) -> bytes:
    """A small file of the format `suffix` (one of SPEC), with SPEC[suffix].sentence in it."""
    makers = {
        ".txt": lambda: b"Hund rot .\n\n42\n",
        ".html": lambda: b"<p>Hund <b>rot</b> .</p>",
        ".docx": samples.docx_bytes,
        ".pptx": samples.pptx_bytes,
        ".odt": samples.odt_bytes,
        ".odp": samples.odp_bytes,
        ".epub": samples.epub_bytes,
        ".srt": lambda: samples.SRT.encode(),
        ".po": lambda: samples.po_text().encode(),
        ".xliff": lambda: samples.XLIFF12.encode(),
        ".pdf": lambda: samples.pdf_bytes([["Hund rot Haus ."]]),
    }
    return makers[suffix]()

"""documents/formats.py, the one table of document formats: its rows are the formats as their
specifications say (tests/support/format_samples.py, written by hand), every row's reader opens a
sample of its format made by the format's own library and writes what the row of its output
reads back, the kind check refuses a file whose bytes are not what its row says, the lists the
package exports are the table's, and importing the package loads no format's code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from attnmt.documents import (ALIASES, FORMATS, OUTPUT_SUFFIX, SUFFIXES, DocumentError, find_format, format_of,
                              normalize_suffix, output_suffix, read_document)

from support import document_samples as samples
from support.format_samples import SPEC, sample


def test_the_table_holds_each_format_once_as_its_specification_says():
    assert [fmt.suffix for fmt in FORMATS] == list(SPEC)  # every format, in the order the service lists them
    for fmt in FORMATS:
        spec = SPEC[fmt.suffix]
        assert fmt.aliases == spec.aliases, fmt.suffix
        assert fmt.media_type.split(";")[0] == spec.media_type, fmt.suffix
        assert fmt.zipped == spec.zipped, fmt.suffix
        assert fmt.output_suffix == spec.output, fmt.suffix
        # text is sent as what it is written in: UTF-8, but a .po, in the charset its header declares
        text = not spec.zipped and spec.media_type != "application/pdf" and fmt.suffix != ".po"
        assert fmt.media_type.endswith("; charset=utf-8") == text, fmt.suffix
    spellings = [s for fmt in FORMATS for s in (fmt.suffix, *fmt.aliases)]
    assert len(spellings) == len(set(spellings))  # no suffix or alias names two formats


def test_the_exported_lists_are_the_tables():
    assert SUFFIXES == (".txt", ".html", ".docx", ".pptx", ".odt", ".odp", ".epub", ".srt", ".po", ".xliff", ".pdf")
    assert ALIASES == {".htm": ".html", ".xlf": ".xliff", ".pot": ".po", ".ott": ".odt", ".oth": ".odt", ".odm": ".odt",
                       ".otp": ".odp"}
    assert OUTPUT_SUFFIX == {".pdf": ".txt"}
    for suffix, spec in SPEC.items():
        for spelling in (suffix, *spec.aliases):
            for cased in (spelling, spelling.upper()):
                assert normalize_suffix(cased) == suffix and find_format(cased).suffix == suffix
                assert output_suffix(cased) == spec.output
    assert find_format(".xlsx") is None and find_format("") is None
    with pytest.raises(DocumentError, match=r"^a\.xlsx: \.xlsx is not supported: send \.txt, \.html, \.docx, "
                                            r"\.pptx, \.odt, \.odp, \.epub, \.srt, \.po, \.xliff, \.pdf$"):
        format_of(".XLSX", "a.xlsx")
    with pytest.raises(DocumentError, match=r"a file without an extension is not supported"):
        format_of("")


@pytest.mark.parametrize("suffix", list(SPEC))
def test_every_rows_reader_opens_a_sample_and_its_output_reads_back(suffix):
    fmt = format_of(suffix)
    document = fmt.read(sample(suffix), f"sample{suffix}")
    assert SPEC[suffix].sentence in document.sentences
    out = document.render(samples.fake_translate(document.sentences))
    again = read_document(out, SPEC[suffix].output, name=f"out{SPEC[suffix].output}")  # the output's own row
    if suffix not in (".po", ".xliff"):  # those keep their sources beside the translations
        assert samples.fake_text(SPEC[suffix].sentence) in again.sentences


@pytest.mark.parametrize("suffix", list(SPEC))
def test_the_kind_check_follows_the_row(suffix):
    """A PDF named like a zipped format is refused before its reader runs, as is a zip named .pdf;
    the text formats take any bytes to their decoding (which refuses a zip as not UTF-8)."""
    pdf, archive = samples.pdf_bytes([["Hund"]]), samples.docx_bytes()
    if SPEC[suffix].zipped:
        with pytest.raises(DocumentError, match=rf"^x{suffix}: not a \{suffix} file: it is a PDF file$"):
            read_document(pdf, suffix, name=f"x{suffix}")
        with pytest.raises(DocumentError, match=rf"^x{suffix}: not a \{suffix} file \(a \{suffix} is a zip "
                                                rf"archive; this is not one\)$"):
            read_document(b"Hund rot", suffix, name=f"x{suffix}")
    elif suffix == ".pdf":
        with pytest.raises(DocumentError, match=r"^x\.pdf: not a \.pdf file: it is a zip archive$"):
            read_document(archive, suffix, name="x.pdf")
    else:  # XLIFF is XML, parsed from its bytes (its declared encoding)
        refusal = (r"not well-formed XML" if suffix == ".xliff" else
                   r"(line \d+: )?not valid UTF-8 \(byte 0x[0-9a-f]{2} at offset \d+\)")
        with pytest.raises(DocumentError, match=rf"^x{suffix}: {refusal}"):
            read_document(archive, suffix, name=f"x{suffix}")
    with pytest.raises(DocumentError, match=rf"^x{suffix}: the file is empty$"):
        read_document(b" \n", suffix, name=f"x{suffix}")


def test_importing_the_package_loads_no_format():
    """The readers import their modules when a document is read: `import attnmt.documents` (which
    every `attnmt translate` and the service do) loads no parser library and no format module."""
    heavy = ["bs4", "srt", "polib", "pypdf", "docx", "pptx", "odf", "attnmt.documents.markup",
             "attnmt.documents.plain", "attnmt.documents.office", "attnmt.documents.epub",
             "attnmt.documents.subtitles", "attnmt.documents.po", "attnmt.documents.xliff", "attnmt.documents.paragraphs",
             "attnmt.documents.xml_text"]
    code = f"import sys, attnmt.documents; print([m for m in {heavy!r} if m in sys.modules])"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"

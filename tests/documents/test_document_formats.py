"""Each document format translated by a fake translator whose output and alignment are known
(document_samples.fake_translate: words through the toy lexicon, in reverse order), then read
back with the format's own library: the structure is the source's, every paragraph, run, cell,
subtitle and entry is translated, formatting sits on the words aligned to it, and what is not
prose (numbers, URLs, placeholders, code) is kept."""

from __future__ import annotations

import io
import zipfile

import pytest
from lxml import etree

from attnmt.documents import read_document, translate_document

from support import document_samples as samples
from support.document_samples import fake_text, fake_word


def word_text(element) -> str:
    """The text of w:t elements under `element` (python-docx's element classes change itertext)."""
    return "".join(t.text or "" for t in element.iter(f"{{{samples.W}}}t"))


def translated(data: bytes, suffix: str, **kw) -> bytes:
    return translate_document(data, suffix, samples.fake_translate, name=f"sample{suffix}", **kw)


def test_docx_runs_tables_headers_footnotes_links():
    import docx

    source = samples.docx_bytes()
    out = docx.Document(io.BytesIO(translated(source, ".docx")))
    first = out.paragraphs[0]
    assert first.text == fake_text("Hund rot Haus blau .")  # ". blue house red dog"
    runs = {run.text.strip(): (run.bold, run.italic) for run in first.runs if run.text.strip()}
    assert runs[fake_word("rot")] == (True, None) and runs[fake_word("blau")] == (None, True)
    assert all(not (run.bold or run.italic) for run in first.runs if run.text.strip() not in ("red", "blue"))
    second = out.paragraphs[1]._p
    link = second.find(f"{{{samples.W}}}hyperlink")
    assert link is not None and link.get(f"{{{samples.R}}}id")  # the link and its target kept
    assert word_text(link).strip() == " ".join(fake_word(w) for w in ("klein", "katze"))
    assert second.find(f".//{{{samples.W}}}footnoteReference") is not None
    assert " ".join(word_text(second).split()) == fake_text("Mann Katze klein Ball")
    cells = [[cell.text for cell in row.cells] for row in out.tables[0].rows]
    assert cells == [[fake_text("Katze blau"), "12"], [fake_text("Baum groß ."), fake_text("Auto klein")]]
    section = out.sections[0]
    assert section.header.paragraphs[0].text == fake_text("Mann Frau")
    assert section.footer.paragraphs[0].text == fake_text("Kind Ball")
    notes = etree.fromstring(zipfile.ZipFile(io.BytesIO(translated(source, ".docx"))).read("word/footnotes.xml"))
    note = [n for n in notes if n.get(f"{{{samples.W}}}id") == "1"][0]
    assert note.find(f".//{{{samples.W}}}footnoteRef") is not None
    assert " ".join(word_text(note).split()) == fake_text("Wasser blau Baum")
    names = zipfile.ZipFile(io.BytesIO(source)).namelist()
    assert zipfile.ZipFile(io.BytesIO(translated(source, ".docx"))).namelist() == names  # every part, in order


def test_pptx_slides_runs_and_notes():
    import pptx

    out = pptx.Presentation(io.BytesIO(translated(samples.pptx_bytes(), ".pptx")))
    first, second = out.slides
    assert first.shapes.title.text == fake_text("Haus rot")
    body = first.placeholders[1].text_frame.paragraphs
    assert body[0].text == fake_text("Hund groß Ball .")
    assert [run.text for run in body[0].runs if run.font.bold] == [fake_word("groß")]
    assert body[1].text == "2024"  # a number: kept
    assert first.notes_slide.notes_text_frame.text == fake_text("Frau Kind Wasser")
    assert second.shapes.title.text == fake_text("Auto blau klein")


def _odf_texts(data: bytes, part: str = "content.xml") -> list[str]:
    from odf.opendocument import load
    from odf import teletype, text

    document = load(io.BytesIO(data))
    root = document.topnode if part == "content.xml" else document.masterstyles
    return [teletype.extractText(p) for p in root.getElementsByType(text.P) + root.getElementsByType(text.H)]


def test_odt_spans_notes_tables_header():
    from odf import teletype, text
    from odf.opendocument import load

    out = translated(samples.odt_bytes(), ".odt")
    document = load(io.BytesIO(out))
    heading = document.text.getElementsByType(text.H)[0]
    assert teletype.extractText(heading) == fake_text("Haus groß")
    spans = document.text.getElementsByType(text.Span)
    assert [teletype.extractText(s) for s in spans] == [fake_word("rot")]
    note = document.text.getElementsByType(text.Note)[0]
    assert teletype.extractText(note.getElementsByType(text.NoteBody)[0]) == fake_text("Wasser blau")
    cells = [teletype.extractText(p) for p in document.text.getElementsByType(text.P)
             if p.parentNode.qname[1] == "table-cell"]
    assert cells == [fake_text("Katze klein"), "7", fake_text("Baum"), fake_text("Auto rot")]
    header = document.masterstyles.getElementsByType(text.P)
    assert [teletype.extractText(p) for p in header] == [fake_text("Mann Frau")]
    assert zipfile.ZipFile(io.BytesIO(out)).infolist()[0].filename == "mimetype"


def test_odp_slides():
    from odf import draw, teletype, text
    from odf.opendocument import load

    document = load(io.BytesIO(translated(samples.odp_bytes(), ".odp")))
    pages = document.presentation.getElementsByType(draw.Page)
    texts = [[teletype.extractText(p) for p in page.getElementsByType(text.P)] for page in pages]
    assert texts == [[fake_text("Hund rot Haus .")], [fake_text("Katze blau Baum .")]]
    assert [teletype.extractText(s) for s in document.presentation.getElementsByType(text.Span)] == ["red", "blue"]


def test_epub_chapters_toc_title():
    out = zipfile.ZipFile(io.BytesIO(translated(samples.epub_bytes(), ".epub")))
    first = out.infolist()[0]
    assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
    for n in range(2):
        chapter = etree.fromstring(out.read(f"OEBPS/chap{n}.xhtml"))  # still well-formed XML
        ns = {"x": "http://www.w3.org/1999/xhtml"}
        paragraphs = chapter.findall(".//x:p", ns)
        assert " ".join("".join(paragraphs[0].itertext()).split()) == fake_text("Hund rot Haus .")
        assert paragraphs[0].find("x:b", ns).text == fake_word("rot")
        assert chapter.find(".//x:h1", ns).text == fake_text(f"Kapitel {n + 1}")
        assert chapter.find(".//x:pre", ns).text == "code < x"  # code kept
        assert chapter.find(".//x:title", ns).text == fake_text("Haus")
    ncx = etree.fromstring(out.read("OEBPS/toc.ncx"))
    labels = [e.text for e in ncx.iter("{http://www.daisy.org/z3986/2005/ncx/}text")]
    assert labels == [fake_text("Mann Frau Kind")] + [fake_text("Wasser Ball")] * 2
    opf = etree.fromstring(out.read("OEBPS/content.opf"))
    assert opf.find(".//{http://purl.org/dc/elements/1.1/}title").text == fake_text("Mann Frau Kind")
    assert out.read("OEBPS/style.css") == b"p { color: red; }"


def test_srt_numbers_timings_lines_tags():
    import srt

    source = list(srt.parse(samples.SRT))
    out = list(srt.parse(translated(samples.SRT.encode(), ".srt").decode()))
    assert [(s.index, s.start, s.end) for s in out] == [(s.index, s.start, s.end) for s in source]
    assert out[0].content == fake_text("Hund rot Haus .")
    assert out[1].content.split("\n") and len(out[1].content.split("\n")) == 2  # two lines, as the source
    assert " ".join(out[1].content.split()) == fake_text("Katze blau Baum groß Auto .")
    assert out[2].content == f"{fake_word('frau')} <i>{fake_word('mann')}</i>"
    assert out[3].content == "♪ ♪"


def test_po_plurals_placeholders_comments():
    import polib

    po = polib.pofile(translated(samples.po_text().encode(), ".po", target_lang="en").decode())
    entries = {(e.msgctxt, e.msgid): e for e in po}
    first = entries[(None, "Hund rot %s Haus")]
    assert first.msgstr.count("%s") == 1 and " ".join(first.msgstr.replace("%s", " ").split()) == fake_text("Hund rot Haus")
    assert first.occurrences == [("app.py", "12")] and first.comment == "a dog" and first.tcomment == "translator note"
    assert first.flags == ["python-format", "fuzzy"]  # machine output, marked for review
    second = entries[("menu", "Katze {name} blau")]
    assert "{name}" in second.msgstr and " ".join(second.msgstr.replace("{name}", " ").split()) == fake_text("Katze blau")
    plural = entries[(None, "Ein Ball")]
    assert plural.msgstr_plural[0] == fake_text("Ein Ball")
    assert "%(count)d" in plural.msgstr_plural[1]
    assert " ".join(plural.msgstr_plural[1].replace("%(count)d", " ").split()) == fake_text("Ball Wasser")
    assert entries[(None, "%d / %d")].msgstr == "%d / %d"  # no prose: the same
    assert entries[(None, "Baum groß\n")].msgstr == fake_text("Baum groß") + "\n"  # the newline gettext checks
    obsolete = [e for e in po if e.obsolete]
    assert [(e.msgid, e.msgstr) for e in obsolete] == [("Auto alt", "car old")]
    assert po.metadata["Language"] == "en" and po.metadata["Project-Id-Version"] == "toy 1.0"


@pytest.mark.parametrize("version", ["1.2", "2.0"])
def test_xliff_targets_with_inline_codes(version):
    source = samples.XLIFF12 if version == "1.2" else samples.XLIFF20
    root = etree.fromstring(translated(source.encode(), ".xliff", target_lang="en"))
    ns = {"x": root.nsmap[None]}
    if version == "1.2":
        units = {u.get("id"): u for u in root.iterfind(".//x:trans-unit", ns)}
        assert root.find("x:file", ns).get("target-language") == "en"
        first = units["1"].find("x:target", ns)
        assert " ".join("".join(first.itertext()).split()) == fake_text("Hund rot Haus")
        assert first.find("x:g", ns).get("id") == "1" and first.find("x:g", ns).text == fake_word("rot")
        second = units["2"].findall("x:target", ns)
        assert [t.text for t in second] == ["alt"] and second[0].get("state") is None  # a translation there: kept
        again = etree.fromstring(translated(source.encode(), ".xliff", target_lang="en", retranslate=True))
        second = [u for u in again.iterfind(".//x:trans-unit", ns) if u.get("id") == "2"][0].findall("x:target", ns)
        assert len(second) == 1 and second[0].find("x:x", ns) is not None  # replaced, the code kept
        assert second[0].get("state") == "needs-review-translation"
        assert units["3"].find("x:target", ns) is None  # translate="no"
        fourth = "".join(units["4"].find("x:target", ns).itertext())
        assert "%s" in fourth and " ".join(fourth.replace("%s", " ").split()) == fake_text("Mann Frau")
    else:
        assert root.get("trgLang") == "en"
        segments = list(root.iterfind(".//x:segment", ns))
        targets = [" ".join("".join(s.find("x:target", ns).itertext()).split()) for s in segments]
        assert targets == [fake_text("Hund groß Ball"), fake_text("Kind Wasser"), fake_text("Auto blau")]
        assert segments[0].find("x:target/x:pc", ns).text == fake_word("groß")
        assert segments[1].find("x:target/x:ph", ns) is not None


def test_pdf_text_out():
    lines = ["Hund rot Haus Katze blau Baum Auto rot", "Ball .", "Mann Frau Kind Wasser groß klein Hund", "Haus ."]
    data = samples.pdf_bytes([lines, ["Mann Frau ."]])
    document = read_document(data, ".pdf")
    paragraphs = [" ".join(lines[:2]), " ".join(lines[2:]), "Mann Frau ."]  # a short line ending a sentence ends one
    assert document.sentences == paragraphs
    out = document.render(samples.fake_translate(document.sentences)).decode()
    pages = out.split("\f")
    assert [[line for line in page.split("\n") if line] for page in pages] == [
        [fake_text(paragraphs[0]), fake_text(paragraphs[1])], [fake_text(paragraphs[2])]]


def test_txt_and_html_through_the_package():
    out = translated("Hund rot .\n\n  Katze blau\r\n42\n".encode(), ".txt").decode()
    assert out == f"{fake_text('Hund rot .')}\n\n  {fake_text('Katze blau')}\r\n42\n"
    html = translated(b"<p>Hund <b>rot</b> Haus</p>", ".html").decode()
    assert html == f"<p>{fake_word('haus')} <b>{fake_word('rot')}</b> {fake_word('hund')}</p>"


def test_code_runs_and_urls_are_kept_in_word():
    import docx

    document = docx.Document()
    p = document.add_paragraph("Hund siehe https://example.org/a?b=1 und ")
    code = p.add_run("print(x)")
    code.font.name = "Courier New"
    p.add_run(" Haus")
    document.add_paragraph("3.14")
    buffer = io.BytesIO()
    document.save(buffer)
    read = read_document(buffer.getvalue(), ".docx")
    assert read.sentences == ["Hund siehe und Haus"]  # the URL and the code run are not the model's to read
    out = docx.Document(io.BytesIO(read.render(samples.fake_translate(read.sentences))))
    texts = [run.text for run in out.paragraphs[0].runs]
    assert "https://example.org/a?b=1" in texts and "print(x)" in texts
    assert [r.font.name for r in out.paragraphs[0].runs if r.text == "print(x)"] == ["Courier New"]
    assert out.paragraphs[1].text == "3.14"


@pytest.mark.parametrize("mimetype,suffix", [("text-web", ".odt"), ("text-web", ".oth"), ("text-template", ".ott"),
                                             ("presentation-template", ".otp")])
def test_opendocument_web_pages_and_templates_are_read(mimetype, suffix):
    """Issue 65 D: an ODF text-web document (LibreOffice's Writer/Web) was refused as "not a .odt"."""
    from odf import teletype, text
    from odf.opendocument import load

    source = samples.odp_bytes() if mimetype.startswith("presentation") else samples.odt_bytes()
    data = samples.zip_with(source, {"mimetype": f"application/vnd.oasis.opendocument.{mimetype}".encode()})
    out = translated(data, suffix)
    assert zipfile.ZipFile(io.BytesIO(out)).read("mimetype").decode().endswith(mimetype)  # what it was
    document = load(io.BytesIO(out))
    first = (document.presentation if mimetype.startswith("presentation") else document.text).getElementsByType(text.P)[0]
    assert teletype.extractText(first) == fake_text("Hund rot Haus .") or fake_word("hund") in teletype.extractText(first)

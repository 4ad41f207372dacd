"""POST /translate_file with every document format, over real HTTP on the toy RNN: the download
is read back with the format's own library, and each paragraph, cell, slide, subtitle and entry
equals the same run's translation of that text made in this process. Hostile files get 400 / 413
naming the part, and the server goes on serving; /frontend/settings lists every format."""

from __future__ import annotations

import io
import re
import zipfile

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from lxml import etree

from attnmt.documents import SUFFIXES, read_document

from support import document_samples as samples
from support.format_samples import SPEC, sample

LT = {"source": "de", "target": "en"}


@pytest.fixture(scope="module")
def server(toy_translator):
    from support.servers import ThreadServer

    server = ThreadServer(toy_translator, file_limit_kb=1000, max_sentences=5000)
    yield server
    server.stop()


def upload(server, name: str, data: bytes, **fields) -> httpx.Response:
    return httpx.post(server.url + "/translate_file", files={"file": (name, data)}, data={**LT, **fields}, timeout=120)


def round_trip(server, name: str, data: bytes) -> httpx.Response:
    r = upload(server, name, data)
    assert r.status_code == 200, r.text
    got = httpx.get(r.json()["translatedFileUrl"], timeout=60)
    assert got.status_code == 200
    return got


def words(text: str) -> str:
    return " ".join(text.split())


def reference(toy_translator, texts: list[str]) -> list[str]:
    return [words(r.text) for r in toy_translator.translate(texts)]


def test_docx(server, toy_translator):
    import docx

    source = samples.docx_bytes(paragraphs=6)
    got = round_trip(server, "report.docx", source)
    assert got.headers["content-type"].startswith("application/vnd.openxmlformats-officedocument.wordprocessingml")
    out = docx.Document(io.BytesIO(got.content))
    src = docx.Document(io.BytesIO(source))
    paragraphs = [p.text for p in src.paragraphs]
    expected = reference(toy_translator, [words(p) for p in paragraphs])
    expected[1] = reference(toy_translator, ["Mann Katze klein Ball"])[0]  # the link's text is read inside its paragraph
    got_paragraphs = [words(p.text) for p in out.paragraphs]
    assert got_paragraphs[0] == expected[0] and got_paragraphs[2:] == expected[2:]
    assert words("".join(t.text for t in out.paragraphs[1]._p.iter(f"{{{samples.W}}}t"))) == expected[1]
    bold = [r.text.strip() for r in out.paragraphs[0].runs if r.bold]
    result = toy_translator.translate(["Hund rot Haus blau ."], alignments=True)[0]
    linked = sorted(t for s, t in result.alignment if s == 1)  # output words aligned to "rot"
    assert bold == ([" ".join(result.tokens[linked[0]:linked[-1] + 1])] if linked else [])
    cells = [[c.text for c in row.cells] for row in out.tables[0].rows]
    assert cells == [[*reference(toy_translator, ["Katze blau"]), "12"], reference(toy_translator, ["Baum groß .", "Auto klein"])]
    assert words(out.sections[0].header.paragraphs[0].text) == reference(toy_translator, ["Mann Frau"])[0]
    assert words(out.sections[0].footer.paragraphs[0].text) == reference(toy_translator, ["Kind Ball"])[0]


def test_pptx_odt_odp_epub(server, toy_translator):
    import pptx
    from odf import teletype, text
    from odf.opendocument import load

    deck = pptx.Presentation(io.BytesIO(round_trip(server, "talk.pptx", samples.pptx_bytes()).content))
    assert words(deck.slides[0].shapes.title.text) == reference(toy_translator, ["Haus rot"])[0]
    assert words(deck.slides[0].notes_slide.notes_text_frame.text) == reference(toy_translator, ["Frau Kind Wasser"])[0]
    assert words(deck.slides[1].shapes.title.text) == reference(toy_translator, ["Auto blau klein"])[0]
    source = samples.odp_bytes()
    out = load(io.BytesIO(round_trip(server, "slides.odp", source).content))
    slides = [words(teletype.extractText(p)) for p in out.presentation.getElementsByType(text.P)]
    assert slides == reference(toy_translator, ["Hund rot Haus .", "Katze blau Baum ."])  # as odp_bytes writes them
    epub = zipfile.ZipFile(io.BytesIO(round_trip(server, "book.epub", samples.epub_bytes()).content))
    chapter = etree.fromstring(epub.read("OEBPS/chap0.xhtml"))
    first = chapter.find(".//{http://www.w3.org/1999/xhtml}p")
    assert words("".join(first.itertext())) == reference(toy_translator, ["Hund rot Haus ."])[0]


def test_odt_every_paragraph_translated(server, toy_translator):
    from odf import teletype, text
    from odf.opendocument import load

    out = load(io.BytesIO(round_trip(server, "doc.odt", samples.odt_bytes()).content))
    body = [words(teletype.extractText(p)) for p in out.text.getElementsByType(text.P)]
    notes = reference(toy_translator, ["Wasser blau"])
    outer = words(teletype.extractText(out.text.getElementsByType(text.P)[0]))
    assert outer.endswith(notes[0]) or notes[0] in outer  # the note's text sits inside its paragraph
    cells = body[-4:]
    assert cells == [*reference(toy_translator, ["Katze klein"]), "7", *reference(toy_translator, ["Baum", "Auto rot"])]


def test_srt_po_xliff_pdf(server, toy_translator):
    import polib
    import srt

    subtitles = list(srt.parse(round_trip(server, "film.srt", samples.SRT.encode()).text))
    assert [(s.index, s.start) for s in subtitles] == [(s.index, s.start) for s in srt.parse(samples.SRT)]
    assert words(subtitles[0].content) == reference(toy_translator, ["Hund rot Haus ."])[0]
    assert words(subtitles[1].content) == reference(toy_translator, ["Katze blau Baum groß Auto ."])[0]
    assert subtitles[3].content == "♪ ♪"
    po = polib.pofile(round_trip(server, "app.pot", samples.po_text().encode()).text)
    assert po.metadata["Language"] == "en"
    entry = [e for e in po if e.msgid == "Hund rot %s Haus"][0]
    bare = "".join(reference(toy_translator, ["Hund rot Haus"])[0].split())  # the placeholder keeps its spaces
    assert "%s" in entry.msgstr and "".join(entry.msgstr.replace("%s", "").split()) == bare
    assert all(e.msgstr or e.msgstr_plural[0] for e in po if not e.obsolete)
    xliff = round_trip(server, "app.xlf", samples.XLIFF12.encode())
    assert xliff.headers["content-type"].startswith("application/xliff+xml")
    assert 'target-language="en"' in xliff.text and xliff.text.count("<target") == 3
    assert "<target>alt</target>" in xliff.text  # a translation there is kept (issue 65 C)
    assert xliff.text.count('state="needs-review-translation"') == 2
    pdf = round_trip(server, "scan.pdf", samples.pdf_bytes([["Hund rot Haus ."]]))
    assert pdf.headers["content-type"].startswith("text/plain")
    assert words(pdf.text) == reference(toy_translator, ["Hund rot Haus ."])[0]
    assert pdf.url.path.endswith(".txt")


def test_auto_source_reads_the_documents_text(server, toy_translator):
    import pptx

    r = upload(server, "talk.pptx", samples.pptx_bytes(), source="auto")
    assert r.status_code == 200, r.text
    deck = pptx.Presentation(io.BytesIO(httpx.get(r.json()["translatedFileUrl"]).content))
    assert words(deck.slides[0].shapes.title.text) == reference(toy_translator, ["Haus rot"])[0]


@pytest.mark.parametrize("name,suffix", [(f"x{s}", s) for s in SPEC] + [(f"x{a}", s) for s in SPEC for a in SPEC[s].aliases])
def test_every_format_comes_back_with_its_media_type(server, name, suffix):
    """Each row of the table (and each alias) through /translate_file: 200, and the download is
    the format of its translation (.pdf: .txt), sent as that format's media type."""
    output = SPEC[suffix].output
    got = round_trip(server, name, sample(suffix))
    assert got.url.path.endswith(output)
    assert got.headers["content-type"].split(";")[0] == SPEC[output].media_type
    assert got.headers["content-disposition"].endswith(f'"translated{output}"')
    read_document(got.content, output)  # the format it says it is


TEXT = "Hund rot .\n\n  Katze  blau .  \r\n\t42\n♪ ...\nKind \tBall\r\n \r\n\nMann Frau ."


def test_a_txt_upload_keeps_every_line_around_its_translation(server, toy_translator):
    """Every line kept: empty ones, lines without letters ("42", "♪ ...") as they are (as in every
    format), and each line's leading and trailing whitespace ("\r" included) around the run's own
    translation of its text, no newline added at the end; the byte-order mark is dropped by the one decode."""
    body = ("\ufeff" + TEXT).encode()
    got = round_trip(server, "a.txt", body)
    assert got.headers["content-type"] == "text/plain; charset=utf-8"

    def translated(line: str) -> str:
        return toy_translator.translate([line], split_sentences=True)[0].text

    expected = (f"{translated('Hund rot .')}\n\n  {translated('Katze blau .')}  \r\n\t42\n♪ ...\n"
                f"{translated('Kind Ball')}\r\n \r\n\n{translated('Mann Frau .')}")
    assert got.content.decode("utf-8") == expected


def test_a_txt_upload_is_the_librarys_translation_of_the_same_bytes(server, toy_translator):
    """/translate_file and documents.translate_file read .txt through the same TextDocument: the
    same bytes come back (a URL kept, placed by the alignment, in both)."""
    from attnmt.documents import translate_file

    body = (TEXT + "\nHund https://example.org/a?b=1 Haus .\n").encode()
    expected, suffix = translate_file(toy_translator, body, suffix=".txt")
    assert suffix == ".txt" and "https://example.org/a?b=1" in expected.decode()
    assert round_trip(server, "a.txt", body).content == expected
    auto = upload(server, "a.txt", body, source="auto")
    assert auto.status_code == 200, auto.text
    assert httpx.get(auto.json()["translatedFileUrl"], timeout=60).content == expected


def test_the_openapi_description_names_every_format():
    from attnmt.server.app import create_app
    from attnmt.server.settings import ServeSettings

    spec = create_app(ServeSettings(), load=lambda: None).openapi()
    body = spec["paths"]["/translate_file"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    described = body["properties"]["file"]["description"]
    for suffix, format_spec in SPEC.items():
        assert re.search(rf"\{suffix}\b", described), suffix
        for alias in format_spec.aliases:
            assert re.search(rf"\{alias}\b", described), alias
    assert ".pdf (into .txt)" in described
    downloads = spec["paths"]["/download_file/{name}"]["get"]["responses"]["200"]["content"]
    assert set(downloads) == {SPEC[s.output].media_type for s in SPEC.values()}


def test_frontend_lists_every_format(server):
    formats = httpx.get(server.url + "/frontend/settings").json()["supportedFilesFormat"]
    assert set(SUFFIXES) | {".htm", ".xlf", ".pot", ".ott", ".oth", ".odm", ".otp"} == set(formats)
    for suffix in (".docx", ".pptx", ".odt", ".odp", ".epub", ".srt", ".po", ".xliff", ".pdf"):
        assert suffix in formats


@pytest.mark.parametrize("name,make,status,pattern", [
    ("a.docx", lambda: samples.pdf_bytes([["Hund"]]), 400, r"the file: not a \.docx file: it is a PDF file"),
    ("a.docx", lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600), 400, r"OLE2 compound file"),
    ("a.odt", lambda: samples.docx_bytes(), 400, r"not a \.odt file \(content\.xml is missing\)"),
    ("a.docx", lambda: samples.docx_bytes()[:3000], 400, r"a corrupt zip archive"),
    ("a.docx", lambda: samples.zip_with(samples.docx_bytes(), {"word/document.xml": b'<!DOCTYPE d [<!ENTITY a "x">]><d/>'}),
     400, r"word/document\.xml: declares XML entities"),
    ("a.docx", lambda: samples.zip_with(samples.docx_bytes(), {}, extra={"z.bin": bytes(200_000_000)}), 413,
     r"z\.bin inflates \d+-fold|its files inflate to"),
    ("a.docx", lambda: samples.zip_with(samples.docx_bytes(), {"word/document.xml": (
        f'<w:document xmlns:w="{samples.W}"><w:body>' + "<w:p/>" * 60_000 + "</w:body></w:document>").encode()}),
     413, r"more than 50,000 paragraphs \(empty ones included\)"),
    ("a.xlsx", lambda: b"PK", 400, r"\.xlsx is not supported: send \.txt, \.html, \.docx"),
    ("a.srt", lambda: b"\nnur Text\n", 400, r"the file: line 1: not a subtitle block"),
    ("a.pdf", lambda: b"%PDF-1.4 broken", 400, r"a PDF that cannot be read|has no text"),
])
def test_hostile_files_are_refused(server, name, make, status, pattern):
    r = upload(server, name, make())
    assert r.status_code == status, r.text
    assert re.search(pattern, r.json()["error"]), r.text
    assert "Traceback" not in r.text
    assert httpx.get(server.url + "/health").status_code == 200


_DOCX: list[bytes] = []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(position=st.floats(0, 1), value=st.binary(min_size=1, max_size=6))
def test_mutated_uploads_never_get_500(server, position, value):
    if not _DOCX:
        _DOCX.append(samples.docx_bytes())
    data = _DOCX[0]
    at = int(position * (len(data) - 1))
    r = upload(server, "m.docx", data[:at] + value + data[at + len(value):])
    assert r.status_code in (200, 400, 413), r.text
    if r.status_code != 200:
        assert r.json()["error"].startswith("Invalid request: the file")


def test_retranslate_is_a_field_of_the_form(server, toy_translator):
    """A .po's existing translation is kept by default and translated again with retranslate=true
    (marked fuzzy); another value is 400."""
    import polib

    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    po.append(polib.POEntry(msgid="Hund rot", msgstr="by a person"))
    source = str(po).encode()
    assert round_trip(server, "a.po", source).content == source
    r = upload(server, "a.po", source, retranslate="true")
    assert r.status_code == 200, r.text
    entry = polib.pofile(httpx.get(r.json()["translatedFileUrl"], timeout=60).text)[0]
    assert words(entry.msgstr) == reference(toy_translator, ["Hund rot"])[0] and entry.fuzzy
    bad = upload(server, "a.po", source, retranslate="maybe")
    assert bad.status_code == 400 and bad.json()["error"] == "Invalid request: retranslate must be true or false"


def test_review_below_is_a_field_of_the_form(server, toy_translator):
    """review_below=1 marks every entry the model translated (each is less sure than 1) with its
    confidence; a value outside 0..1, one that is no number, or a format without marks is 400."""
    import polib

    source = samples.po_text().encode()
    r = upload(server, "a.po", source, review_below="1")
    assert r.status_code == 200, r.text
    entries = {e.msgid: e for e in polib.pofile(httpx.get(r.json()["translatedFileUrl"], timeout=60).text)}
    for msgid in ("Katze {name} blau", "Baum groß\n", "Ein Ball"):
        assert re.fullmatch(r"attnmt: confidence \d\.\d\d \(below 1\.00\)", entries[msgid].tcomment), msgid
    assert entries["%d / %d"].tcomment == ""
    plain = upload(server, "a.po", source, review_below="")  # empty: no marks
    assert "attnmt: confidence" not in httpx.get(plain.json()["translatedFileUrl"], timeout=60).text
    for name, data, value, message in (
            ("a.po", source, "2", "review_below=2.0 must be in 0..1"),
            ("a.po", source, "x", "review_below='x' must be a number"),
            ("a.html", b"<p>Hund rot</p>", "0.5", "review_below: the file is a .html document, which carries no "
                                                  "review marks (they are written in .docx, .odt, .po, .xliff)")):
        bad = upload(server, name, data, review_below=value)
        assert bad.status_code == 400 and bad.json()["error"] == f"Invalid request: {message}", bad.text

"""Formatting placed by a real model's alignments (markup.place_spans through every format): the toy
RNN translates documents made by python-docx, python-pptx, odfpy, srt and by hand, and each bold,
coloured, underlined or linked stretch of the source holds words of the output: its aligned
words, or the nearest free one when the model aligned none. A level of k such stretches in a
translation of m words keeps min(k, m) of them non-empty, whatever the model does (issue 65 A:
they were emptied, or left holding a space). Each paragraph's text is the model's translation
of the text written here (independent of the parser); text without letters and kept text
(domains, numbers) come back as they were (issue 65 B, 66 F); a text box inside a paragraph with
text of its own is translated (65 D)."""

from __future__ import annotations

import io
import zipfile

import pytest
from lxml import etree

from attnmt.documents import DocumentError, read_document, translate_file, translate_paragraphs

from support import document_samples as samples

W = samples.W
R = samples.R


def aligned(translator, text: str):
    return translate_paragraphs(translator, [text])[0]


def words(text: str) -> str:
    return " ".join(text.split())


def bare(text: str) -> str:
    return "".join(text.split())


def expected_count(translator, text: str, stretches: int) -> int:
    """How many of `stretches` formatted stretches of `text` must hold words: one each while the
    model's translation has words for them."""
    return min(stretches, len(aligned(translator, text).target_words))


# ---- Word ----------------------------------------------------------------------------------------

def _run(parent, text: str, **props):
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    run = OxmlElement("w:r")
    if props:
        rpr = OxmlElement("w:rPr")
        for name, value in props.items():
            element = OxmlElement(f"w:{name}")
            if value is not True:
                element.set(qn("w:val"), value)
            rpr.append(element)
        run.append(rpr)
    t = OxmlElement("w:t")
    t.text = text
    t.set("{http://www.w3.org/XML/1998/namespace}space", "preserve")
    run.append(t)
    parent.append(run)
    return run


def _link(document, paragraph, text: str, url: str):
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), document.part.relate_to(url, "http://schemas.openxmlformats.org/officeDocument/2006/"
                                                      "relationships/hyperlink", is_external=True))
    _run(link, text, rStyle="Hyperlink")
    paragraph._p.append(link)


TEXT_BOX = (f'<w:r xmlns:w="{W}" xmlns:v="urn:schemas-microsoft-com:vml"><w:pict><v:shape style="width:200pt;'
            f'height:40pt"><v:textbox><w:txbxContent><w:p><w:r><w:t>Katze blau Baum</w:t></w:r></w:p>'
            f"</w:txbxContent></v:textbox></v:shape></w:pict></w:r>")

DOCX = ["Hund rot Haus blau Katze .", "Drei Links : Hund , Katze und Baum .", "Mann Frau Kind .",
        "Siehe Hund .", "Hund rot Haus ."]


def docx_source() -> bytes:
    import docx

    document = docx.Document()
    p = document.add_paragraph()
    _run(p._p, "Hund "), _run(p._p, "rot", b=True), _run(p._p, " Haus "), _run(p._p, "blau", color="FF0000")
    _run(p._p, " Katze .")
    p = document.add_paragraph()
    _run(p._p, "Drei Links : ")
    for i, (word, sep) in enumerate((("Hund", " , "), ("Katze", " und "), ("Baum", " ."))):
        _link(document, p, word, f"https://example.org/{i}")
        _run(p._p, sep)
    p = document.add_paragraph()
    _run(p._p, "Mann "), _run(p._p, "Frau", u="wave"), _run(p._p, " Kind .")
    p = document.add_paragraph()
    _run(p._p, "Siehe "), _link(document, p, "yahoo.com", "https://yahoo.com"), _run(p._p, " Hund .")
    p = document.add_paragraph()
    _run(p._p, "Hund rot ")
    p._p.append(etree.fromstring(TEXT_BOX))
    _run(p._p, " Haus .")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _text(element) -> str:
    return "".join(t.text or "" for t in element.iter(f"{{{W}}}t"))


def _own_text(paragraph) -> str:
    """A paragraph's text without that of the text boxes inside it."""
    return "".join(t.text or "" for t in paragraph.iter(f"{{{W}}}t")
                   if not any(etree.QName(a).localname == "txbxContent" for a in t.iterancestors()))


def _stretches(paragraph, prop: str) -> list[str]:
    """The texts of the stretches of consecutive runs that have property `prop` (w:b, w:color, w:u)."""
    out, current = [], None
    for run in paragraph.iter(f"{{{W}}}r"):
        if any(etree.QName(a).localname == "txbxContent" for a in run.iterancestors()):
            continue
        has = run.find(f"{{{W}}}rPr/{{{W}}}{prop}") is not None
        if has:
            current = (current or "") + _text(run)
        elif current is not None:
            out.append(current)
            current = None
    return out + ([current] if current is not None else [])


def test_word_runs_links_and_text_boxes(translator):
    data, _ = translate_file(translator, docx_source(), suffix=".docx")
    body = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml"))
    paragraphs = body.findall(f"{{{W}}}body/{{{W}}}p")
    texts = DOCX[:3] + ["Siehe Hund ."] + ["Hund rot Haus ."]
    for paragraph, text in zip(paragraphs, texts):  # (the text box keeps the space it had before it: "red <box>.")
        assert bare(_own_text(paragraph).replace("yahoo.com", "")) == bare(aligned(translator, text).text), text
    first, links, wavy, domain, _ = paragraphs
    filled = [s for prop in ("b", "color") for s in _stretches(first, prop) if s.strip()]
    assert len(filled) == expected_count(translator, DOCX[0], 2)
    link_texts = [_text(link) for link in links.iter(f"{{{W}}}hyperlink")]
    assert len(link_texts) == 3 and sum(bool(t.strip()) for t in link_texts) == expected_count(translator, DOCX[1], 3)
    targets = [link.get(f"{{{R}}}id") for link in links.iter(f"{{{W}}}hyperlink")]
    assert len(set(targets)) == 3 and all(targets)  # each link keeps its own target
    assert [s.strip() != "" for s in _stretches(wavy, "u")] == [True]
    assert [_text(link) for link in domain.iter(f"{{{W}}}hyperlink")] == ["yahoo.com"]  # a domain is kept


def test_a_text_box_inside_a_paragraph_with_text_is_translated(translator):
    """Issue 65 D: the paragraph around the box was rewritten with a copy of the box made when it
    was read, so the box's own translation was lost."""
    data, _ = translate_file(translator, docx_source(), suffix=".docx")
    body = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml"))
    boxed = body.findall(f"{{{W}}}body/{{{W}}}p")[-1]
    box = list(boxed.iter(f"{{{W}}}txbxContent"))
    assert len(box) == 1 and words(_text(box[0])) == words(aligned(translator, "Katze blau Baum").text)
    assert bare(_own_text(boxed)) == bare(aligned(translator, "Hund rot Haus .").text)


# ---- PowerPoint ----------------------------------------------------------------------------------

PPTX = "Hund rot Haus blau Katze groß ."


def test_powerpoint_runs_underlines_and_links(translator):
    import pptx
    from pptx.enum.text import MSO_UNDERLINE
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    paragraph = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(6), Inches(1)).text_frame.paragraphs[0]
    for text, style in (("Hund ", None), ("rot", "bold"), (" Haus ", None), ("blau", "wavy"), (" Katze ", None),
                        ("groß", "link"), (" .", None)):
        run = paragraph.add_run()
        run.text = text
        if style == "bold":
            run.font.bold = True
        elif style == "wavy":
            run.font.underline = MSO_UNDERLINE.WAVY_LINE
        elif style == "link":
            run.hyperlink.address = "https://example.org/"
    buffer = io.BytesIO()
    deck.save(buffer)
    data, _ = translate_file(translator, buffer.getvalue(), suffix=".pptx")
    out = pptx.Presentation(io.BytesIO(data)).slides[0].shapes[0].text_frame.paragraphs[0]
    assert words(out.text) == words(aligned(translator, PPTX).text)
    kinds = {"bold": any(r.font.bold for r in out.runs if r.text.strip()),
             "wavy": any(r.font.underline == MSO_UNDERLINE.WAVY_LINE for r in out.runs if r.text.strip()),
             "link": any(r.hyperlink.address for r in out.runs if r.text.strip())}
    assert sum(kinds.values()) == expected_count(translator, PPTX, 3), kinds


# ---- OpenDocument --------------------------------------------------------------------------------

ODT = "Hund rot Haus blau Katze groß Baum ."


def odt_source(presentation: bool = False) -> bytes:
    from odf import draw, style, text
    from odf.opendocument import OpenDocumentPresentation, OpenDocumentText

    document = OpenDocumentPresentation() if presentation else OpenDocumentText()
    styles = {}
    for name, props in (("Bold", dict(fontweight="bold")), ("Red", dict(color="#ff0000")),
                        ("Italic", dict(fontstyle="italic"))):
        styles[name] = style.Style(name=name, family="text")
        styles[name].addElement(style.TextProperties(**props))
        document.automaticstyles.addElement(styles[name])
    p = text.P(text="Hund ")
    p.addElement(text.Span(stylename=styles["Bold"], text="rot"))
    p.addText(" Haus ")
    outer = text.Span(stylename=styles["Red"], text="blau ")
    outer.addElement(text.Span(stylename=styles["Italic"], text="Katze"))
    p.addElement(outer)
    p.addText(" ")
    p.addElement(text.A(href="https://example.org/", text="groß"))
    p.addText(" Baum .")
    if presentation:
        layout = style.PageLayout(name="Layout")
        document.automaticstyles.addElement(layout)
        master = style.MasterPage(name="Default", pagelayoutname=layout)
        document.masterstyles.addElement(master)
        page = draw.Page(name="page1", masterpagename=master)
        frame = draw.Frame(width="20cm", height="5cm", x="2cm", y="2cm")
        box = draw.TextBox()
        box.addElement(p)
        frame.addElement(box)
        page.addElement(frame)
        document.presentation.addElement(page)
    else:
        document.text.addElement(p)
        document.text.addElement(text.P(text="2024"))
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def odf_stretches(paragraph) -> list[tuple[tuple, str]]:
    """A paragraph's text as (chain, text) stretches in order: the chain names the text:span
    styles (and "a" for a link) around the text, outer first; consecutive equal chains joined."""
    out: list[list] = []

    def add(chain, value):
        if value:
            if out and out[-1][0] == chain:
                out[-1][1] += value
            else:
                out.append([chain, value])

    def walk(element, chain):
        add(chain, element.text)
        for child in element:
            name = etree.QName(child).localname if isinstance(child.tag, str) else ""
            if name == "span":
                walk(child, chain + (child.get(f"{{{ODF_TEXT}}}style-name"),))
            elif name == "a":
                walk(child, chain + ("a",))
            add(chain, child.tail)

    walk(paragraph, ())
    return [(chain, value) for chain, value in out]


@pytest.mark.parametrize("suffix", [".odt", ".odp"])
def test_opendocument_spans_nested_spans_and_links(translator, suffix):
    source = odt_source(suffix == ".odp")
    data, _ = translate_file(translator, source, suffix=suffix)

    def first_paragraph(blob):
        root = etree.fromstring(zipfile.ZipFile(io.BytesIO(blob)).read("content.xml"))
        return next(root.iter(f"{{{ODF_TEXT}}}p"))

    before = odf_stretches(first_paragraph(source))
    assert [chain for chain, _ in before if chain] == [("Bold",), ("Red",), ("Red", "Italic"), ("a",)]
    after = odf_stretches(first_paragraph(data))
    assert words("".join(value for _, value in after)) == words(aligned(translator, ODT).text)
    filled = [chain for chain, value in after if chain and value.strip()]
    assert len(filled) == expected_count(translator, ODT, 4) and len(set(filled)) == len(filled)
    if suffix == ".odt":
        root = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("content.xml"))
        assert [p.text for p in root.iter(f"{{{ODF_TEXT}}}p")][1] == "2024"


# ---- EPUB, HTML, subtitles, text, PDF -----------------------------------------------------------------

def test_epub_chapters_keep_tags_and_text_without_letters(translator):
    chapter = ('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml">'
               '<head><title>Haus</title></head><body><p>Hund <b>rot</b> Haus <a href="x.html">blau</a> Katze .</p>'
               "<p>2024</p><p>12.03.2024</p><p>***</p></body></html>")
    book = samples.zip_with(samples.epub_bytes(chapters=1), {"OEBPS/chap0.xhtml": chapter.encode()})
    data, _ = translate_file(translator, book, suffix=".epub")
    root = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/chap0.xhtml"))  # well-formed XML
    ns = {"x": "http://www.w3.org/1999/xhtml"}
    first, *rest = root.findall(".//x:p", ns)
    assert words("".join(first.itertext())) == words(aligned(translator, "Hund rot Haus blau Katze .").text)
    filled = [bool((first.find(f"x:{tag}", ns).text or "").strip()) for tag in ("b", "a")]
    assert sum(filled) == expected_count(translator, "Hund rot Haus blau Katze .", 2)
    assert [p.text for p in rest] == ["2024", "12.03.2024", "***"]  # issue 66 F: kept, not invented sentences


def test_an_epub_chapter_whose_doctype_declares_entities_is_refused():
    chapter = ('<?xml version="1.0"?><!DOCTYPE html [<!ENTITY e "Hund">]><html xmlns="http://www.w3.org/1999/xhtml">'
               "<body><p>&e; rot</p></body></html>")
    book = samples.zip_with(samples.epub_bytes(chapters=1), {"OEBPS/chap0.xhtml": chapter.encode()})
    with pytest.raises(DocumentError, match=r"b\.epub: OEBPS/chap0\.xhtml: its DOCTYPE declares an internal subset"):
        read_document(book, ".epub", name="b.epub")


def test_html_links_and_text_without_letters(translator):
    html = ('<p>Drei Links : <a href="/1">Hund</a> , <a href="/2">Katze</a> und <a href="/3">Baum</a> .</p>'
            "<p>2024</p><p>—</p><p>siehe <a href='https://yahoo.com'>yahoo.com</a></p>")
    data, _ = translate_file(translator, html.encode(), suffix=".html")
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data.decode(), "html.parser")
    first, year, dash, domain = soup.find_all("p")
    assert words(first.get_text()) == words(aligned(translator, "Drei Links : Hund , Katze und Baum .").text)
    assert sum(bool(a.get_text().strip()) for a in first.find_all("a")) == \
        expected_count(translator, "Drei Links : Hund , Katze und Baum .", 3)
    assert (year.get_text(), dash.get_text(), domain.a.get_text()) == ("2024", "—", "yahoo.com")


SRT = """1
00:00:01,000 --> 00:00:02,000
<i>Hund</i> rot <b>Katze</b> blau

2
00:00:02,000 --> 00:00:03,000
<i>2024</i>

3
00:00:03,000 --> 00:00:04,000
Hund rot Haus .
"""


def test_subtitles_with_tags_and_without_letters(translator):
    import srt

    data, _ = translate_file(translator, SRT.encode(), suffix=".srt")
    first, year, plain = srt.parse(data.decode())
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(first.content, "html.parser")
    assert words(soup.get_text()) == words(aligned(translator, "Hund rot Katze blau").text)
    assert sum(bool(soup.find(tag).get_text().strip()) for tag in ("i", "b")) == \
        expected_count(translator, "Hund rot Katze blau", 2)
    assert year.content == "<i>2024</i>"  # issue 66 F: a tagged subtitle without letters is kept
    assert words(plain.content) == words(aligned(translator, "Hund rot Haus .").text)


def test_text_and_pdf(translator):
    data, _ = translate_file(translator, "Hund rot .\n2024\n  Katze blau\n***\n".encode(), suffix=".txt")
    assert data.decode() == f"{aligned(translator, 'Hund rot .').text}\n2024\n  {aligned(translator, 'Katze blau').text}\n***\n"
    data, suffix = translate_file(translator, samples.pdf_bytes([["Hund rot Haus ."], ["Katze blau ."]]), suffix=".pdf")
    pages = data.decode().split("\f")
    assert suffix == ".txt" and [words(p) for p in pages] == [words(aligned(translator, t).text)
                                                              for t in ("Hund rot Haus .", "Katze blau .")]


def test_word_fields_keep_their_code_and_result(translator):
    """Found by the sweep: a complex field's result (PAGE -> "1") was model text, translated away,
    and a w:fldSimple's result (DATE -> "heute") was translated; a HYPERLINK field's result is the
    text a reader sees, and is translated. The parts of a field stay together, no space between."""
    import docx
    from docx.oxml import parse_xml

    ns = f'xmlns:w="{W}"'
    document = docx.Document()
    p = document.add_paragraph()
    for xml in ('<w:r {ns}><w:t xml:space="preserve">Seite </w:t></w:r>', '<w:r {ns}><w:fldChar w:fldCharType="begin"/></w:r>',
                '<w:r {ns}><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>',
                '<w:r {ns}><w:fldChar w:fldCharType="separate"/></w:r>', '<w:r {ns}><w:t>1</w:t></w:r>',
                '<w:r {ns}><w:fldChar w:fldCharType="end"/></w:r>', '<w:r {ns}><w:t xml:space="preserve"> Hund blau .</w:t></w:r>',
                '<w:fldSimple {ns} w:instr=" DATE "><w:r><w:t>heute</w:t></w:r></w:fldSimple>'):
        p._p.append(parse_xml(xml.format(ns=ns)))
    link = document.add_paragraph()
    for xml in ('<w:r {ns}><w:fldChar w:fldCharType="begin"/></w:r>',
                '<w:r {ns}><w:instrText xml:space="preserve"> HYPERLINK "https://example.org" </w:instrText></w:r>',
                '<w:r {ns}><w:fldChar w:fldCharType="separate"/></w:r>', '<w:r {ns}><w:t>Katze blau</w:t></w:r>',
                '<w:r {ns}><w:fldChar w:fldCharType="end"/></w:r>'):
        link._p.append(parse_xml(xml.format(ns=ns)))
    buffer = io.BytesIO()
    document.save(buffer)
    data, _ = translate_file(translator, buffer.getvalue(), suffix=".docx")
    first, second = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml")).iter(f"{{{W}}}p")

    def parts(paragraph):
        out = []
        for element in paragraph.iter(f"{{{W}}}fldChar", f"{{{W}}}instrText", f"{{{W}}}t"):
            name = etree.QName(element).localname
            out.append(element.get(f"{{{W}}}fldCharType") if name == "fldChar" else (name, element.text))
        return out

    got = parts(first)
    start = got.index("begin")
    assert got[start:start + 5] == ["begin", ("instrText", " PAGE "), "separate", ("t", "1"), "end"]
    assert first.find(f"{{{W}}}fldSimple/{{{W}}}r/{{{W}}}t").text == "heute"
    assert bare(_text(first).replace("1", "", 1).replace("heute", "")) == bare(aligned(translator, "Seite Hund blau .").text)
    result = [text for kind, text in (p for p in parts(second) if isinstance(p, tuple)) if kind == "t"]
    assert bare("".join(result)) == bare(aligned(translator, "Katze blau").text)

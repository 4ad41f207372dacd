"""Documents of every format for the tests, each made with its own library (python-docx,
python-pptx, odfpy, srt, polib) or, where none is used (EPUB, XLIFF, PDF), written by hand; the
texts use the toy lexicon (tests/support/toy.py) so the toy runs translate them word for word.

`fake_translate` is a translator whose output and alignment are known: each word through LEXICON
(others upper-cased), in reverse order, aligned word for word."""

from __future__ import annotations

import copy
import io
import zipfile

from attnmt.documents.markup import AlignedTranslation

from support import toy

LEXICON = dict(zip(toy.SRC_WORDS, toy.TGT_WORDS))


def fake_word(word: str) -> str:
    return LEXICON.get(word.lower(), word.upper())


def fake_text(sentence: str) -> str:
    """What fake_translate makes of `sentence` (the reference the tests compare with)."""
    return " ".join(fake_word(w) for w in reversed(sentence.split()))


def fake_translate(sentences: list[str]) -> list[AlignedTranslation]:
    out = []
    for sentence in sentences:
        words = sentence.split()
        target = [fake_word(w) for w in reversed(words)]
        out.append(AlignedTranslation(" ".join(target), words, target,
                                      [(len(words) - 1 - i, i) for i in range(len(words))]))
    return out


# ---- Word -----------------------------------------------------------------------------------------

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
FOOTNOTES = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:footnotes xmlns:w="{W}"><w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>
<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p></w:footnote>
<w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t xml:space="preserve"> Wasser blau Baum</w:t></w:r></w:p></w:footnote>
</w:footnotes>"""


def docx_bytes(*, paragraphs: int = 0) -> bytes:
    """A .docx: a paragraph with bold and italic runs and a link, a footnote, a table (one cell
    only a number), a header and a footer; `paragraphs` more plain paragraphs."""
    import docx
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = docx.Document()
    p = document.add_paragraph("Hund ")
    p.add_run("rot").bold = True
    p.add_run(" Haus ")
    p.add_run("blau").italic = True
    p.add_run(" .")
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), document.part.relate_to("https://example.org", docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK,
                                                  is_external=True))
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = "Katze klein"
    run.append(text)
    link.append(run)
    second = document.add_paragraph("Mann ")
    second._p.append(link)
    second.add_run(" Ball")
    note = second.add_run()
    reference = OxmlElement("w:footnoteReference")
    reference.set(qn("w:id"), "1")
    note._r.append(reference)
    table = document.add_table(rows=2, cols=2)
    for (row, col), value in {(0, 0): "Katze blau", (0, 1): "12", (1, 0): "Baum groß .", (1, 1): "Auto klein"}.items():
        table.cell(row, col).text = value
    document.sections[0].header.paragraphs[0].text = "Mann Frau"
    document.sections[0].footer.paragraphs[0].text = "Kind Ball"
    for i in range(paragraphs):
        document.add_paragraph(["Hund rot .", "Katze blau Haus .", "Kind Ball Wasser groß ."][i % 3])
    out = io.BytesIO()
    document.save(out)
    return add_footnotes(out.getvalue())


def add_footnotes(data: bytes) -> bytes:
    """The .docx with a footnotes part (python-docx writes none): its relationship and content type."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            body = source.read(info)
            if info.filename == "[Content_Types].xml":
                body = body.replace(b"</Types>", b'<Override PartName="/word/footnotes.xml" ContentType="application/'
                                    b'vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"/></Types>')
            elif info.filename == "word/_rels/document.xml.rels":
                body = body.replace(b"</Relationships>", b'<Relationship Id="rIdFn1" Type="http://schemas.openxmlformats'
                                    b'.org/officeDocument/2006/relationships/footnotes" Target="footnotes.xml"/>'
                                    b"</Relationships>")
            target.writestr(info, body)
        target.writestr("word/footnotes.xml", FOOTNOTES)
    return out.getvalue()


# ---- PowerPoint -------------------------------------------------------------------------------------

def pptx_bytes() -> bytes:
    """Two slides (a title; a body with a bold run) and speaker notes."""
    import pptx

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = "Haus rot"
    body = slide.placeholders[1].text_frame
    body.text = "Hund "
    bold = body.paragraphs[0].add_run()
    bold.text = "groß"
    bold.font.bold = True
    tail = body.paragraphs[0].add_run()
    tail.text = " Ball ."
    body.add_paragraph().text = "2024"
    slide.notes_slide.notes_text_frame.text = "Frau Kind Wasser"
    second = presentation.slides.add_slide(presentation.slide_layouts[5])
    second.shapes.title.text = "Auto blau klein"
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


# ---- OpenDocument -------------------------------------------------------------------------------------

def odt_bytes() -> bytes:
    """A heading, a paragraph with a bold span and a footnote, a table, a header (styles.xml)."""
    from odf import style, table, text
    from odf.opendocument import OpenDocumentText

    document = OpenDocumentText()
    bold = style.Style(name="Bold", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    layout = style.PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = style.MasterPage(name="Standard", pagelayoutname=layout)
    header = style.Header()
    header.addElement(text.P(text="Mann Frau"))
    master.addElement(header)
    document.masterstyles.addElement(master)
    document.text.addElement(text.H(outlinelevel=1, text="Haus groß"))
    p = text.P(text="Hund ")
    p.addElement(text.Span(stylename=bold, text="rot"))
    p.addText(" Ball ")
    note = text.Note(id="ftn1", noteclass="footnote")
    note.addElement(text.NoteCitation(text="1"))
    body = text.NoteBody()
    body.addElement(text.P(text="Wasser blau"))
    note.addElement(body)
    p.addElement(note)
    p.addText(" .")
    document.text.addElement(p)
    grid = table.Table(name="T")
    grid.addElement(table.TableColumn(numbercolumnsrepeated=2))
    for values in (("Katze klein", "7"), ("Baum", "Auto rot")):
        row = table.TableRow()
        for value in values:
            cell = table.TableCell()
            cell.addElement(text.P(text=value))
            row.addElement(cell)
        grid.addElement(row)
    document.text.addElement(grid)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def odp_bytes() -> bytes:
    """Two slides, each a text box; the first with a bold span."""
    from odf import draw, style, text
    from odf.opendocument import OpenDocumentPresentation

    document = OpenDocumentPresentation()
    layout = style.PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = style.MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    bold = style.Style(name="Bold", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    for number, (first, strong, last) in enumerate((("Hund", "rot", "Haus ."), ("Katze", "blau", "Baum ."))):
        page = draw.Page(name=f"page{number + 1}", masterpagename=master)
        frame = draw.Frame(width="20cm", height="5cm", x="2cm", y="2cm")
        box = draw.TextBox()
        p = text.P(text=first + " ")
        p.addElement(text.Span(stylename=bold, text=strong))
        p.addText(" " + last)
        box.addElement(p)
        frame.addElement(box)
        page.addElement(frame)
        document.presentation.addElement(page)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


# ---- EPUB -----------------------------------------------------------------------------------------------

CHAPTER = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="de">
<head><title>Haus</title></head>
<body><h1>Kapitel {n}</h1><p>Hund <b>rot</b> Haus .</p><p>Katze <i>blau</i> Baum .<br/>Auto</p>
<pre>code &lt; x</pre></body></html>"""


def epub_bytes(chapters: int = 2) -> bytes:
    """mimetype (first, stored), container, package document (title), toc.ncx, XHTML chapters, a CSS file."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" '
                   'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile '
                   'full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        items = "".join(f'<item id="c{n}" href="chap{n}.xhtml" media-type="application/xhtml+xml"/>' for n in range(chapters))
        spine = "".join(f'<itemref idref="c{n}"/>' for n in range(chapters))
        z.writestr("OEBPS/content.opf", '<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" '
                   'version="2.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
                   '<dc:title>Mann Frau Kind</dc:title><dc:identifier id="id">x</dc:identifier><dc:language>de</dc:language>'
                   f'</metadata><manifest><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>{items}'
                   '<item id="css" href="style.css" media-type="text/css"/></manifest>'
                   f'<spine toc="ncx">{spine}</spine></package>')
        z.writestr("OEBPS/toc.ncx", '<?xml version="1.0" encoding="UTF-8"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" '
                   'version="2005-1"><head/><docTitle><text>Mann Frau Kind</text></docTitle><navMap>'
                   + "".join(f'<navPoint id="n{n}" playOrder="{n + 1}"><navLabel><text>Wasser Ball</text></navLabel>'
                             f'<content src="chap{n}.xhtml"/></navPoint>' for n in range(chapters))
                   + "</navMap></ncx>")
        z.writestr("OEBPS/style.css", "p { color: red; }")
        for n in range(chapters):
            z.writestr(f"OEBPS/chap{n}.xhtml", CHAPTER.format(n=n + 1))
    return out.getvalue()


# ---- subtitles, PO, XLIFF -----------------------------------------------------------------------------------

SRT = """1
00:00:01,000 --> 00:00:02,500
Hund rot Haus .

2
00:00:03,000 --> 00:00:05,000
Katze blau
Baum groß Auto .

3
00:00:05,500 --> 00:00:06,000
<i>Mann</i> Frau

4
00:00:07,000 --> 00:00:08,000
♪ ♪
"""


def po_text() -> str:
    """A .pot-like file (its Language empty): placeholders, a plural, context, comments, flags, an
    obsolete entry."""
    import polib

    po = polib.POFile()
    po.metadata = {"Project-Id-Version": "toy 1.0", "Language": "", "Content-Type": "text/plain; charset=UTF-8",
                   "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    po.append(polib.POEntry(msgid="Hund rot %s Haus", msgstr="", occurrences=[("app.py", "12")],
                            comment="a dog", tcomment="translator note", flags=["python-format"]))
    po.append(polib.POEntry(msgid="Katze {name} blau", msgstr="", msgctxt="menu"))
    po.append(polib.POEntry(msgid="Ein Ball", msgid_plural="%(count)d Ball Wasser", msgstr_plural={0: "", 1: ""}))
    po.append(polib.POEntry(msgid="%d / %d", msgstr=""))
    po.append(polib.POEntry(msgid="Baum groß\n", msgstr=""))
    po.append(polib.POEntry(msgid="Auto alt", msgstr="car old", obsolete=True))
    return str(po)


XLIFF12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="app" source-language="de" datatype="plaintext">
    <body>
      <trans-unit id="1"><source>Hund <g id="1">rot</g> Haus</source></trans-unit>
      <trans-unit id="2"><source>Katze<x id="2"/> blau</source><target>alt</target></trans-unit>
      <trans-unit id="3" translate="no"><source>Baum</source></trans-unit>
      <trans-unit id="4"><source>Mann %s Frau</source></trans-unit>
    </body>
  </file>
</xliff>
"""

XLIFF20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="de">
  <file id="f1">
    <unit id="u1"><segment><source>Hund <pc id="1">groß</pc> Ball</source></segment></unit>
    <unit id="u2"><segment><source>Kind<ph id="2"/> Wasser</source></segment><segment><source>Auto blau</source></segment></unit>
  </file>
</xliff>
"""


# ---- PDF --------------------------------------------------------------------------------------------

def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A PDF whose pages show `pages`' lines in Helvetica (objects and xref written by hand)."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", None, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for lines in pages:
        body = "BT /F1 12 Tf 72 720 Td 16 TL " + " ".join(f"({line}) Tj T*" for line in lines) + " ET"
        objects.append(f"<< /Length {len(body)} >>\nstream\n{body}\nendstream")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {len(objects)} 0 R "
                       f"/Resources << /Font << /F1 3 0 R >> >> >>")
        kids.append(len(objects))
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>"
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def zip_with(data: bytes, replaced: dict[str, bytes], *, extra: dict[str, bytes] | None = None) -> bytes:
    """A copy of zip `data` with some entries' bytes replaced (and `extra` entries added)."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            target.writestr(copy.copy(info), replaced.get(info.filename, source.read(info)))
        for name, body in (extra or {}).items():
            target.writestr(name, body)
    return out.getvalue()

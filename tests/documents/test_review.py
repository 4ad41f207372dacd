"""documents/review.py and the marks each format writes (comments.py, po.py, xliff.py): a paragraph
translated less confidently than `review_below` gets its format's review mark (a Word comment, an
ODF annotation, a .po translator comment, an XLIFF note), read back here by each format's own
parser (lxml on the parts, python-docx, polib, msgfmt); one at or above the threshold, or of unknown
confidence, gets none; a mark changes no translated text, and with the setting off every file is
byte for byte what it was. The translator is a stub whose confidences are known (each sentence's,
from CONFIDENCE), and the command line runs the toy RNN end to end."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import zipfile

import pytest
from lxml import etree

from attnmt.documents import ReadSettings, read_document, translate_document
from attnmt.documents.review import LowConfidence, low_confidence

from support import document_samples as samples

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
DC = "http://purl.org/dc/elements/1.1/"

# the sentences (as the documents give them to the model) the stub is unsure of; the rest get 0.9
CONFIDENCE = {"Katze blau": 0.31, "Mann Frau": 0.2, "Wasser blau Baum": 0.1, "Wasser blau": 0.1,
              "Haus groß": 0.45, "Hund rot Haus": 0.5, "Ein Ball": 0.4, "Ball Wasser": 0.25, "Kind Wasser": 0.3}


def unsure(sentences: list[str]):
    """samples.fake_translate, each translation with its sentence's confidence (CONFIDENCE, else 0.9)."""
    return [dataclasses.replace(t, confidence=CONFIDENCE.get(s, 0.9))
            for s, t in zip(sentences, samples.fake_translate(sentences))]


def unknown(sentences: list[str]):
    """samples.fake_translate: no confidence at all."""
    return samples.fake_translate(sentences)


def parts(data: bytes) -> dict[str, bytes]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    return {name: archive.read(name) for name in archive.namelist()}


# ---- the rule -------------------------------------------------------------------------------------

def test_only_a_known_confidence_below_the_threshold_is_marked():
    assert low_confidence(0.31, 0.5) == LowConfidence(0.31, 0.5)
    assert low_confidence(0.5, 0.5) is None and low_confidence(0.9, 0.5) is None
    assert low_confidence(None, 0.5) is None and low_confidence(0.1, None) is None
    assert low_confidence(0.0, 0.0) is None  # nothing is below 0


def test_the_text_never_reads_as_the_threshold_it_is_below():
    assert LowConfidence(0.31, 0.5).text == "confidence 0.31 (below 0.50)"
    assert LowConfidence(0.31, 0.5).comment == "attnmt: confidence 0.31 (below 0.50): please review"
    assert LowConfidence(0.4999, 0.5).text == "confidence 0.49 (below 0.50)"  # cut, not rounded up to 0.50
    assert LowConfidence(0.29, 0.5).text.startswith("confidence 0.29 ")  # 0.29 * 100 is 28.999...
    assert LowConfidence(0.3, 0.355).text == "confidence 0.30 (below 0.355)"


@pytest.mark.parametrize("value,message", [(1.5, r"review_below=1\.5 must be in 0\.\.1"),
                                           (-0.1, r"review_below=-0\.1 must be in 0\.\.1"),
                                           (float("nan"), r"review_below=nan must be in 0\.\.1"),
                                           (True, r"review_below=True must be a number"),
                                           ("0.5", r"review_below='0\.5' must be a number")])
def test_a_threshold_outside_0_to_1_is_refused_by_name(value, message):
    with pytest.raises(ValueError, match=message):
        ReadSettings(review_below=value)
    with pytest.raises(ValueError, match=message):
        translate_document(samples.po_text().encode(), ".po", unsure, review_below=value)


@pytest.mark.parametrize("suffix,data", [(".html", b"<p>Hund rot</p>"), (".txt", b"Hund rot\n"),
                                         (".srt", samples.SRT.encode()), (".pptx", None)])
def test_a_format_without_marks_is_refused_not_silently_unmarked(suffix, data):
    data = samples.pptx_bytes() if data is None else data
    with pytest.raises(ValueError, match=rf"review_below: a{suffix} is a \{suffix} document, which carries no "
                                         rf"review marks \(they are written in \.docx, \.odt, \.po, \.xliff\)"):
        translate_document(data, suffix, unsure, name=f"a{suffix}", review_below=0.5)


@pytest.mark.parametrize("suffix,make", [(".docx", lambda: samples.docx_bytes(paragraphs=3)),
                                         (".odt", samples.odt_bytes), (".po", lambda: samples.po_text().encode()),
                                         (".xliff", lambda: samples.XLIFF12.encode()),
                                         (".xliff", lambda: samples.XLIFF20.encode())])
def test_off_or_all_sure_the_file_is_byte_for_byte_unmarked(suffix, make):
    data = make()
    plain = translate_document(data, suffix, unknown)
    assert translate_document(data, suffix, unsure) == plain  # off: confidences are not read
    assert translate_document(data, suffix, unsure, review_below=0.1) == plain  # none below 0.1
    assert translate_document(data, suffix, unknown, review_below=1.0) == plain  # no confidence known


# ---- Word -------------------------------------------------------------------------------------------

def word_comments(data: bytes) -> tuple[dict[str, str], dict[str, str]]:
    """(comment id -> its author and text, from word/comments.xml; paragraph text -> the id of the
    comment spanning it in word/document.xml), each check of the anchoring asserted on the way."""
    files = parts(data)
    comments = {c.get(f"{{{W}}}id"): (c.get(f"{{{W}}}author"), "".join(c.itertext()))
                for c in etree.fromstring(files["word/comments.xml"]).iter(f"{{{W}}}comment")}
    anchored = {}
    for paragraph in etree.fromstring(files["word/document.xml"]).iter(f"{{{W}}}p"):
        starts = paragraph.findall(f"{{{W}}}commentRangeStart")
        if not starts:
            continue
        number = starts[0].get(f"{{{W}}}id")
        children = list(paragraph)
        first_content = 1 if children[0].tag == f"{{{W}}}pPr" else 0
        assert children[first_content] is starts[0]  # it opens the paragraph's content
        assert children[-2].tag == f"{{{W}}}commentRangeEnd" and children[-2].get(f"{{{W}}}id") == number
        assert children[-1].find(f"{{{W}}}commentReference").get(f"{{{W}}}id") == number  # a run of its own
        text = "".join(t.text or "" for t in paragraph.iter(f"{{{W}}}t"))
        anchored[text] = number
    return comments, anchored


def test_docx_a_word_comment_around_each_unsure_body_paragraph():
    import docx

    data = samples.docx_bytes(paragraphs=3)
    out = translate_document(data, ".docx", unsure, review_below=0.5)
    comments, anchored = word_comments(out)
    # body paragraphs only: the table cell "Katze blau" (0.31), not the header (0.2) nor the footnote (0.1)
    assert set(anchored) == {samples.fake_text("Katze blau")}
    (number,) = anchored.values()
    assert comments == {number: ("attnmt", "attnmt: confidence 0.31 (below 0.50): please review")}
    files = parts(out)
    relationships = etree.fromstring(files["word/_rels/document.xml.rels"])
    assert [r.get("Target") for r in relationships
            if r.get("Type").endswith("/relationships/comments")] == ["comments.xml"]
    assert len({r.get("Id") for r in relationships}) == len(relationships)
    types = etree.fromstring(files["[Content_Types].xml"])
    assert [o.get("ContentType") for o in types if o.get("PartName") == "/word/comments.xml"] == [
        "application/vnd.openxmlformats-officedocument.wordprocessingml.comments+xml"]
    document = docx.Document(io.BytesIO(out))
    plain = docx.Document(io.BytesIO(translate_document(data, ".docx", unsure)))
    assert [p.text for p in document.paragraphs] == [p.text for p in plain.paragraphs]  # the text is the same
    cells = [[cell.text for row in d.tables[0].rows for cell in row.cells] for d in (document, plain)]
    assert cells[0] == cells[1]
    if hasattr(document, "comments"):  # python-docx >= 1.2 reads comments
        assert [(c.author, c.text) for c in document.comments] == [
            ("attnmt", "attnmt: confidence 0.31 (below 0.50): please review")]


def test_docx_comments_join_the_documents_own_with_new_ids():
    docx = pytest.importorskip("docx")
    document = docx.Document()
    first = document.add_paragraph("Katze blau")
    if not hasattr(document, "add_comment"):
        pytest.skip("python-docx < 1.2 writes no comments")
    document.add_comment(first.runs, text="Hund", author="a person", initials="P")
    document.add_paragraph("Auto klein")
    source = io.BytesIO()
    document.save(source)
    out = translate_document(source.getvalue(), ".docx", unsure, review_below=0.5)
    comments, anchored = word_comments(out)
    assert sorted(author for author, _ in comments.values()) == ["a person", "attnmt"]
    assert comments[anchored[samples.fake_text("Katze blau")]][0] == "attnmt"  # one range each, ids apart
    files = parts(out)
    assert sum(r.get("Type").endswith("/relationships/comments")
               for r in etree.fromstring(files["word/_rels/document.xml.rels"])) == 1


# ---- OpenDocument -----------------------------------------------------------------------------------

def test_odt_an_annotation_spans_each_unsure_paragraph():
    from odf.opendocument import load

    out = translate_document(samples.odt_bytes(), ".odt", unsure, review_below=0.5)
    root = etree.fromstring(parts(out)["content.xml"])
    marked = {}
    for paragraph in root.iter(f"{{{TEXT}}}p", f"{{{TEXT}}}h"):
        annotation = paragraph.find(f"{{{OFFICE}}}annotation")
        if annotation is None:
            continue
        assert paragraph.index(annotation) == 0 and not paragraph.text  # at the paragraph's start
        assert annotation.findtext(f"{{{DC}}}creator") == "attnmt"
        end = list(paragraph)[-1]
        assert end.tag == f"{{{OFFICE}}}annotation-end" and end.get(f"{{{OFFICE}}}name") == annotation.get(
            f"{{{OFFICE}}}name") and not end.tail  # after the paragraph's last content
        shown = (annotation.tail or "") + "".join(child.tail or "" for child in paragraph if child is not annotation)
        marked[shown] = annotation.findtext(f"{{{TEXT}}}p")
    # in content.xml: the heading (0.45) and the footnote's paragraph (0.1); styles.xml's header (0.2) has none
    assert marked == {samples.fake_text("Haus groß"): "attnmt: confidence 0.45 (below 0.50): please review",
                      samples.fake_text("Wasser blau"): "attnmt: confidence 0.10 (below 0.50): please review"}
    assert len({a.get(f"{{{OFFICE}}}name") for a in root.iter(f"{{{OFFICE}}}annotation")}) == 2
    assert b"annotation" not in parts(out)["styles.xml"]
    load(io.BytesIO(out))  # odfpy reads it


# ---- gettext ----------------------------------------------------------------------------------------

def test_po_a_translator_comment_on_each_unsure_entry(msgfmt, tmp_path):
    import polib

    source = samples.po_text()
    out = translate_document(source.encode(), ".po", unsure, review_below=0.5)
    entries = {e.msgid: e for e in polib.pofile(out.decode())}
    assert entries["Hund rot %s Haus"].tcomment == "translator note"  # 0.5 is not below 0.5
    assert entries["Katze {name} blau"].tcomment == "attnmt: confidence 0.31 (below 0.50)"
    assert entries["Ein Ball"].tcomment == "attnmt: confidence 0.25 (below 0.50)"  # its less sure form's
    assert entries["Baum groß\n"].tcomment == "" and entries["%d / %d"].tcomment == ""
    assert all(e.fuzzy for e in entries.values() if e.msgid and not e.obsolete)
    plain = polib.pofile(translate_document(source.encode(), ".po", unsure).decode())
    assert [(e.msgid, e.msgstr, e.msgstr_plural, e.flags) for e in plain] == [
        (e.msgid, e.msgstr, e.msgstr_plural, e.flags) for e in entries.values()]
    path = tmp_path / "out.po"
    path.write_bytes(out)
    for check in (["-c"], ["-c", "--use-fuzzy"]):
        run = subprocess.run([msgfmt, *check, "-o", "/dev/null", str(path)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr


def test_po_the_comment_comes_first_in_the_entrys_comments():
    out = translate_document(samples.po_text().encode(), ".po", unsure, review_below=0.6).decode()
    block = next(b for b in out.split("\n\n") if 'msgid "Hund rot %s Haus"' in b)
    assert block.splitlines()[:5] == ["# attnmt: confidence 0.50 (below 0.60)", "# translator note", "#. a dog",
                                      "#: app.py:12", "#, python-format, fuzzy"]


# ---- XLIFF ------------------------------------------------------------------------------------------

def test_xliff_1_a_note_after_each_unsure_target():
    ns = "urn:oasis:names:tc:xliff:document:1.2"
    out = translate_document(samples.XLIFF12.encode(), ".xliff", unsure, review_below=0.6)
    units = {u.get("id"): u for u in etree.fromstring(out).iter(f"{{{ns}}}trans-unit")}
    first = units["1"]
    assert [etree.QName(c).localname for c in first] == ["source", "target", "note"]
    note = first.find(f"{{{ns}}}note")
    assert (note.get("from"), note.get("priority"), note.text) == ("attnmt", "1", "confidence 0.50 (below 0.60)")
    assert first.find(f"{{{ns}}}target").get("state") == "needs-review-translation"
    assert units["4"].find(f"{{{ns}}}note").text == "confidence 0.20 (below 0.60)"  # "Mann Frau"
    assert units["2"].find(f"{{{ns}}}note") is None and units["3"].find(f"{{{ns}}}note") is None  # not written


def test_xliff_1_an_indented_unit_keeps_its_layout():
    source = ('<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file original="a" '
              'source-language="de" datatype="plaintext"><body>\n  <trans-unit id="1">\n    <source>Katze blau'
              '</source>\n  </trans-unit>\n</body></file></xliff>')
    out = translate_document(source.encode(), ".xliff", unsure, review_below=0.5).decode()
    plain = translate_document(source.encode(), ".xliff", unsure).decode()
    target = '<target state="needs-review-translation" state-qualifier="mt-suggestion">blue cat</target>'
    indent = plain[plain.index(target) - 3:plain.index(target)]  # the target's own line and indentation
    assert indent.startswith("\n") and not indent.strip()
    assert out == plain.replace(target, f'{target}{indent}<note from="attnmt" priority="1">confidence 0.31 '
                                         f'(below 0.50)</note>')


def test_xliff_2_a_note_in_the_units_notes_before_its_segments():
    ns = "urn:oasis:names:tc:xliff:document:2.0"
    out = translate_document(samples.XLIFF20.encode(), ".xliff", unsure, review_below=0.5)
    units = {u.get("id"): u for u in etree.fromstring(out).iter(f"{{{ns}}}unit")}
    assert units["u1"].find(f"{{{ns}}}notes") is None  # "Hund groß Ball": 0.9
    second = units["u2"]
    assert [etree.QName(c).localname for c in second] == ["notes", "segment", "segment"]
    (note,) = second.find(f"{{{ns}}}notes")
    assert (note.get("category"), note.get("priority"), note.text) == (
        "attnmt", "1", "segment 1: confidence 0.30 (below 0.50)")  # the unit's first segment, "Kind Wasser"


def test_xliff_2_a_unit_with_notes_and_original_data_gets_one_more_note_in_order():
    ns = "urn:oasis:names:tc:xliff:document:2.0"
    source = (f'<xliff version="2.0" xmlns="{ns}" srcLang="de"><file id="f"><unit id="u"><notes><note>a person'
              f'</note></notes><originalData><data id="d1">&lt;b&gt;</data></originalData><segment><source>Katze '
              f'blau</source></segment></unit></file></xliff>')
    out = translate_document(source.encode(), ".xliff", unsure, review_below=0.5)
    unit = etree.fromstring(out).find(f".//{{{ns}}}unit")
    assert [etree.QName(c).localname for c in unit] == ["notes", "originalData", "segment"]
    assert [(n.get("category"), n.text) for n in unit.find(f"{{{ns}}}notes")] == [
        (None, "a person"), ("attnmt", "confidence 0.31 (below 0.50)")]


def sure(sentences: list[str]):
    """samples.fake_translate, every translation at 0.9."""
    return [dataclasses.replace(t, confidence=0.9) for t in samples.fake_translate(sentences)]


@pytest.mark.parametrize("data,mark", [(samples.po_text().encode(), b"# attnmt: confidence"),
                                       (samples.XLIFF12.encode(), b'from="attnmt"'),
                                       (samples.XLIFF20.encode(), b'category="attnmt"')],
                         ids=["po", "xliff-1.2", "xliff-2.0"])
def test_a_mark_left_by_an_earlier_run_goes_with_the_translation_it_was_about(data, mark):
    """Translated again (retranslate), an entry or unit keeps no stale mark: none when the new
    translation is sure, one (not two) when it is not."""
    suffix = ".po" if mark.startswith(b"#") else ".xliff"
    marked = translate_document(data, suffix, unsure, review_below=0.5)
    assert mark in marked
    again = translate_document(marked, suffix, sure, review_below=0.5, retranslate=True)
    assert mark not in again and b"<notes>" not in again
    assert again == translate_document(marked, suffix, sure, retranslate=True)  # the setting off: the same
    fresh = translate_document(data, suffix, unsure, review_below=0.5, retranslate=True)  # every entry, once
    assert translate_document(marked, suffix, unsure, review_below=0.5, retranslate=True).count(mark) == \
        fresh.count(mark)
    kept = translate_document(marked, suffix, sure, review_below=0.5)  # not translated again: left as it was
    assert kept.count(mark) == marked.count(mark)


def test_docx_a_text_box_gets_one_comment_not_one_in_its_fallback_copy_too():
    """A text box is written twice (mc:Choice for Word 2010 and later, mc:Fallback's VML for older
    readers): both copies are translated, only the one Word draws is commented."""
    mc = "http://schemas.openxmlformats.org/markup-compatibility/2006"
    box = '<w:txbxContent><w:p><w:r><w:t>Katze blau</w:t></w:r></w:p></w:txbxContent>'
    paragraph = (f'<w:p><w:r><mc:AlternateContent xmlns:mc="{mc}"><mc:Choice Requires="wps"><w:drawing>'
                 f'<wps:wsp xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:txbx>'
                 f'{box}</wps:txbx></wps:wsp></w:drawing></mc:Choice><mc:Fallback><w:pict><v:shape xmlns:v="urn:'
                 f'schemas-microsoft-com:vml"><v:textbox>{box}</v:textbox></v:shape></w:pict></mc:Fallback>'
                 f'</mc:AlternateContent></w:r></w:p>')
    data = samples.docx_bytes()
    body = parts(data)["word/document.xml"].replace(b"<w:body>", b"<w:body>" + paragraph.encode(), 1)
    out = translate_document(samples.zip_with(data, {"word/document.xml": body}), ".docx", unsure, review_below=0.5)
    root = etree.fromstring(parts(out)["word/document.xml"])
    starts = root.findall(f".//{{{W}}}commentRangeStart")
    texts = ["".join(t.text for t in s.getparent().iter(f"{{{W}}}t")) for s in starts]
    assert texts == [samples.fake_text("Katze blau")] * 2  # the text box's Choice copy, and the table cell
    assert [etree.QName(a).localname for a in starts[0].iterancestors()][:5] == ["p", "txbxContent", "txbx", "wsp",
                                                                                 "drawing"]
    assert len(etree.fromstring(parts(out)["word/comments.xml"])) == 2

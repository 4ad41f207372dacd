"""The page's file form in chromium (Playwright, as test_page.py): a .docx chosen, translated by
POST /translate_file, downloaded through the page's link and read back with python-docx: each
paragraph is the toy run's own translation; a refused file shows the server's message."""

from __future__ import annotations

import io


from support.page import open_page

from support import document_samples as samples


def choose(page, name: str, data: bytes) -> None:
    page.set_input_files("#file-input", files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}])
    page.click("#file-button")
    page.wait_for_function("!document.getElementById('file-button').disabled")


def test_upload_and_download_a_docx(page, served, toy_translator):
    import docx

    open_page(page, served.url, "rnn")
    page.wait_for_function("document.getElementById('file-formats').textContent.includes('.docx')")
    assert ".pptx" in page.get_attribute("#file-input", "accept")
    source = samples.docx_bytes(paragraphs=3)
    choose(page, "bericht.docx", source)
    assert page.is_visible("#file-download"), page.text_content("#file-message")
    with page.expect_download() as download:
        page.click("#file-download")
    assert download.value.suggested_filename == "translated.docx"  # the server's name
    out = docx.Document(io.BytesIO(open(download.value.path(), "rb").read()))
    paragraphs = [p.text for p in docx.Document(io.BytesIO(source)).paragraphs][2:]
    assert [p.text for p in out.paragraphs][2:] == [r.text for r in toy_translator.translate(paragraphs)]
    assert [r.text.strip() for r in out.paragraphs[0].runs if r.bold]  # the bold run is there


def test_a_refused_file_shows_the_message(page, served):
    open_page(page, served.url, "rnn")
    choose(page, "kaputt.docx", samples.pdf_bytes([["Hund"]]))
    assert "not a .docx file: it is a PDF file" in page.text_content("#file-message")
    assert page.is_hidden("#file-download")

"""`attnmt translate RUN -i FILE.docx -o OUT.docx` and the Python API (documents.translate_file) on
the toy RNN: the output is the format read back by its library, each paragraph the run's own
translation of it; bad files and wrong -o names are one line on stderr and exit 2."""

from __future__ import annotations

import re

import pytest

from attnmt.cli import main

from support import document_samples as samples


def test_translate_docx_from_the_command_line(toy_run, translator, tmp_path):
    import docx

    source = tmp_path / "report.docx"
    source.write_bytes(samples.docx_bytes(paragraphs=3))
    out = tmp_path / "report.en.docx"
    assert main(["translate", str(toy_run), "-i", str(source), "-o", str(out), "--beam", "2"]) == 0
    paragraphs = [p.text for p in docx.Document(str(source)).paragraphs][2:]
    expected = [r.text for r in translator.translate(paragraphs, beam_size=2)]
    assert [p.text for p in docx.Document(str(out)).paragraphs][2:] == expected


def test_python_api_takes_bytes_and_paths(translator, tmp_path):
    import srt

    from attnmt.documents import translate_file

    data, suffix = translate_file(translator, samples.SRT.encode(), suffix=".srt", beam_size=1)
    assert suffix == ".srt"
    first = list(srt.parse(data.decode()))[0]
    assert first.content == translator.translate(["Hund rot Haus ."], beam_size=1)[0].text
    path = tmp_path / "a.pdf"
    path.write_bytes(samples.pdf_bytes([["Katze blau ."]]))
    data, suffix = translate_file(translator, path, beam_size=1)
    assert suffix == ".txt" and data.decode().strip() == translator.translate(["Katze blau ."], beam_size=1)[0].text


@pytest.mark.parametrize("name,data,output,pattern", [
    ("a.docx", b"%PDF-1.4 x", "b.docx", r"a\.docx: not a \.docx file: it is a PDF file"),
    ("a.docx", b"PK\x03\x04broken", "b.docx", r"a\.docx: a corrupt zip archive"),
    ("a.docx", None, "b.txt", r"-o .*b\.txt: a \.docx document is translated into a \.docx file"),
    ("a.pdf", None, "b.pdf", r"a \.pdf document is translated into a \.txt file"),
    ("a.docx", None, None, r"-i .*a\.docx: a \.docx document is written to a file: give -o FILE\.docx"),
    ("a.odt", None, "b.odt", r"--n-best applies to line files"),
])
def test_refusals_are_one_line_and_exit_2(toy_run, tmp_path, capsys, name, data, output, pattern):
    source = tmp_path / name
    source.write_bytes(data if data is not None else (samples.pdf_bytes([["Hund"]]) if name.endswith(".pdf")
                                                      else samples.docx_bytes() if name.endswith(".docx")
                                                      else samples.odt_bytes()))
    argv = ["translate", str(toy_run), "-i", str(source)] + (["-o", str(tmp_path / output)] if output else [])
    argv += ["--n-best", "2", "--beam", "2"] if "n-best" in pattern else []
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert re.search(pattern, err), err
    assert not (tmp_path / (output or "x")).exists()


@pytest.mark.parametrize("name,document", [
    ("a.txt", False), ("A.TXT", False), ("notes", False), ("a.xlsx", False), ("a.tsv", False),  # line files
    ("a.html", True), ("a.htm", True), ("a.docx", True), ("A.PPTX", True), ("a.odt", True), ("a.odp", True),
    ("a.epub", True), ("a.srt", True), ("a.po", True), ("a.pot", True), ("a.xliff", True), ("a.XLF", True),
    ("a.pdf", True),
])
def test_which_inputs_are_documents(name, document):
    """`translate -i`: every format of the table is a document, by its extension or an alias in
    any case, except .txt, which stays a line file there (the library and the service read .txt
    as a document)."""
    from argparse import Namespace

    from attnmt.commands import document_files

    assert document_files.wanted(Namespace(input=name)) is document
    assert document_files.wanted(Namespace(input=None)) is False


def test_retranslate_reaches_the_command_line(toy_run, translator, tmp_path, capsys):
    """A .po's existing translation is kept by `translate -i x.po -o y.po`, translated again (and
    marked fuzzy) with --retranslate; a line file refuses the flag in one line."""
    import polib

    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    po.append(polib.POEntry(msgid="Hund rot", msgstr="by a person"))
    source = tmp_path / "x.po"
    source.write_text(str(po), encoding="utf-8")
    kept, again = tmp_path / "kept.po", tmp_path / "again.po"
    assert main(["translate", str(toy_run), "-i", str(source), "-o", str(kept)]) == 0
    assert main(["translate", str(toy_run), "-i", str(source), "-o", str(again), "--retranslate"]) == 0
    assert kept.read_bytes() == source.read_bytes()
    entry = polib.pofile(str(again))[0]
    assert entry.msgstr == translator.translate(["Hund rot"], split_sentences=True)[0].text and entry.fuzzy
    lines = tmp_path / "a.txt"
    lines.write_text("Hund rot\n")
    assert main(["translate", str(toy_run), "-i", str(lines), "--retranslate"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--retranslate applies to documents" in err


def test_review_below_reaches_the_command_line(toy_run, translator, tmp_path, capsys):
    """`translate -i x.po -o y.po --review-below 1`: every entry the model translated is less sure
    than 1, and its comment gives the run's own confidence in it (a paragraph's: its least sure
    sentence's); the other flags of the rule refuse in one line: a format without marks, a line
    file, a value outside 0..1."""
    import polib

    source = tmp_path / "x.po"
    source.write_text(samples.po_text(), encoding="utf-8")
    out = tmp_path / "y.po"
    assert main(["translate", str(toy_run), "-i", str(source), "-o", str(out), "--review-below", "1"]) == 0
    entries = {e.msgid: e for e in polib.pofile(str(out))}
    for msgid, read in (("Katze {name} blau", "Katze blau"), ("Baum groß\n", "Baum groß")):  # as the model reads them
        expected = translator.translate([read], split_sentences=True)[0].confidence
        shown = re.fullmatch(r"attnmt: confidence (\d\.\d\d) \(below 1\.00\)", entries[msgid].tcomment)
        assert shown and expected - 0.011 < float(shown.group(1)) <= expected + 1e-6, (entries[msgid].tcomment, expected)
        assert entries[msgid].fuzzy
    assert entries["%d / %d"].tcomment == ""  # not translated: no letters
    page = tmp_path / "a.html"
    page.write_text("<p>Hund rot</p>")
    lines = tmp_path / "a.txt"
    lines.write_text("Hund rot\n")
    for argv, message in (
            (["-i", str(page), "-o", str(tmp_path / "b.html"), "--review-below", "0.5"],
             f"--review-below: -i {page} is a .html document, which carries no review marks (they are written in "
             f".docx, .odt, .po, .xliff)"),
            (["-i", str(lines), "--review-below", "0.5"], "--review-below marks documents")):
        assert main(["translate", str(toy_run), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err, err
    with pytest.raises(SystemExit) as exited:  # argparse's usage, then the error
        main(["translate", str(toy_run), "-i", str(source), "-o", str(tmp_path / "z.po"), "--review-below", "1.5"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("argument --review-below: 1.5 must be at most 1")
    assert not (tmp_path / "b.html").exists() and not (tmp_path / "z.po").exists()

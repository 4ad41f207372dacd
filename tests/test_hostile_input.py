"""Hostile and broken input: every case gets a clear message or a sane result, never a crash."""

import gzip
import re
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data.corpus import read_parallel
from attnmt.errors import DataError
from attnmt.training import train
from attnmt.translator import Translator


@pytest.fixture(scope="module")
def translator(toy_run):
    return Translator.load(toy_run, device="cpu")


# ----------------------------------------------------------------------------- the translation API

@pytest.mark.parametrize("text", ["", " ", "\t \u3000", "\n"])
def test_empty_and_whitespace_inputs_give_empty_translations(translator, text):
    result = translator.translate([text], beam_size=3)[0]
    assert result.text == "" and result.tokens == [] and result.attention.shape == (0, len(result.source_tokens))


def test_unknown_words_and_odd_unicode_translate(translator):
    inputs = ["Xylophon Quark Zebra .", "😀 🐕 hund", "e\u0301\u0301\u0301 kind", "مرحبا هند", "\u202e hund \u202c",
              "hund\x00katze", "\x07\x1b[31m rot", "Hund" * 50]
    results = translator.translate(inputs, beam_size=2)
    assert len(results) == len(inputs)
    for result in results:
        assert isinstance(result.text, str)
        assert result.attention.shape == (len(result.tokens), len(result.source_tokens))


def test_very_long_input_is_cut_with_a_warning(translator, caplog):
    text = "hund katze " * 200_000  # 2.2 MB on one line
    with caplog.at_level(logging.WARNING, logger="attnmt.decoding"):
        result = translator.translate([text], beam_size=1)[0]
    assert len(result.source_tokens) == translator.cfg.search.max_input_tokens
    assert "cut" in caplog.text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(max_size=40), min_size=1, max_size=4))
def test_random_unicode_never_crashes(translator, texts):
    results = translator.translate(texts, beam_size=2)
    assert [type(r.text) for r in results] == [str] * len(texts)


def test_translate_cli_survives_bad_bytes(toy_run, tmp_path, capsys):
    path = tmp_path / "in.txt"
    path.write_bytes(b"hund \xff\xfe katze .\r\n\r\nrot\x00 .\n")
    assert main(["translate", str(toy_run), "-i", str(path), "--beam", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


# ----------------------------------------------------------------------------- broken data files

def test_mixed_line_endings_and_gzip(tmp_path):
    (tmp_path / "a.de").write_bytes(b"eins\r\nzwei\ndrei\r\n")
    with gzip.open(tmp_path / "a.en.gz", "wb") as handle:
        handle.write(b"one\ntwo\r\nthree\n")
    corpus = read_parallel(tmp_path / "a.de", tmp_path / "a.en.gz")
    assert corpus.src == ["eins", "zwei", "drei"] and corpus.tgt == ["one", "two", "three"]


@pytest.mark.parametrize(
    ("src", "tgt", "message"),
    [
        (b"a\nb\n", b"a\n", r"a.de has 2 lines, .*a.en has 1"),
        (b"gut\n\xff\n", b"x\ny\n", r"a.de:2: invalid UTF-8"),
        (b"gut\nb\x00ad\n", b"x\ny\n", r"a.de:2: NUL byte"),
    ],
)
def test_broken_files_name_file_and_line(tmp_path, src, tgt, message):
    (tmp_path / "a.de").write_bytes(src)
    (tmp_path / "a.en").write_bytes(tgt)
    with pytest.raises(DataError, match=message):
        read_parallel(tmp_path / "a.de", tmp_path / "a.en")


def test_missing_training_file_is_named(tmp_path, toy_config):
    cfg = load_config(toy_config, [f"data.train={tmp_path}/nothing"])
    with pytest.raises(DataError, match=r"nothing.de: file not found"):
        train(cfg, tmp_path / "run")


def test_a_folder_given_as_the_training_corpus_is_said_to_be_one(tmp_path, toy_config, toy_corpus, capsys):
    """Issue 50: `data.train: FOLDER` was "FOLDER.de: file not found"; `attnmt train` says it is a folder."""
    from attnmt.cli import main

    assert main(["train", str(toy_config), "--run-dir", str(tmp_path / "run"), "--set",
                 f"data.train={toy_corpus}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{toy_corpus}: is a folder; name a corpus by the prefix of its files" in err[0], err
    assert "Traceback" not in err[0] and not (tmp_path / "run" / "checkpoints").exists()


def test_megabyte_line_in_training_data_is_dropped_and_counted(tmp_path, toy_corpus, toy_config, caplog):
    src = (toy_corpus / "train.de").read_text().splitlines()
    tgt = (toy_corpus / "train.en").read_text().splitlines()
    src[5], tgt[5] = "hund " * 250_000, "dog " * 250_000
    (toy_corpus / "train.de").write_text("\n".join(src) + "\n")
    (toy_corpus / "train.en").write_text("\n".join(tgt) + "\n")
    cfg = load_config(toy_config, ["train.epochs=1"])
    with caplog.at_level(logging.INFO):
        train(cfg, tmp_path / "run")
    assert "prepared 599 of 600 pairs read (too_long 1)" in caplog.text


# ----------------------------------------------------------------------------- files of special kinds (issue 66 C)

def _special(kind: str, folder):
    """A path of `kind` in `folder`: a FIFO with no writer, a link to /dev/zero (endless), a link to a
    FIFO, or a folder; named like a line file and like a .docx."""
    import os

    path = folder / f"{kind}.txt"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero-link":
        path.symlink_to("/dev/zero")
    elif kind == "fifo-link":
        os.mkfifo(folder / "the-fifo")
        path.symlink_to(folder / "the-fifo")
    elif kind == "folder":
        path.mkdir()
    return path


def _within(seconds, fn, *args):
    """fn(*args) in a thread; fails the test when it does not return in time (a reader blocked on a
    FIFO, or reading /dev/zero for ever) instead of hanging the suite."""
    import threading

    out = {}

    def call():
        try:
            out["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001 (reported below)
            out["error"] = err
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn.__name__}{args} did not return within {seconds} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


KINDS = ["fifo", "zero-link", "fifo-link", "folder"]
NOT_REGULAR = r"not a regular file|is a folder"


@pytest.mark.parametrize("kind", KINDS)
def test_every_cli_reader_refuses_a_file_of_a_special_kind_at_once(toy_run, tmp_path, capsys, kind):
    """A FIFO, /dev/zero behind a link, a link to a FIFO and a folder, given to each verb that reads
    a user's file: one line naming it, at once (before: a FIFO blocked for ever, /dev/zero read
    2.5 GB in 5.6 s). The one exception is the line file `translate -i` streams: a named pipe is
    read as it comes (tests/test_sharding.py::test_a_pipe_as_input_streams_on_one_process)."""
    from test_run_safety import one_error_line

    special = _special(kind, tmp_path)
    good = tmp_path / "good.txt"
    good.write_text("Hund katze .\n")
    document = tmp_path / f"{kind}.docx"
    document.symlink_to(special)
    glossary = tmp_path / f"{kind}.tsv"
    glossary.symlink_to(special)
    streamed = [] if kind.startswith("fifo") else [  # a pipe given to -i streams (`-i <(zcat f.gz)`), as before
        ["translate", str(toy_run), "-i", str(special)],
        ["translate", str(toy_run), "-i", str(special), "-o", str(tmp_path / "out.txt")]]
    argvs = [*streamed,
             ["translate", str(toy_run), "-i", str(document), "-o", str(tmp_path / "out.docx")],
             ["translate", str(toy_run), "-i", str(good), "--glossary", str(glossary)],
             ["score", str(toy_run), "-i", str(special), "-r", str(good)],
             ["compare", "--hyp", str(special), "--hyp", str(good), "--ref", str(good)]]
    for argv in argvs:
        assert _within(60, main, argv) == 2, argv
        line = one_error_line(capsys.readouterr().err, argv[0])
        assert re.search(NOT_REGULAR, line) and str(tmp_path) in line, (argv, line)
    assert not (tmp_path / "out.txt").exists() and not (tmp_path / "out.docx").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_the_python_readers_refuse_a_file_of_a_special_kind_at_once(translator, tmp_path, kind):
    from attnmt.data.corpus import read_parallel
    from attnmt.documents import DocumentError, translate_file
    from attnmt.files import sha256_file

    special = _special(kind, tmp_path)
    document = tmp_path / f"{kind}.html"
    document.symlink_to(special)
    with pytest.raises(DocumentError, match=NOT_REGULAR):
        _within(30, translate_file, translator, document)
    good = tmp_path / "good.de"
    good.write_text("Hund .\n")
    with pytest.raises(DataError, match=rf"{NOT_REGULAR}|is a folder, not a text file"):
        _within(30, lambda: read_parallel(special, good))
    if kind != "folder":
        with pytest.raises(OSError, match="not a regular file"):
            _within(30, sha256_file, special)


def test_a_document_named_txt_is_said_to_be_one(toy_run, tmp_path, capsys):
    """A .docx renamed .txt was read as a line file for 330 s (1.4 GB) with no hint: now the first
    bytes say what it is."""
    import zipfile

    from test_run_safety import one_error_line

    fake = tmp_path / "report.txt"
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr("word/document.xml", "<w:document/>")
    for argv in (["translate", str(toy_run), "-i", str(fake)],
                 ["translate", str(toy_run), "-i", str(fake), "-o", str(tmp_path / "out.txt")]):
        assert main(argv) == 2
        line = one_error_line(capsys.readouterr().err, "translate")
        assert f"{fake}: is a zip archive, not a text file of lines" in line


def test_a_document_over_its_limit_is_refused_before_it_is_read(translator, tmp_path):
    from attnmt.documents import DocumentTooLarge, Limits, translate_file

    big = tmp_path / "big.html"
    big.write_bytes(b"<p>Hund.</p>" * 1000)
    with pytest.raises(DocumentTooLarge, match=r"12,000 bytes, over the 5,000 bytes"):
        translate_file(translator, big, limits=Limits(max_unpacked_bytes=5_000))

"""Hostile and broken input: every case gets a clear message or a sane result, never a crash."""

import gzip
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

"""Reading and validating parallel text: counts, UTF-8, NUL bytes, empties, line endings."""

from __future__ import annotations

import gzip
import logging

import pytest

from attnmt.data.corpus import CorpusSpec, load_corpus, read_parallel, read_tsv
from attnmt.errors import DataError


def write(path, data: bytes | str):
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_plain_and_gzip_files_with_crlf(tmp_path):
    src = write(tmp_path / "a.de", "Hallo Welt\r\nGuten Tag\r\n")
    tgt = tmp_path / "a.en.gz"
    tgt.write_bytes(gzip.compress(b"Hello world\nGood day"))  # no final newline
    pairs = read_parallel(src, tgt)
    assert pairs.src == ["Hallo Welt", "Guten Tag"]
    assert pairs.tgt == ["Hello world", "Good day"]


def test_unicode_line_separators_do_not_split_lines(tmp_path):
    src = write(tmp_path / "a.de", "eins\u2028zwei\x85drei\nb\n")
    tgt = write(tmp_path / "a.en", "one\ntwo\n")
    assert read_parallel(src, tgt).src == ["eins\u2028zwei\x85drei", "b"]


def test_different_line_counts_name_both_files_and_counts(tmp_path):
    src = write(tmp_path / "train.de", "a\nb\nc\n")
    tgt = write(tmp_path / "train.en", "a\nb\n")
    with pytest.raises(DataError, match=r"train\.de has 3 lines, .*train\.en has 2"):
        read_parallel(src, tgt)


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = write(tmp_path / "x.de", b"gut\nauch gut\nkaputt \xff\xfe\n")
    tgt = write(tmp_path / "x.en", "a\nb\nc\n")
    with pytest.raises(DataError, match=r"x\.de:3: invalid UTF-8"):
        read_parallel(src, tgt)


def test_nul_byte_names_file_and_line(tmp_path):
    src = write(tmp_path / "x.de", "a\nb\n")
    tgt = write(tmp_path / "x.en", "a\nb\x00c\n")
    with pytest.raises(DataError, match=r"x\.en:2: NUL byte"):
        read_parallel(src, tgt)


def test_empty_lines_skip_pairs_with_one_warning(tmp_path, caplog):
    src = write(tmp_path / "e.de", "a\n   \nc\nd\n")
    tgt = write(tmp_path / "e.en", "A\nB\n\t\nD\n")
    with caplog.at_level(logging.WARNING):
        pairs = read_parallel(src, tgt)
    assert pairs.src == ["a", "d"] and pairs.tgt == ["A", "D"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "skipped 2 pair(s)" in warnings[0].getMessage()
    assert "first at line 2" in warnings[0].getMessage()


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.de: file not found"):
        read_parallel(tmp_path / "nope.de", tmp_path / "nope.en")


def test_corrupt_gzip(tmp_path):
    path = write(tmp_path / "c.de.gz", gzip.compress(b"a\n" * 100)[:-8])
    with pytest.raises(DataError, match=r"c\.de\.gz: corrupt or truncated gzip"):
        read_parallel(path, path)


def test_tsv(tmp_path, caplog):
    path = write(tmp_path / "d.tsv", "Hallo\tHello\r\nleer\t \nTschüss\tBye\n")
    with caplog.at_level(logging.WARNING):
        pairs = read_tsv(path)
    assert pairs.src == ["Hallo", "Tschüss"] and pairs.tgt == ["Hello", "Bye"]
    assert "skipped 1 pair(s)" in caplog.text


def test_tsv_wrong_column_count(tmp_path):
    path = write(tmp_path / "d.tsv", "a\tb\nonly one column\n")
    with pytest.raises(DataError, match=r"d\.tsv:2: expected 2 tab-separated columns, found 1"):
        read_tsv(path)


def test_load_corpus_own_files_by_prefix_and_tsv(tmp_path):
    write(tmp_path / "train.fr", "Bonjour\n")
    (tmp_path / "train.en.gz").write_bytes(gzip.compress(b"Hello\n"))
    write(tmp_path / "dev.tsv", "Merci\tThanks\n")
    spec = CorpusSpec(name="mine", src_lang="fr", tgt_lang="en", train=str(tmp_path / "train"),
                      valid=str(tmp_path / "dev.tsv"))
    assert load_corpus(spec, "train").src == ["Bonjour"]
    assert load_corpus(spec, "val").tgt == ["Thanks"]
    with pytest.raises(DataError, match=r"no test files configured"):
        load_corpus(spec, "test")
    with pytest.raises(DataError, match=r"train\.xx: file not found"):
        load_corpus(CorpusSpec(name="mine", src_lang="xx", tgt_lang="en", train=str(tmp_path / "train")),
                    "train")




def test_a_folder_given_as_a_corpus_is_said_to_be_a_folder(tmp_path):
    """Issue 50: a folder named as a corpus was reported as "file not found"."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "dev.tsv").mkdir()
    (tmp_path / "split.en").mkdir()
    write(tmp_path / "split.fr", "Bonjour\n")
    cases = [(str(tmp_path / "corpus"), r"corpus: is a folder; name a corpus by the prefix of its files "
                                         r"\(<prefix>\.fr and <prefix>\.en, plain or \.gz\) or by a \.tsv file, "
                                         r"e\.g\. .*corpus/train$"),
             (str(tmp_path / "dev.tsv"), r"dev\.tsv: is a folder, not a \.tsv file$"),
             (str(tmp_path / "split"), r"split\.en: is a folder, not a text file$")]
    for train, message in cases:
        with pytest.raises(DataError, match=message):
            load_corpus(CorpusSpec(name="mine", src_lang="fr", tgt_lang="en", train=train), "train")
    with pytest.raises(DataError, match=r"corpus\.fr: is a folder, not a text file"):
        (tmp_path / "corpus.fr").mkdir()
        read_parallel(tmp_path / "corpus.fr", tmp_path / "split.fr")


def test_a_training_line_past_the_bound_is_refused_naming_file_and_line(tmp_path):
    """Issue 50 F for corpora: a line past bounds.CORPUS_LINE_BYTES (a file with no line breaks) is
    refused with file:line, never read whole; a line up to it is read (data.max_len drops it later)."""
    from attnmt.bounds import CORPUS_LINE_BYTES
    from attnmt.data.corpus import CorpusFiles, read_chunks

    (tmp_path / "c.de").write_bytes(b"ein hund\n" + b"x" * (CORPUS_LINE_BYTES + 10) + b"\nzwei\n")
    (tmp_path / "c.en").write_bytes(b"a dog\nlong\ntwo\n")
    with pytest.raises(DataError, match=rf"c\.de:2: a line longer than {CORPUS_LINE_BYTES} bytes"):
        list(read_chunks(CorpusFiles(tmp_path / "c.de", tmp_path / "c.en")))
    (tmp_path / "c.de").write_bytes(b"ein hund\n" + b"x" * (CORPUS_LINE_BYTES - 1) + b"\nzwei\n")  # at the bound
    pairs = [p for chunk in read_chunks(CorpusFiles(tmp_path / "c.de", tmp_path / "c.en")) for p in chunk.pairs()]
    assert len(pairs) == 3 and len(pairs[1][1]) == CORPUS_LINE_BYTES - 1

"""Fuzzing the text pipeline: any Unicode string (lone surrogates, control characters, line and
paragraph separators, combining marks, very long words) gives one result per input through the
Python API, and any bytes on stdin or in a file give one output line per input line through
`attnmt translate` (issue 24 items 15 and "fuzzing is the method").

    ATTNMT_FUZZ=deep pytest tests/commands/test_cli_fuzz.py tests/test_text_fuzz.py   # the deeper profile
"""

import io
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnmt.cli import main

from support.fuzzing import fuzz  # tests/support/fuzzing.py: the shared profiles


# Every character some reader takes for a line break or whitespace, and other troublemakers.
ODD = ("\r\n\x00\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\t \u00a0\u200b\u200d\u202e\u3000\ufeff\ufffd\u0301"
       "\x07\x1b\x7f\ud800\udfff")
WORDS = ["Hund", "katze", "haus", ".", ",", "&amp;", "<unk>", "<eos>", "@-@", "'s", "n't", "|", "\\", "$"]
TEXTS = st.one_of(
    st.text(max_size=40),                                                   # any valid str (no surrogates)
    st.text(st.characters(blacklist_categories=()), max_size=40),          # lone surrogates too
    st.lists(st.one_of(st.sampled_from(WORDS), st.text(ODD, min_size=1, max_size=3)),
             max_size=12).map("".join),
    st.builds(lambda word, n: word * n, st.sampled_from(["Hund", "ä", "\u0301", "x" * 7]),
              st.integers(100, 3000)),                                      # very long words
)


@pytest.fixture(scope="module")
def translator(toy_run):
    from attnmt.translator import Translator

    return Translator.load(toy_run, device="cpu")


@fuzz(ci=100, deep=3000)
@given(texts=st.lists(TEXTS, min_size=1, max_size=6), beam=st.sampled_from([1, 2]))
def test_any_text_gives_one_result_per_input(translator, texts, beam):
    results = translator.translate(texts, beam_size=beam, batch_size=4)
    assert len(results) == len(texts)
    for result in results:
        assert isinstance(result.text, str)
        assert result.attention.shape == (len(result.tokens), len(result.source_tokens))


@fuzz(ci=30, deep=1000)
@given(sources=st.lists(TEXTS, min_size=1, max_size=4), targets=st.lists(TEXTS, min_size=4, max_size=4))
def test_any_text_can_be_scored(translator, sources, targets):
    results = translator.score(sources, targets[:len(sources)])
    assert len(results) == len(sources)
    assert all(r.num_tokens == len(r.target_tokens) + 1 for r in results)


def expected_lines(data: bytes) -> int:
    """Lines end at b"\\n" only; a last line without one still counts."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


LINES = st.one_of(
    st.lists(TEXTS, max_size=5).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
    st.lists(TEXTS, max_size=5).map(lambda lines: "\r\n".join(lines).encode("utf-8", "surrogatepass") + b"\r\n"),
    st.binary(max_size=200),                                                # any bytes, invalid UTF-8 too
)


@pytest.mark.parametrize("where", ["stdin", "file"])
@fuzz(ci=20, deep=500)
@given(data=LINES)
def test_translate_writes_one_line_per_input_line(toy_run, tmp_path, capsys, monkeypatch, where, data):
    argv = ["translate", str(toy_run), "--beam", "1"]
    if where == "file":
        path = tmp_path / "in.txt"
        path.write_bytes(data)
        argv += ["-i", str(path)]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data if where == "stdin" else b"")))
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == expected_lines(data) and (out == "" or out.endswith("\n"))
    assert len(out.splitlines()) == expected_lines(data)  # no other line break inside an output line

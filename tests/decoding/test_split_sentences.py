"""Translator.translate(split_sentences=True) and `attnmt translate --split-sentences --report` on
the toy run: a paragraph equals its sentences translated one by one and joined with its spacing;
off by default; HTML tags placed over a split block; flagged lines named on stderr."""

import io
import sys

import numpy as np
import pytest

from attnmt.documents.markup import MarkupDocument, aligned_translation
from attnmt.translator import Translator

PARAGRAPH = "  Hund katze haus. Rot blau.\n\nMann frau kind ball.\t"
SENTENCES = ["Hund katze haus.", "Rot blau.", "Mann frau kind ball."]


@pytest.fixture(scope="module")
def translator(toy_run):
    return Translator.load(toy_run, device="cpu")


@pytest.mark.parametrize("beam", [1, 3])
def test_a_paragraph_is_its_sentences_translated_alone(translator, beam):
    alone = translator.translate(SENTENCES, beam_size=beam, alignments=True)
    paragraph, = translator.translate([PARAGRAPH], beam_size=beam, alignments=True, split_sentences=True)
    outs = [r.text for r in alone]
    assert paragraph.text == f"  {outs[0]} {outs[1]}\n\n{outs[2]}\t"
    assert paragraph.tokens == [t for r in alone for t in r.tokens]
    assert paragraph.source_tokens == [t for r in alone for t in r.source_tokens]
    dense = np.asarray(paragraph.attention)  # a BlockAttention: its sentences' blocks
    rows = cols = 0
    for r in alone:  # each sentence's attention on the diagonal, zeros elsewhere
        block = dense[rows:rows + len(r.tokens)]
        np.testing.assert_allclose(block[:, cols:cols + len(r.source_tokens)], r.attention, atol=1e-6)
        assert not block[:, :cols].any() and not block[:, cols + len(r.source_tokens):].any()
        rows, cols = rows + len(r.tokens), cols + len(r.source_tokens)
    word_offsets = np.cumsum([0] + [len(r.source_tokens) for r in alone])  # moses: a token is a word
    out_offsets = np.cumsum([0] + [len(r.tokens) for r in alone])
    assert paragraph.alignment == [(s + word_offsets[k], t + out_offsets[k])
                                   for k, r in enumerate(alone) for s, t in r.alignment]
    assert [PARAGRAPH[a:b] for a, b in (s.source for s in paragraph.sentences)] == SENTENCES
    assert [paragraph.text[a:b] for a, b in (s.target for s in paragraph.sentences)] == outs
    assert [s.coverage for s in paragraph.sentences] == pytest.approx([r.coverage for r in alone])


def test_splitting_is_off_by_default(translator):
    whole, = translator.translate(["Hund katze haus. Rot blau."])
    assert whole.source_tokens == ["Hund", "katze", "haus", ".", "Rot", "blau", "."]
    # its coverage still counts per source sentence, both over the one output
    assert [s.source for s in whole.sentences] == [(0, 16), (17, 26)]
    assert all(s.target == (0, len(whole.text)) for s in whole.sentences)
    received = whole.attention.sum(axis=0)  # (src_len,): moses tokens are words
    assert [s.coverage for s in whole.sentences] == pytest.approx(
        [np.minimum(received[:4], 1).mean(), np.minimum(received[4:], 1).mean()])


def test_a_prefix_goes_to_the_first_sentence(translator):
    paragraph, = translator.translate(["Hund katze. Rot blau."], target_prefix=["Cat"], split_sentences=True)
    first, second = translator.translate(["Hund katze.", "Rot blau."], target_prefix=["Cat", None])
    assert paragraph.text == f"{first.text} {second.text}" and paragraph.text.startswith("Cat")


def test_html_tags_are_placed_over_a_split_block(translator):
    document = MarkupDocument("<p>Hund <b>katze</b> haus. Rot <i>blau</i>.</p>")
    results = translator.translate(document.sentences, alignments=True, split_sentences=True)
    html = document.render([aligned_translation(r, subword=False) for r in results])
    result = results[0]

    def wrapped(word: int) -> str:  # markup.py's rule: the output words from the first to the last linked one
        linked = [t for s, t in result.alignment if s == word]
        return " ".join(result.tokens[min(linked):max(linked) + 1])
    assert result.source_tokens[1] == "katze" and result.source_tokens[5] == "blau"
    assert f"<b>{wrapped(1)}</b>" in html and f"<i>{wrapped(5)}</i>" in html
    assert html.startswith("<p>") and html.count("<b>") == 1 and html.count("<i>") == 1


def test_bad_split_argument_and_unknown_source_language(translator):
    with pytest.raises(ValueError, match="split_sentences='yes' must be true or false"):
        translator.translate(["Hund."], split_sentences="yes")
    from attnmt.errors import LanguageError
    with pytest.raises(LanguageError, match="this model translates de-en only"):
        translator.translate(["Hund."], split_sentences=True, source_lang="fr")


def test_cli_split_sentences_and_report(toy_run, capsys, monkeypatch, translator):
    from attnmt.cli import main

    text = "Hund katze haus. Rot blau.\n\nBaum.\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["translate", str(toy_run), "--split-sentences", "--beam", "1"]) == 0
    out = capsys.readouterr().out.split("\n")
    expected = [r.text for r in translator.translate(["Hund katze haus. Rot blau.", "", "Baum."], beam_size=1,
                                                     split_sentences=True)]
    assert out[:3] == expected

    # unsplit, the toy model drops "Rot blau." after "Hund katze haus .": --report names line 1
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("Hund katze haus. Rot blau. Mann frau kind.\nBaum.\n"
                                                                   .encode())))
    assert main(["translate", str(toy_run), "--report", "--beam", "1"]) == 0
    captured = capsys.readouterr()
    flagged = translator.translate(["Hund katze haus. Rot blau. Mann frau kind.", "Baum."], beam_size=1)
    lines = [line for line in captured.err.splitlines() if "may be missing" in line]
    assert [int(line.split("line ")[1].split(":")[0]) for line in lines] == [i + 1 for i, r in enumerate(flagged)
                                                                             if r.flagged]
    assert flagged[0].flagged and not flagged[1].flagged

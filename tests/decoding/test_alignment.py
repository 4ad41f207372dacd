"""Word alignments from attention (issue 22 item 1): pieces merged into words, one link per output
word, Pharaoh text; through the translator and `attnmt translate --alignments`."""

import numpy as np
import pytest

from attnmt.commands.translate import pharaoh
from attnmt.decoding.alignment import token_words, word_alignment
from attnmt.translator import Translator

pytestmark = pytest.mark.learned  # asserts what a small training learned (make test-seeds)

MARK = "\u2581"


def test_pieces_join_the_word_their_mark_starts():
    assert token_words([f"{MARK}Ein", f"{MARK}Ig", "lu", "s", f"{MARK}."], subword=True) == [0, 1, 1, 1, 2]
    assert token_words(["lu", f"{MARK}a"], subword=True) == [0, 1]  # a first piece always starts a word
    assert token_words(["Ein", "Iglu", "."], subword=False) == [0, 1, 2]


def test_each_output_word_links_to_the_source_word_with_most_attention_summed_over_pieces():
    source = [f"{MARK}Ein", f"{MARK}Ig", "lu", f"{MARK}."]  # words: Ein, Iglu, .
    output = [f"{MARK}An", f"{MARK}ig", "loo", f"{MARK}."]  # words: An, igloo, .
    attention = np.array([[0.5, 0.2, 0.2, 0.1],   # An: Ein 0.5, Iglu 0.4
                          [0.4, 0.3, 0.3, 0.0],   # ig  -> igloo: Ein 0.4 + 0.2 = 0.6,
                          [0.2, 0.3, 0.3, 0.2],   # loo    Iglu 0.6 + 0.6 = 1.2
                          [0.0, 0.1, 0.1, 0.8]])  # .: . 0.8
    links = word_alignment(attention, source, output, subword=True)
    assert links == [(0, 0), (1, 1), (2, 2)]
    assert pharaoh(links) == "0-0 1-1 2-2"
    # as words, each token is its own word: the piece "Ig" alone (0.3) loses to "Ein" (0.4)
    assert word_alignment(attention, source, output, subword=False)[1] == (0, 1)
    assert word_alignment(np.zeros((0, 4)), source, [], subword=True) == []
    assert word_alignment(np.zeros((2, 0)), [], output[:2], subword=True) == []


@pytest.mark.parametrize("beam", [1, 3])
def test_translator_gives_one_link_per_output_word(toy_run, beam):
    translator = Translator.load(toy_run, device="cpu")
    sources = ["Hund rot .", "Katze blau haus mann .", "", "Ball ."]
    results = translator.translate(sources, beam_size=beam, n_best=beam, alignments=True)
    for result in results:
        assert [tgt for _, tgt in result.alignment] == list(range(len(result.tokens)))
        assert all(0 <= src < len(result.source_tokens) for src, _ in result.alignment)
        assert all(alt.alignment is not None for alt in result.alternatives if alt.attention is not None)
        assert result.alternatives[0].alignment == result.alignment
    assert results[2].alignment == []
    assert all(r.alignment is None for r in translator.translate(sources, beam_size=beam))  # only when asked


def test_copy_task_alignment_is_mostly_the_diagonal(toy_run):
    """The copy task's gold alignment is word i <-> word i: attention's argmax finds most of it."""
    from support import toy

    translator = Translator.load(toy_run, device="cpu")
    sources = [src for src, _ in toy.copy_pairs(40, 3)]
    links = [link for r in translator.translate(sources, beam_size=1, alignments=True) for link in r.alignment]
    diagonal = sum(src == tgt for src, tgt in links) / len(links)
    assert diagonal >= 0.5, diagonal


def test_cli_prints_pharaoh_after_a_tab(toy_run, tmp_path):
    from attnmt.cli import main

    src = tmp_path / "in.de"
    src.write_text("Hund rot .\nKatze blau .\n\n")
    out = tmp_path / "out.en"
    assert main(["translate", str(toy_run), "-i", str(src), "-o", str(out), "--alignments", "--beam", "2"]) == 0
    lines = out.read_text().split("\n")[:-1]
    assert len(lines) == 3
    results = Translator.load(toy_run, device="cpu").translate(src.read_text().split("\n")[:-1], beam_size=2,
                                                                alignments=True)
    for line, result in zip(lines, results):
        text, links = line.split("\t")
        assert text == result.text and links == pharaoh(result.alignment)
    assert lines[2] == "\t"
    out2 = tmp_path / "nbest.en"
    assert main(["translate", str(toy_run), "-i", str(src), "-o", str(out2), "--alignments", "--beam", "2",
                 "--n-best", "2"]) == 0
    first = out2.read_text().split("\n")[0].split("\t")
    assert len(first) == 4 and first[3] == pharaoh(results[0].alignment)

"""The service splits every text into sentences: /translate (text and html) and /v1/translate
answer a paragraph as the translator does with split_sentences=True, with the spacing kept and
each sentence's coverage in /v1."""

import httpx
import pytest

from attnmt.documents.markup import MarkupDocument, aligned_translation

LT = {"source": "de", "target": "en"}
PARAGRAPH = " Hund katze haus. Rot blau.\n\nMann frau kind ball. "


def test_translate_splits_a_paragraph_and_keeps_its_spacing(served, toy_translator):
    expected, = toy_translator.translate([PARAGRAPH], split_sentences=True)
    unsplit, = toy_translator.translate([PARAGRAPH])
    answer = httpx.post(served.url + "/translate", json={"q": PARAGRAPH, **LT}, timeout=120)
    assert answer.status_code == 200, answer.text
    assert answer.json()["translatedText"] == expected.text
    assert expected.text.startswith(" ") and "\n\n" in expected.text and expected.text.endswith(" ")
    assert expected.text.strip() != unsplit.text  # splitting changes what a paragraph gets
    both = httpx.post(served.url + "/translate", json={"q": [PARAGRAPH, "Baum."], **LT}, timeout=120).json()
    assert both["translatedText"] == [expected.text, toy_translator.translate(["Baum."])[0].text]


def test_v1_gives_each_sentence_and_its_coverage(served, toy_translator):
    expected, = toy_translator.translate([PARAGRAPH], split_sentences=True, beam_size=2, alignments=True)
    answer = httpx.post(served.url + "/v1/translate", json={"texts": [PARAGRAPH], "beam_size": 2, "alignments": True,
                                                           "attention": True},
                        timeout=120)
    assert answer.status_code == 200, answer.text
    got = answer.json()["translations"][0]
    assert got["text"] == expected.text and got["tokens"] == expected.tokens
    assert got["alignment"] == [list(link) for link in expected.alignment]
    assert [PARAGRAPH[a:b] for a, b in (s["source"] for s in got["sentences"])] == [
        "Hund katze haus.", "Rot blau.", "Mann frau kind ball."]
    assert [got["text"][a:b] for a, b in (s["target"] for s in got["sentences"])] == [
        expected.text[a:b] for a, b in (s.target for s in expected.sentences)]
    assert [s["coverage"] for s in got["sentences"]] == pytest.approx([s.coverage for s in expected.sentences])
    assert got["coverage"] == pytest.approx(expected.coverage)
    assert got["flagged"] == expected.flagged and got["uncovered"] == expected.uncovered
    assert len(got["attention"]) == len(expected.tokens) and len(got["attention"][0]) == len(expected.source_tokens)


def test_html_blocks_are_split_too(served, toy_translator):
    html = "<p>Hund <b>katze</b> haus. Rot blau.</p><p>Baum.</p>"
    document = MarkupDocument(html)
    results = toy_translator.translate(document.sentences, alignments=True, split_sentences=True)
    expected = document.render([aligned_translation(r, subword=False) for r in results])
    answer = httpx.post(served.url + "/translate", json={"q": html, **LT, "format": "html"}, timeout=120)
    assert answer.status_code == 200, answer.text
    assert answer.json()["translatedText"] == expected
    assert len(results[0].sentences) == 2


def test_a_regional_language_model_splits_and_answers(tmp_path):
    """A model whose source language is a regional code (data.src_lang: pt_BR, direction.py's rule)
    is served: every route splits its texts (pt_BR by Portuguese rules) and answers 200."""
    from support import toy
    from support.servers import ThreadServer

    from attnmt.cli import main
    from attnmt.translator import Translator

    corpus = toy.write_corpus(tmp_path / "toy")
    for path in corpus.glob("*.de"):
        path.rename(path.with_suffix(".pt_BR"))
    config = tmp_path / "pt.yaml"
    config.write_text(toy.config_text(corpus, epochs=1, data=dict(src_lang="pt_BR")), encoding="utf-8")
    assert main(["train", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    translator = Translator.load(tmp_path / "run", device="cpu")
    expected, = translator.translate(["Hund katze. Rot blau."], split_sentences=True)
    server = ThreadServer(translator)
    try:
        answer = httpx.post(server.url + "/translate", json={"q": "Hund katze. Rot blau.", "source": "pt_BR",
                                                             "target": "en"}, timeout=120)
        assert answer.status_code == 200, answer.text
        assert answer.json()["translatedText"] == expected.text
        v1 = httpx.post(server.url + "/v1/translate", json={"texts": ["Hund katze. Rot blau."]}, timeout=120)
        assert v1.status_code == 200, v1.text
        assert len(v1.json()["translations"][0]["sentences"]) == 2
    finally:
        server.stop()

"""The page shows each translation's coverage and marks the source words that got almost no
attention (chromium through Playwright, as tests/server/test_page.py). Expected values come
from /v1/translate."""

from __future__ import annotations

import pytest

from support.page import api_translation, open_page, translate_on_page

PARAGRAPH = "Hund katze haus. Rot blau ball."


def shown_marks(page) -> list[int]:
    return page.eval_on_selector_all("#coverage-source mark.uncovered", "els => els.map(e => Number(e.dataset.src))")


def test_unflagged_translation_shows_its_coverage_and_no_marks(page, served):
    open_page(page, served.url, "rnn")
    translate_on_page(page, PARAGRAPH)
    expected = api_translation(served.url, PARAGRAPH, int(page.input_value("#beam-size")))
    assert len(expected["sentences"]) == 2
    assert page.text_content("#coverage-info") == f"Coverage {expected['coverage']:.2f} (2 sentences; lowest sentence)"
    assert page.is_hidden("#coverage-warning") == (not expected["flagged"])
    assert shown_marks(page) == expected["uncovered"]


def test_flagged_translation_marks_the_uncovered_words(page, thread_server, toy_translator, monkeypatch):
    from attnmt.decoding import coverage

    monkeypatch.setattr(coverage, "WORD_ATTENTION_MIN", 0.9)  # the server runs in this process: most words uncovered
    server = thread_server(toy_translator)
    open_page(page, server.url, "rnn")
    translate_on_page(page, PARAGRAPH)
    expected = api_translation(server.url, PARAGRAPH, int(page.input_value("#beam-size")))
    assert expected["flagged"] and expected["uncovered"]
    assert shown_marks(page) == expected["uncovered"]
    words = page.eval_on_selector_all("#coverage-source .word", "els => els.map(e => e.textContent)")
    assert words == ["Hund", "katze", "haus", ".", "Rot", "blau", "ball", "."]
    flagged = sum(s["flagged"] for s in expected["sentences"])
    assert page.text_content("#coverage-warning").startswith(
        f"Part of the source may be missing from the translation: {flagged} of 2 sentences flagged")


def test_the_page_shows_the_confidence_and_what_the_model_read(page, served):
    open_page(page, served.url, "rnn")
    typed = "hund katze haus."  # lower case: read in the training data's case
    translate_on_page(page, typed)
    expected = api_translation(served.url, typed, int(page.input_value("#beam-size")))
    assert expected["read_as"] == "Hund katze haus."
    assert page.text_content("#translation-confidence").startswith(
        f"Confidence {expected['confidence']:.2f} (uncalibrated: the mean token probability")
    assert page.text_content("#read-as") == 'Read as: "Hund katze haus."'
    assert float(page.get_attribute("#output-text", "data-confidence")) == pytest.approx(expected["confidence"])
    assert ("unsure" in (page.get_attribute("#output-text", "class") or "").split()) == (expected["confidence"] < 0.5)


def test_an_unsure_translation_is_shaded(page, thread_server, toy_translator, monkeypatch):
    import attnmt.translator

    monkeypatch.setattr(attnmt.translator, "uncalibrated_confidence", lambda features: 0.2)  # in this process
    server = thread_server(toy_translator)
    open_page(page, server.url, "rnn")
    translate_on_page(page, PARAGRAPH)
    assert page.text_content("#translation-confidence").startswith("Confidence 0.20 (uncalibrated")
    assert "unsure" in (page.get_attribute("#output-text", "class") or "").split()
    assert page.is_hidden("#read-as")

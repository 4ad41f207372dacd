"""The page's inspection tools in a real browser (Playwright + Debian's chromium, as test_page):
per-word confidence, clicking an n-best alternative, "try your own translation", "complete from
here" and the alignment view. Expected values come from the API (/v1/translate, /v1/score), not
from the page."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from support.page import GERMAN, api_translation, grid_weights, open_page, translate_on_page


def api_scores(url: str, text: str, translations: list[str]) -> list[dict]:
    """/v1/score of translations of text, in one request as the page sends them (a batch: scored
    alone, a translation's float32 sums can differ in the last bits)."""
    body = {"texts": [text] * len(translations), "translations": translations}
    return httpx.post(url + "/v1/score", json=body, timeout=120).json()["scores"]


def shown_probs(page) -> list[float]:
    return page.eval_on_selector_all("#output-tokens .token", "els => els.map(e => Number(e.dataset.prob))")


def shown_tokens(page) -> list[str]:
    return page.eval_on_selector_all("#output-tokens .token", "els => els.map(e => e.textContent)")


def wait_idle(page) -> None:
    page.wait_for_function("!document.getElementById('translate-button').disabled")


def test_output_words_show_their_probability(page, served):
    open_page(page, served.url, "rnn")
    translate_on_page(page, GERMAN)
    best = api_translation(served.url, GERMAN, int(page.input_value("#beam-size")))
    scored = api_scores(served.url, GERMAN, [a["text"] for a in best["alternatives"]])[0]
    assert shown_tokens(page) == best["tokens"] == scored["tokens"]
    own = best["token_probs"][:len(best["tokens"])]  # the translation's own (the page shows these)
    np.testing.assert_allclose(shown_probs(page), own, atol=1e-9)
    np.testing.assert_allclose(own, scored["token_probs"][:len(best["tokens"])], atol=1e-5)  # forced decoding agrees
    labels = page.eval_on_selector_all("#output-tokens .token", "els => els.map(e => e.dataset.probLabel)")
    assert labels == [f"{p:.2f}" for p in own]
    assert "least sure of" in page.text_content("#confidence-info")


def test_clicking_an_alternative_redraws_the_grid(page, served):
    open_page(page, served.url, "rnn")
    page.fill("#beam-size", "5")
    translate_on_page(page, GERMAN)
    expected = api_translation(served.url, GERMAN, 5)
    assert len(expected["alternatives"]) >= 2
    best_grid = grid_weights(page)
    scores = api_scores(served.url, GERMAN, [a["text"] for a in expected["alternatives"]])
    for i in (1, len(expected["alternatives"]) - 1, 0):
        alt = expected["alternatives"][i]
        page.click(f"#alternatives li[data-index='{i}']")
        assert page.get_attribute(f"#alternatives li[data-index='{i}']", "class") == "selected"
        assert shown_tokens(page) == alt["tokens"]
        np.testing.assert_allclose(grid_weights(page), np.array(alt["attention"]).reshape(len(alt["tokens"]), -1),
                                   atol=1e-6)
        np.testing.assert_allclose(shown_probs(page), alt["token_probs"][:len(alt["tokens"])], atol=1e-9)
        scored = scores[i]
        if scored["tokens"] == alt["tokens"]:
            np.testing.assert_allclose(shown_probs(page), scored["token_probs"][:len(alt["tokens"])], atol=1e-5)
    np.testing.assert_allclose(grid_weights(page), best_grid)
    second = np.array(expected["alternatives"][1]["attention"])
    assert second.shape != best_grid.shape or not np.allclose(second, best_grid)


@pytest.mark.parametrize("own", ["dog cat red house .", "the best"])
def test_your_own_translation_is_scored_against_the_best(page, served, own):
    open_page(page, served.url, "rnn")
    translate_on_page(page, GERMAN)
    best = api_translation(served.url, GERMAN, int(page.input_value("#beam-size")))
    if own == "the best":
        own = best["text"]
    mine, theirs = api_scores(served.url, GERMAN, [own, best["text"]])
    page.fill("#own-text", own)
    with page.expect_response(lambda r: "/v1/score" in r.url):
        page.click("#own-button")
    wait_idle(page)
    assert page.is_visible("#own-result")
    assert float(page.get_attribute("#own-logprob", "data-value")) == pytest.approx(mine["log_prob"], abs=1e-9)
    assert float(page.get_attribute("#best-logprob", "data-value")) == pytest.approx(theirs["log_prob"], abs=1e-9)
    assert page.text_content("#own-logprob") == f"{mine['log_prob']:.3f}"
    verdict = page.text_content("#own-verdict")
    if mine["tokens"] == theirs["tokens"]:
        assert verdict == "This is the model's own best translation."
    elif mine["log_prob"] > theirs["log_prob"]:
        assert "prefers your translation" in verdict and "search error" in verdict
    else:
        assert "prefers its own translation" in verdict and "model error" in verdict
    # the grid shows the user's tokens (and <eos>) with their attention and probabilities
    assert shown_tokens(page) == mine["tokens"] + ["</s>"]
    np.testing.assert_allclose(grid_weights(page), np.array(mine["attention"]), atol=1e-6)
    np.testing.assert_allclose(shown_probs(page), mine["token_probs"], atol=1e-9)
    assert page.text_content("#view-label") == "your translation"


def test_complete_from_here_keeps_the_prefix(page, served):
    open_page(page, served.url, "rnn")
    translate_on_page(page, GERMAN)
    beam = int(page.input_value("#beam-size"))
    tokens = shown_tokens(page)
    assert len(tokens) >= 2
    page.click("#output-tokens .token[data-row='1']")  # keep the first two words
    assert page.input_value("#prefix-text") == " ".join(tokens[:2])

    for prefix in ("cat zzzunknown", " ".join(tokens[:2])):
        page.fill("#prefix-text", prefix)
        with page.expect_response(lambda r: "/v1/translate" in r.url):
            page.click("#complete-button")
        wait_idle(page)
        expected = api_translation(served.url, GERMAN, beam, target_prefix=[prefix])
        shown = page.text_content("#output-text")
        assert shown.startswith(prefix) and shown == expected["text"]
        assert shown_tokens(page)[:len(prefix.split())] == prefix.split()
        assert page.text_content("#prefix-note") == f'Completed from "{prefix}".'
    translate_on_page(page, GERMAN)  # Translate starts afresh, without the prefix
    assert page.text_content("#output-text") == api_translation(served.url, GERMAN, beam)["text"]
    assert page.is_hidden("#prefix-note")


def test_alignment_view_draws_the_links(page, served):
    open_page(page, served.url, "rnn")
    translate_on_page(page, GERMAN)
    beam = int(page.input_value("#beam-size"))
    assert page.is_visible("#heatmap-box") and page.is_hidden("#links-box")
    with page.expect_response(lambda r: "/v1/translate" in r.url):
        page.check("#view-links")
    wait_idle(page)
    expected = api_translation(served.url, GERMAN, beam, alignments=True)
    assert page.is_hidden("#heatmap-box") and page.is_visible("#links-box")
    links = " ".join(f"{s}-{t}" for s, t in expected["alignment"])
    assert page.get_attribute("#links-view", "data-links") == links
    assert len(page.query_selector_all("#links-svg line")) == len(expected["alignment"])
    words = page.eval_on_selector_all("#links-target .word", "els => els.map(e => e.textContent)")
    assert words == expected["tokens"]  # the toy model's tokens are words
    page.check("#view-heatmap")
    assert page.is_visible("#heatmap-box") and page.is_hidden("#links-box")
    np.testing.assert_allclose(grid_weights(page), np.array(expected["attention"]), atol=1e-6)


def test_a_glossary_entry_typed_on_the_page_applies_to_the_next_translation(page, served):
    open_page(page, served.url, "rnn")
    page.fill("#beam-size", "3")
    page.click("#glossary-box summary")
    page.fill("#glossary-text", "Hund = water")
    translate_on_page(page, "Hund katze rot .")
    expected = httpx.post(served.url + "/v1/translate", timeout=120, json={
        "texts": ["Hund katze rot ."], "beam_size": 3, "n_best": 3, "glossary": [["Hund", "water"]]}).json()
    tokens = shown_tokens(page)
    assert tokens == expected["translations"][0]["tokens"] and tokens.count("water") == 1
    page.fill("#glossary-text", "Hund water")  # no " = ": reported, nothing sent
    page.click("#translate-button")
    assert "write it as source phrase = target phrase" in page.text_content("#error-message")

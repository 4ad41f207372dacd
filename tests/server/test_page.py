"""The page at / in a real browser: Playwright driving Debian's chromium (Playwright's own browser
download is not available here). Skipped, with the reason, only when no chromium is found.

Every request the page makes must go to the server on 127.0.0.1: the page loads nothing from
the internet. Expected values come from the API (/v1/translate) and numpy, not from the page."""

from __future__ import annotations


import numpy as np

from support.page import GERMAN, api_translation, grid_weights, open_page, translate_on_page


def test_translation_shown_is_what_the_api_returns(page, served):
    open_page(page, served.url, "rnn")
    assert "best validation BLEU" in page.text_content("#model-info")
    translate_on_page(page, GERMAN)
    beam = int(page.input_value("#beam-size"))
    expected = api_translation(served.url, GERMAN, beam)
    assert page.text_content("#output-text") == expected["text"]
    shown = page.eval_on_selector_all("#alternatives .alternative-text", "els => els.map(e => e.textContent)")
    assert shown == [a["text"] for a in expected["alternatives"]]
    tokens = page.eval_on_selector_all("#output-tokens .token", "els => els.map(e => e.textContent)")
    assert tokens == expected["tokens"]
    np.testing.assert_allclose(grid_weights(page), np.array(expected["attention"]), atol=1e-6)
    assert page.is_hidden("#error-message")


def test_hover_marks_the_argmax_of_the_row(page, served, tmp_path):
    open_page(page, served.url, "rnn")
    translate_on_page(page, GERMAN, keyboard=True)
    expected = api_translation(served.url, GERMAN, int(page.input_value("#beam-size")))
    assert len(expected["tokens"]) >= 3
    row = np.array(expected["attention"][2])  # the third output token

    page.hover("#output-tokens .token[data-row='2']")
    marked = page.query_selector_all("#attention-grid .cell.most-attended")
    assert len(marked) == 1
    assert marked[0].get_attribute("data-row") == "2"
    assert int(marked[0].get_attribute("data-col")) == int(np.argmax(row))
    highlighted = page.eval_on_selector_all("#attention-grid .cell.active-row", "els => els.map(e => e.dataset.row)")
    assert highlighted == ["2"] * len(expected["source_tokens"])
    attended = page.eval_on_selector_all("#attention-grid .col-head.attended", "els => els.map(e => +e.dataset.col)")
    assert attended == [c for c in range(len(row)) if row[c] >= row.max() / 2]
    page.screenshot(path=str(tmp_path / "serve.png"), full_page=True)
    assert (tmp_path / "serve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    page.hover("#attention-grid .col-head[data-col='1']")  # a source token: its column
    columns = page.eval_on_selector_all("#attention-grid .cell.active-col", "els => els.map(e => e.dataset.col)")
    assert columns == ["1"] * len(expected["tokens"])
    assert page.query_selector_all("#attention-grid .cell.most-attended") == []


def test_empty_and_overlong_inputs_show_a_message(page, served):
    open_page(page, served.url, "rnn")
    page.fill("#source-text", "   ")
    page.click("#translate-button")
    assert page.is_visible("#error-message")
    assert "Type a sentence" in page.text_content("#error-message")

    translate_on_page(page, ("Hund katze rot haus " * 500)[:10_000])
    assert page.is_visible("#warning-message")
    assert "cut to" in page.text_content("#warning-message")
    assert page.is_visible("#output-text") and page.is_hidden("#error-message")


def test_server_errors_are_shown(page, served):
    open_page(page, served.url, "rnn")
    page.route("**/v1/translate", lambda route: route.fulfill(
        status=500, content_type="application/json", body='{"error": "Cannot translate text: RuntimeError: boom"}'))
    translate_on_page(page, GERMAN)
    assert page.is_visible("#error-message")
    assert page.text_content("#error-message") == "Cannot translate text: RuntimeError: boom"
    page.fill("#beam-size", "0")
    page.click("#translate-button")
    assert "Beam size must be" in page.text_content("#error-message")


def choose(page, select: str, value: str) -> None:
    """Pick value in a selector (when not already picked) and wait for the redraw it asks for."""
    if page.input_value(select) == value:
        return
    with page.expect_response(lambda r: "/v1/translate" in r.url):
        page.select_option(select, value)
    page.wait_for_function("!document.getElementById('translate-button').disabled")


def test_layer_and_head_switch_redraws_the_grid(page, served_transformer):
    url = served_transformer.url
    open_page(page, url, "transformer")
    assert page.is_visible("#layer-select") and page.is_visible("#head-select")
    layers = page.eval_on_selector_all("#layer-select option", "els => els.map(e => e.textContent)")
    heads = page.eval_on_selector_all("#head-select option", "els => els.map(e => e.textContent)")
    assert layers == ["average", "0", "1"] and heads == ["average", "0", "1"]
    translate_on_page(page, GERMAN)
    beam = int(page.input_value("#beam-size"))
    averaged = grid_weights(page)
    np.testing.assert_allclose(averaged, api_translation(url, GERMAN, beam)["attention"], atol=1e-6)

    shown = {}
    for layer, head in (("0", ""), ("0", "1"), ("1", "0")):
        choose(page, "#layer-select", layer)
        choose(page, "#head-select", head)
        extra = {"layer": int(layer), **({"head": int(head)} if head else {})}
        expected = np.array(api_translation(url, GERMAN, beam, **extra)["attention"])
        shown[(layer, head)] = grid_weights(page)
        np.testing.assert_allclose(shown[(layer, head)], expected, atol=1e-6)
    views = [averaged, *shown.values()]
    for i in range(len(views)):
        for j in range(i + 1, len(views)):
            assert views[i].shape != views[j].shape or not np.allclose(views[i], views[j], atol=1e-4)


def test_one_pair_shows_no_pair_selector(page, served):
    open_page(page, served.url, "rnn")
    assert page.is_hidden("#pair-label")


def test_the_pair_selector_translates_with_the_chosen_model(page, serve_process, serve_run, en_de_run):
    """Two models of different pairs: the selector lists both (from /v1/models); choosing en -> de
    sends source and target, and the translation, tokens and word probabilities shown are those
    the API gives for en -> de (not the default de -> en model's)."""
    server = serve_process([serve_run, en_de_run])
    english = "dog cat red house ."
    open_page(page, server.url, "rnn")
    assert page.is_visible("#pair-label")
    options = page.eval_on_selector_all("#pair-select option", "els => els.map(e => e.textContent)")
    assert options == ["de → en", "en → de"]
    page.select_option("#pair-select", "1")
    assert "en → de" in page.text_content("#model-info") and "(en)" in page.text_content("#source-label")
    page.fill("#source-text", english)
    with page.expect_request(lambda r: r.url.endswith("/v1/translate")) as sent:
        page.click("#translate-button")
    page.wait_for_function("!document.getElementById('translate-button').disabled")
    assert sent.value.post_data_json["source"] == "en" and sent.value.post_data_json["target"] == "de"
    beam = int(page.input_value("#beam-size"))
    expected = api_translation(server.url, english, beam, source="en", target="de")
    default = api_translation(server.url, english, beam)
    assert expected["text"] != default["text"]  # the pair chosen is what decides
    assert page.text_content("#output-text") == expected["text"]
    tokens = page.eval_on_selector_all("#output-tokens .token", "els => els.map(e => e.textContent)")
    assert tokens == expected["tokens"]
    probs = page.eval_on_selector_all("#output-tokens .token", "els => els.map(e => Number(e.dataset.prob))")
    np.testing.assert_allclose(probs, expected["token_probs"][:len(tokens)], atol=1e-4)  # scored by en -> de too
    assert page.is_hidden("#error-message")


def test_the_pair_selector_offers_every_direction_of_a_multilingual_model(page, served_multilingual):
    """One multilingual model: the selector lists its three directions (from /v1/models), and
    choosing fr -> en translates with the French-to-English direction, as the API does."""
    server = served_multilingual
    open_page(page, server.url, "transformer")
    options = page.eval_on_selector_all("#pair-select option", "els => els.map(e => e.textContent)")
    assert options == ["de → en", "en → de", "fr → en"]
    page.select_option("#pair-select", "2")
    page.fill("#source-text", "chien rouge maison")
    with page.expect_request(lambda r: r.url.endswith("/v1/translate")) as sent:
        page.click("#translate-button")
    page.wait_for_function("!document.getElementById('translate-button').disabled")
    assert sent.value.post_data_json["source"] == "fr" and sent.value.post_data_json["target"] == "en"
    expected = api_translation(server.url, "chien rouge maison", int(page.input_value("#beam-size")),
                               source="fr", target="en")
    assert page.text_content("#output-text") == expected["text"]
    assert page.is_hidden("#error-message")


def test_a_long_paragraph_is_drawn_from_its_sentence_blocks(page, served):
    """Issue 66 A: a paragraph's attention comes as per-sentence blocks (no dense matrix past 40,000
    weights); the page draws the first sentences that fit its grid, each cell the block's weight
    (zeros off the blocks), and says how many it shows."""
    text = " ".join(["Hund katze rot haus ."] * 120)
    open_page(page, served.url, "rnn")
    page.fill("#beam-size", "1")
    translate_on_page(page, text)
    expected = api_translation(served.url, text, 1)
    assert expected["attention"] is None and len(expected["attention_blocks"]) == 120
    shown = grid_weights(page)
    dense = np.zeros(shown.shape)
    sentences = 0
    for block in expected["attention_blocks"]:
        weights = np.array(block["weights"])
        r, c = block["row"], block["col"]
        if r + weights.shape[0] > shown.shape[0] or c + weights.shape[1] > shown.shape[1]:
            break
        dense[r:r + weights.shape[0], c:c + weights.shape[1]] = weights
        sentences += 1
    assert 1 <= sentences < 120 and shown.size <= 40_000
    np.testing.assert_allclose(shown, dense, atol=1e-6)
    assert f"The grid shows the first {sentences} of 120 sentences" in page.text_content("#grid-note")
    page.hover(f"#output-tokens .token[data-row='{shown.shape[0] + 3}']")  # a row past the grid: no error
    assert page.is_hidden("#error-message")

"""`attnmt serve` of an imported Marian model (a tiny random one, tests/support/marian_toy.py):
the LibreTranslate route, /v1 with attention per layer and head and word alignments, and the
page in chromium, as for any run."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from support import marian_toy
from support.page import GERMAN, api_translation, open_page, translate_on_page

from attnmt.interop.marian import import_marian
from attnmt.translator import Translator


@pytest.fixture(scope="module")
def marian_served(tmp_path_factory, serve_process_factory, transformers):
    folder = marian_toy.write_marian(tmp_path_factory.mktemp("marian") / "m", seed=3)
    run = import_marian(folder, tmp_path_factory.mktemp("runs") / "imported").path
    return run, serve_process_factory(run)


@pytest.fixture(scope="module")
def serve_process_factory():
    from support.servers import ServeProcess

    started = []
    yield lambda run: started.append(ServeProcess(run)) or started[-1]
    for server in started:
        server.stop()


def test_the_api_serves_an_imported_model_with_its_attention(marian_served):
    run, server = marian_served
    expected = Translator.load(run, device="cpu").translate([GERMAN], beam_size=2)[0]
    libre = httpx.post(server.url + "/translate", json={"q": GERMAN, "source": "de", "target": "en"}, timeout=120)
    assert libre.status_code == 200 and libre.json()["translatedText"] == expected.text
    for layer, head in ((None, None), (1, 0), (0, 1)):
        body = {"texts": [GERMAN], "beam_size": 2, "layer": layer, "head": head, "alignments": True, "attention": True}
        found = httpx.post(server.url + "/v1/translate", json=body, timeout=120)
        assert found.status_code == 200, found.text
        t = found.json()["translations"][0]
        assert t["source_tokens"][-1] == "</s>"  # Marian's source ends with eos, and the page shows it
        attention = np.array(t["attention"])
        assert attention.shape == (len(t["tokens"]), len(t["source_tokens"]))
        np.testing.assert_allclose(attention.sum(axis=1), 1.0, atol=1e-5)
        words = sum(tok.startswith("\u2581") for tok in t["source_tokens"][:-1])  # </s> is no word
        assert all(0 <= src < words for src, _ in t["alignment"])
    assert httpx.post(server.url + "/v1/translate", json={"texts": [GERMAN], "layer": 5},
                      timeout=60).status_code == 422  # 2 decoder layers


def test_the_page_shows_the_imported_model_and_its_attention(marian_served, page):
    run, server = marian_served
    open_page(page, server.url, "transformer")
    translate_on_page(page, GERMAN)
    beam = int(page.input_value("#beam-size"))
    shown = api_translation(server.url, GERMAN, beam)
    assert page.text_content("#output-text") == shown["text"]
    cols = int(page.get_attribute("#attention-grid", "data-cols"))
    assert cols == len(shown["source_tokens"])

"""The API of `attnmt serve` over real HTTP: LibreTranslate's /translate and /languages, /health,
/v1/translate and /v1/model, and every bad-input rule. The reference answers come from the same
run loaded in this process and translated directly, one request's texts at a time."""

from __future__ import annotations

import json
import re

import httpx
import numpy as np
import pytest
from support.servers import libretranslate_fields

SENTENCES = ["Hund katze rot .", "Ein kind spielt ball .", "Groß haus blau wasser baum ."]


def post(served, path, **kwargs):
    return httpx.post(served.url + path, timeout=120, **kwargs)


def assert_error(response, status, pattern=None):
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in response.text
    if pattern:
        assert re.search(pattern, body["error"]), body["error"]
    return body


# ---- LibreTranslate's API ---------------------------------------------------------------------

def test_translate_string_list_and_alternatives(served, toy_translator):
    expected = toy_translator.translate(SENTENCES, beam_size=3)
    r = post(served, "/translate", json={"q": SENTENCES[0], "source": "de", "target": "en"})
    assert r.status_code == 200 and libretranslate_fields(r.json()) == {"translatedText": expected[0].text}
    r = post(served, "/translate", json={"q": SENTENCES, "source": "de", "target": "en", "format": "text"})
    assert libretranslate_fields(r.json()) == {"translatedText": [e.text for e in expected]}

    nbest = toy_translator.translate(SENTENCES, beam_size=3, n_best=3)
    r = post(served, "/translate", json={"q": SENTENCES, "source": "de", "target": "en", "alternatives": 2})
    body = r.json()
    assert body["translatedText"] == [e.text for e in nbest]
    for alts, e in zip(body["alternatives"], nbest):
        others = list(dict.fromkeys(a.text for a in e.alternatives[1:] if a.text != e.text))
        assert alts == others and len(alts) <= 2


def test_translate_form_bodies_and_auto_source(served, toy_translator):
    expected = toy_translator.translate(SENTENCES[1], beam_size=3)[0].text
    fields = {"q": SENTENCES[1], "source": "de", "target": "en"}
    assert libretranslate_fields(post(served, "/translate", data=fields).json()) == {"translatedText": expected}
    multipart = {k: (None, v) for k, v in fields.items()}
    assert libretranslate_fields(post(served, "/translate", files=multipart).json()) == {"translatedText": expected}
    body = post(served, "/translate", json={**fields, "source": "auto"}).json()
    assert libretranslate_fields(body) == {"translatedText": expected,
                                           "detectedLanguage": {"confidence": 100.0, "language": "de"}}


def test_languages_and_health(served):
    assert httpx.get(served.url + "/languages").json() == [
        {"code": "de", "name": "German", "targets": ["en"]}, {"code": "en", "name": "English", "targets": []}]
    health = httpx.get(served.url + "/health").json()
    assert health["status"] == "ok" and health["model"] == "run"


@pytest.mark.parametrize("body,status,pattern", [
    ({"source": "de", "target": "en"}, 400, r"^Invalid request: missing q parameter$"),
    ({"q": "Hund .", "target": "en"}, 400, r"^Invalid request: missing source parameter$"),
    ({"q": "Hund .", "source": "de"}, 400, r"^Invalid request: missing target parameter$"),
    ({"q": "Hund .", "source": "fr", "target": "en"}, 400, r"^fr is not supported: this model translates de -> en$"),
    ({"q": "Hund .", "source": "de", "target": "fr"}, 400, r"^fr is not supported: this model translates de -> en$"),
    ({"q": "Hund .", "source": "en", "target": "de"}, 400, r"de -> en"),
    ({"q": "Hund .", "source": "de", "target": "en", "format": "xml"}, 400, r"xml format is not supported: use text or html"),
    ({"q": "Hund .", "source": "de", "target": "en", "format": "html", "alternatives": 1}, 400,
     r"alternatives are not available with format html"),
    ({"q": "Hund .", "source": "de", "target": "en", "alternatives": "many"}, 400,
     r"alternatives parameter is not a number"),
    ({"q": "Hund .", "source": "de", "target": "en", "alternatives": 16}, 400, r"alternatives parameter must be <= 15"),
    ({"q": 5, "source": "de", "target": "en"}, 400, r"q must be a string or a list of strings"),
    ({"q": ["ok", 5], "source": "de", "target": "en"}, 400, r"q must be"),
    ({"q": "Hund .", "source": 3, "target": "en"}, 400, r"source must be a string"),
    ({"q": "Hund .", "source": "de", "target": "en", "secret": "x"}, 400, r"unknown parameter secret"),
])
def test_translate_bad_requests(served, body, status, pattern):
    assert_error(post(served, "/translate", json=body), status, pattern)


def test_translate_malformed_bodies(served):
    assert_error(post(served, "/translate", content=b'{"q": "Hund', headers={"Content-Type": "application/json"}),
                 400, "malformed JSON")
    assert_error(post(served, "/translate", content=b'["a"]', headers={"Content-Type": "application/json"}),
                 400, "must be an object")
    assert_error(post(served, "/translate", content=b"q=a", headers={"Content-Type": "text/plain"}),
                 400, "JSON or a form body")
    assert_error(post(served, "/translate", content=b"\xff\xfe", headers={"Content-Type": "application/json"}), 400)


# ---- attnmt's API ---------------------------------------------------------------------------

def test_v1_translate_matches_the_translator(served, toy_translator):
    expected = toy_translator.translate(SENTENCES, beam_size=4, n_best=2)
    r = post(served, "/v1/translate", json={"texts": SENTENCES, "beam_size": 4, "n_best": 2, "attention": True})
    assert r.status_code == 200
    body = r.json()
    assert body["beam_size"] == 4
    for got, want in zip(body["translations"], expected):
        assert got["text"] == want.text and got["tokens"] == want.tokens
        assert got["source_tokens"] == want.source_tokens
        assert got["score"] == pytest.approx(want.score, abs=1e-4)
        attention = np.array(got["attention"])
        assert attention.shape == (len(want.tokens), len(want.source_tokens))
        np.testing.assert_allclose(attention, want.attention, atol=1e-4)
        np.testing.assert_allclose(attention.sum(axis=1), 1.0, atol=1e-4)
        assert [a["text"] for a in got["alternatives"]] == [a.text for a in want.alternatives]
        assert got["warnings"] == []
    r = post(served, "/v1/translate", json={"texts": SENTENCES[:1]})  # attention is asked for (issue 66)
    assert r.json()["translations"][0]["attention"] is None and r.json()["beam_size"] == 3


def test_empty_and_overlong_texts(served, serve_run, toy_translator):
    r = post(served, "/v1/translate", json={"texts": ["", "   ", "Hund ."], "attention": True})
    first, blank, dog = r.json()["translations"]
    assert first["text"] == "" and first["tokens"] == [] and first["attention"] == []
    assert blank["text"] == "" and dog["text"] == toy_translator.translate("Hund .", beam_size=3)[0].text
    empty = post(served, "/translate", json={"q": "", "source": "de", "target": "en"}).json()
    assert libretranslate_fields(empty) == {"translatedText": ""}

    max_tokens = json.loads((serve_run / "config.json").read_text())["search"]["max_input_tokens"]
    long_text = " ".join(["hund katze"] * max_tokens)  # twice as many tokens as the model reads
    r = post(served, "/v1/translate", json={"texts": [long_text], "beam_size": 1, "attention": False})
    got = r.json()["translations"][0]
    assert len(got["source_tokens"]) == max_tokens
    assert any(f"cut to search.max_input_tokens={max_tokens}" in w for w in got["warnings"])
    r = post(served, "/translate", json={"q": long_text, "source": "de", "target": "en"})
    assert r.status_code == 200 and "cut to" in r.json()["warnings"][0]


@pytest.mark.parametrize("body,status,pattern", [
    ({"texts": ["a"], "beam_size": 0}, 422, r"beam_size"),
    ({"texts": ["a"], "beam_size": 17}, 422, r"beam_size: Input should be less than or equal to 16"),
    ({"texts": ["a"], "beam_size": "five"}, 422, r"beam_size"),
    ({"texts": "Hund ."}, 422, r"texts"),
    ({"texts": [1, 2]}, 422, r"texts"),
    ({}, 422, r"texts: Field required"),
    ({"texts": ["a"], "beams": 3}, 422, r"beams: Extra inputs are not permitted"),
    ({"texts": ["a"], "beam_size": 2, "n_best": 3}, 422, r"n_best=3 must be between 1 and beam_size=2"),
    ({"texts": ["a"], "layer": 0}, 422, r"needs a Transformer"),
])
def test_v1_bad_requests(served, body, status, pattern):
    assert_error(post(served, "/v1/translate", json=body), status, pattern)


def test_limits_give_413(served):
    too_many = {"texts": ["Hund ."] * 65}
    assert_error(post(served, "/v1/translate", json=too_many), 413, r"65 texts\) exceeds text limit \(64\)")
    assert_error(post(served, "/translate", json={"q": ["Hund ."] * 65, "source": "de", "target": "en"}), 413)
    huge = json.dumps({"texts": ["hund " * 220_000]}).encode()  # over 1 MiB
    assert_error(post(served, "/v1/translate", content=huge, headers={"Content-Type": "application/json"}),
                 413, "over 1048576 bytes")

    def chunks():  # no Content-Length: the limit counts the streamed bytes
        for _ in range(20):
            yield b"x" * 100_000
    assert_error(post(served, "/translate", content=chunks(), headers={"Content-Type": "application/json"}), 413)
    assert httpx.get(served.url + "/health").status_code == 200  # and it keeps serving


def test_malformed_json_and_unknown_routes(served):
    assert_error(post(served, "/v1/translate", content=b"{", headers={"Content-Type": "application/json"}),
                 400, "malformed JSON")
    assert_error(httpx.get(served.url + "/no/such/page"), 404)
    assert_error(httpx.get(served.url + "/v1/translate"), 405)


def test_v1_model(served, serve_run):
    best = json.loads((serve_run / "best.json").read_text())
    model = httpx.get(served.url + "/v1/model").json()
    assert model["arch"] == "rnn" and (model["source_lang"], model["target_lang"]) == ("de", "en")
    assert model["best_valid_bleu"] == pytest.approx(best["val_bleu"])
    assert model["beam_size"] == 3 and model["max_texts"] == 64 and model["api_key_required"] is False
    vocab = json.loads((serve_run / "vocab.tgt.json").read_text())
    tokens = vocab["tokens"] if isinstance(vocab, dict) and "tokens" in vocab else vocab
    assert model["tgt_vocab_size"] == len(tokens)
    assert model["parameters"] > 0 and model["layers"] is None


def test_docs_and_page_load_nothing_from_the_internet(served):
    spec = httpx.get(served.url + "/openapi.json").json()
    assert {"/translate", "/languages", "/health", "/v1/translate", "/v1/model"} <= set(spec["paths"])
    for path in ("/", "/docs", "/static/app.js", "/static/style.css", "/static/docs.js"):
        r = httpx.get(served.url + path)
        assert r.status_code == 200, path
        assert not re.search(r"(src|href)=[\"']?(https?:)?//", r.text), path
        assert not re.search(r"https?://", r.text), path

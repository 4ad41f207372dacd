"""Confidence over HTTP (issue 63): /v1/translate and /translate carry each translation's
confidence as the library computes it, and min_confidence (the request's, or `serve
--min-confidence`) answers the source, with a warning, instead of a translation below it."""

from __future__ import annotations

import httpx
import pytest

TEXTS = ["Hund katze haus .", "Rot blau .", "hund katze ."]


def post(server, path, **kwargs):
    return httpx.post(server.url + path, timeout=60, **kwargs)


def test_v1_and_translate_carry_the_libraries_confidence(served, toy_translator):
    expected = toy_translator.translate(TEXTS, beam_size=3)
    got = post(served, "/v1/translate", json={"texts": TEXTS, "beam_size": 3}).json()["translations"]
    for answer, want in zip(got, expected):
        assert 0.0 <= answer["confidence"] <= 1.0
        assert answer["confidence"] == pytest.approx(want.confidence, abs=1e-6)
        assert answer["confidence_calibrated"] is False and answer["withheld"] is False  # the toy run: none
        assert answer["read_as"] == want.read_as
    assert got[2]["read_as"] == "Hund katze ."  # typed in lower case, read in the training data's case
    lt = post(served, "/translate", json={"q": TEXTS, "source": "de", "target": "en"}).json()
    assert lt["confidence"] == pytest.approx([r["confidence"] for r in got], abs=1e-6)
    one = post(served, "/translate", json={"q": TEXTS[0], "source": "de", "target": "en"}).json()
    assert one["confidence"] == pytest.approx(got[0]["confidence"], abs=1e-6)


def test_each_alternative_carries_its_own_confidence(served, toy_translator):
    expected = toy_translator.translate(TEXTS[:1], beam_size=4, n_best=4)[0]
    got = post(served, "/v1/translate", json={"texts": TEXTS[:1], "beam_size": 4, "n_best": 4}).json()
    alternatives = got["translations"][0]["alternatives"]
    assert [a["confidence"] for a in alternatives] == pytest.approx([a.confidence for a in expected.alternatives],
                                                                    abs=1e-6)
    assert alternatives[0]["confidence"] == pytest.approx(got["translations"][0]["confidence"], abs=1e-6)
    lt = post(served, "/translate", json={"q": TEXTS[0], "source": "de", "target": "en", "alternatives": 3}).json()
    by_text = {a.text: a.confidence for a in expected.alternatives}
    assert len(lt["alternativeConfidence"]) == len(lt["alternatives"])
    assert lt["alternativeConfidence"] == pytest.approx([by_text[t] for t in lt["alternatives"]], abs=1e-6)


def test_a_request_below_its_min_confidence_gets_the_source(served):
    body = {"texts": TEXTS[:2], "beam_size": 3}
    sure = post(served, "/v1/translate", json=body).json()["translations"]
    line = min(r["confidence"] for r in sure)
    above = post(served, "/v1/translate", json={**body, "min_confidence": line}).json()["translations"]
    assert [r["text"] for r in above] == [r["text"] for r in sure]  # at the line: given
    withheld = post(served, "/v1/translate", json={**body, "min_confidence": 1.0}).json()["translations"]
    for answer, source in zip(withheld, TEXTS):
        assert answer["withheld"] is True and answer["text"] == source
        assert any("below min_confidence=1" in w for w in answer["warnings"])
    empty = post(served, "/v1/translate", json={**body, "min_confidence": 1.0, "below_confidence": "empty"}).json()
    assert [r["text"] for r in empty["translations"]] == ["", ""]
    for bad, pattern in ((1.5, "min_confidence"), (-0.1, "min_confidence"), ("high", "min_confidence")):
        r = post(served, "/v1/translate", json={**body, "min_confidence": bad})
        assert r.status_code == 422 and pattern in r.json()["error"], r.text
    r = post(served, "/v1/translate", json={**body, "below_confidence": "nothing"})
    assert r.status_code == 422 and "below_confidence" in r.json()["error"]


def test_serve_min_confidence_answers_the_source_on_translate(serve_process, serve_run):
    server = serve_process(serve_run, "--min-confidence", "1")
    r = post(server, "/translate", json={"q": ["Hund katze haus ."], "source": "de", "target": "en"})
    assert r.status_code == 200
    answer = r.json()
    assert answer["translatedText"] == ["Hund katze haus ."]
    assert "below min_confidence=1" in answer["warnings"][0][0]
    own = post(server, "/v1/translate", json={"texts": ["Hund katze haus ."], "min_confidence": 0.0}).json()
    assert own["translations"][0]["withheld"] is False  # the request's own setting wins

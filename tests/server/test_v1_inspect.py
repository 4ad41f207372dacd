"""/v1/translate's alignments, target prefixes and replaced <unk>s, and /v1/score (forced
decoding), over real HTTP. The reference answers come from the same run loaded in this process
(Translator.translate and Translator.score called directly)."""

from __future__ import annotations

import math

import httpx
import numpy as np
import pytest

SENTENCES = ["Hund katze rot .", "Ein kind spielt ball ."]


def post(served, path, **kwargs):
    return httpx.post(served.url + path, timeout=120, **kwargs)


def assert_error(response, status, text):
    assert response.status_code == status, response.text
    assert text in response.json()["error"]


# ---- /v1/translate: alignments, prefixes, replaced ----------------------------------------------

def test_alignments_match_the_translator(served, toy_translator):
    expected = toy_translator.translate(SENTENCES, beam_size=3, n_best=2, alignments=True)
    r = post(served, "/v1/translate", json={"texts": SENTENCES, "beam_size": 3, "n_best": 2, "alignments": True,
                                            "attention": True})
    assert r.status_code == 200, r.text
    for got, want in zip(r.json()["translations"], expected):
        assert got["text"] == want.text
        assert got["alignment"] == [list(link) for link in want.alignment]
        assert got["replaced"] == want.replaced
        for alt, want_alt in zip(got["alternatives"], want.alternatives):
            assert alt["alignment"] == [list(link) for link in want_alt.alignment]
            np.testing.assert_allclose(alt["attention"], want_alt.attention, atol=1e-6)


def test_without_alignments_there_are_none(served):
    t = post(served, "/v1/translate", json={"texts": SENTENCES[:1]}).json()["translations"][0]
    assert t["alignment"] is None and all(a["alignment"] is None for a in t["alternatives"])
    assert isinstance(t["replaced"], list)
    t = post(served, "/v1/translate", json={"texts": SENTENCES[:1], "attention": False}).json()["translations"][0]
    assert t["attention"] is None and all(a["attention"] is None for a in t["alternatives"])


def test_target_prefix_is_kept_and_completed(served, toy_translator):
    prefixes = ["cat zzzunknown", None]
    expected = toy_translator.translate(SENTENCES, beam_size=2, target_prefix=prefixes)
    r = post(served, "/v1/translate", json={"texts": SENTENCES, "beam_size": 2, "target_prefix": prefixes})
    assert r.status_code == 200, r.text
    got = r.json()["translations"]
    assert got[0]["tokens"][:2] == ["cat", "zzzunknown"]
    assert got[0]["text"].startswith("cat zzzunknown")
    assert [t["text"] for t in got] == [e.text for e in expected]
    assert got[1]["text"] == toy_translator.translate(SENTENCES[1:], beam_size=2)[0].text


@pytest.mark.parametrize("extra", [{"beam_size": 1}, {"beam_size": 3, "n_best": 3},
                                   {"beam_size": 1, "glossary": [["katze", "water"]]}])
def test_token_probabilities_agree_with_forced_decoding(served, extra):
    """Each hypothesis' token_probs, checked against /v1/score of its text (a teacher-forced pass,
    not the search): one per token plus <eos>, in (0, 1], the same log-probabilities."""
    r = post(served, "/v1/translate", json={"texts": SENTENCES, **extra})
    assert r.status_code == 200, r.text
    hyps = [(source, alt) for source, t in zip(SENTENCES, r.json()["translations"]) for alt in t["alternatives"]]
    for t in r.json()["translations"]:
        assert t["token_probs"] == t["alternatives"][0]["token_probs"]
    scored = post(served, "/v1/score", json={"texts": [s for s, _ in hyps], "attention": False,
                                             "translations": [a["text"] for _, a in hyps]})
    assert scored.status_code == 200, scored.text
    for (_, alt), score in zip(hyps, scored.json()["scores"]):
        probs = alt["token_probs"]
        assert len(probs) == len(alt["tokens"]) + 1 == score["num_tokens"]  # the toy outputs end with <eos>
        assert all(0 < p <= 1 for p in probs)
        assert sum(math.log(p) for p in probs) == pytest.approx(score["log_prob"], abs=1e-4)
        np.testing.assert_allclose(alt["token_log_probs"], score["token_log_probs"], atol=1e-4)


def test_target_prefix_errors(served):
    assert_error(post(served, "/v1/translate", json={"texts": SENTENCES, "target_prefix": ["a"]}), 422,
                 "target_prefix has 1 entries for 2 texts")
    r = post(served, "/v1/translate", json={"texts": SENTENCES[:1], "target_prefix": [3]})
    assert r.status_code == 422
    r = post(served, "/v1/translate", json={"texts": SENTENCES[:1], "alignments": 1})
    assert r.status_code == 422


# ---- /v1/score -------------------------------------------------------------------------------

def test_score_equals_translator_score(served, toy_translator):
    translations = ["dog cat red .", "a child plays ball ."]
    expected = toy_translator.score(SENTENCES, translations)
    r = post(served, "/v1/score", json={"texts": SENTENCES, "translations": translations})
    assert r.status_code == 200, r.text
    for got, want in zip(r.json()["scores"], expected):
        assert got["tokens"] == want.target_tokens and got["source_tokens"] == want.source_tokens
        assert got["num_tokens"] == want.num_tokens == len(got["tokens"]) + 1
        assert got["log_prob"] == pytest.approx(want.log_prob, abs=1e-5)
        assert got["normalized"] == pytest.approx(want.normalized, abs=1e-5)
        np.testing.assert_allclose(got["token_log_probs"], want.token_log_probs, atol=1e-5)
        np.testing.assert_allclose(got["token_probs"], np.exp(want.token_log_probs), atol=1e-5)
        assert sum(got["token_log_probs"]) == pytest.approx(got["log_prob"], abs=1e-4)
        np.testing.assert_allclose(got["attention"], want.attention, atol=1e-6)
        assert len(got["attention"]) == got["num_tokens"]


def test_score_of_the_best_translation_is_its_greedy_score(served):
    """Greedy search's output, forced: its log-probability is the search's (unnormalized) score."""
    t = post(served, "/v1/translate", json={"texts": SENTENCES[:1], "beam_size": 1}).json()["translations"][0]
    s = post(served, "/v1/score", json={"texts": SENTENCES[:1], "translations": [t["text"]]}).json()["scores"][0]
    assert s["tokens"] == t["tokens"]
    assert all(0.0 < p <= 1.0 for p in s["token_probs"])


def test_score_empty_source_and_no_attention(served):
    r = post(served, "/v1/score", json={"texts": ["", SENTENCES[0]], "translations": ["a", "dog"],
                                       "attention": False})
    assert r.status_code == 200, r.text
    empty, plain = r.json()["scores"]
    assert empty["log_prob"] is None and empty["attention"] is None
    assert math.isfinite(plain["log_prob"]) and plain["attention"] is None


def test_score_errors_are_those_of_translate(served):
    assert_error(post(served, "/v1/score", json={"texts": SENTENCES, "translations": ["a"]}), 422,
                 "1 translations for 2 texts")
    assert_error(post(served, "/v1/score", json={"texts": ["a"] * 1000, "translations": ["a"] * 1000}), 413,
                 "exceeds text limit")
    assert_error(post(served, "/v1/score", json={"texts": ["a"], "translations": ["a"], "source": "fr",
                                                "target": "en"}), 400, "fr is not supported")
    assert_error(post(served, "/v1/score", json={"texts": ["a"], "translations": ["a"], "source": "de"}), 422,
                 "give both source and target")
    for body in ({"texts": ["a"]}, {"texts": ["a"], "translations": [1]}, {"texts": ["a"], "translations": ["a"], "x": 1},
                 {"texts": ["a"], "translations": ["a"], "attention": "yes"}):
        r = post(served, "/v1/score", json=body)
        assert r.status_code == 422 and "error" in r.json(), (body, r.text)
    r = post(served, "/v1/score", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code in (400, 422)


def test_score_in_the_openapi_schema(served):
    spec = httpx.get(served.url + "/openapi.json", timeout=30).json()
    assert "/v1/score" in spec["paths"]
    request = spec["components"]["schemas"]["V1TranslateRequest"]["properties"]
    assert "alignments" in request and "target_prefix" in request


# ---- the CTranslate2 engine: scores without attention, prefixes kept -------------------------

@pytest.fixture(scope="module")
def served_ct2(toy_transformer_run, tmp_path_factory):
    """`attnmt serve` on the tiny Transformer exported to CTranslate2, and that export loaded here."""
    pytest.importorskip("ctranslate2")
    from support.servers import ServeProcess

    from attnmt.engines.ctranslate2_export import export_run
    from attnmt.translator import Translator

    export = export_run(toy_transformer_run, tmp_path_factory.mktemp("ct2") / "export")
    server = ServeProcess(export)
    yield server, Translator.load(export, engine="ctranslate2")
    server.stop()


def test_ctranslate2_scores_have_no_attention(served_ct2):
    server, translator = served_ct2
    translations = ["dog cat red .", "a child plays ball ."]
    expected = translator.score(SENTENCES, translations)
    r = post(server, "/v1/score", json={"texts": SENTENCES, "translations": translations})
    assert r.status_code == 200, r.text
    for got, want in zip(r.json()["scores"], expected):
        assert got["attention"] is None
        assert got["log_prob"] == pytest.approx(want.log_prob, abs=1e-5)
        np.testing.assert_allclose(got["token_log_probs"], want.token_log_probs, atol=1e-5)


def test_ctranslate2_gives_no_token_probabilities(served_ct2):
    server, _ = served_ct2
    r = post(server, "/v1/translate", json={"texts": SENTENCES, "beam_size": 2, "n_best": 2})
    assert r.status_code == 200, r.text
    for t in r.json()["translations"]:
        assert t["token_probs"] is None and all(a["token_probs"] is None for a in t["alternatives"])


def test_ctranslate2_keeps_the_prefix(served_ct2):
    server, translator = served_ct2
    prefixes = ["cat zzzunknown", None]
    expected = translator.translate(SENTENCES, beam_size=2, target_prefix=prefixes, alignments=True)
    r = post(server, "/v1/translate", json={"texts": SENTENCES, "beam_size": 2, "target_prefix": prefixes,
                                           "alignments": True})
    assert r.status_code == 200, r.text
    got = r.json()["translations"]
    assert got[0]["text"].startswith("cat zzzunknown")
    assert [t["text"] for t in got] == [e.text for e in expected]
    assert [t["alignment"] for t in got] == [[list(link) for link in e.alignment] for e in expected]


# ---- /v1/translate: glossary (terminology constraints) ------------------------------------------

def test_a_glossary_term_appears_once_where_its_source_phrase_occurs(served, toy_translator):
    glossary = [["katze", "water"], ["nirgends", "tree"]]  # the second source phrase occurs in no text
    r = post(served, "/v1/translate", json={"texts": SENTENCES, "beam_size": 3, "glossary": glossary})
    assert r.status_code == 200, r.text
    first, second = r.json()["translations"]
    assert first["tokens"].count("water") == 1 and "tree" not in first["tokens"]  # "katze" is in the first
    plain = toy_translator.translate(SENTENCES[1:], beam_size=3)[0]
    assert second["tokens"] == plain.tokens  # no source phrase occurs: decoded exactly as without a glossary
    constrained = toy_translator.translate(SENTENCES, beam_size=3, constraints=[[tuple(p) for p in glossary]] * 2)
    assert first["tokens"] == constrained[0].tokens


def test_a_glossary_with_greedy_search(served, toy_translator):
    r = post(served, "/v1/translate", json={"texts": SENTENCES, "beam_size": 1, "glossary": [["katze", "water"]]})
    assert r.status_code == 200, r.text
    first, second = r.json()["translations"]
    assert first["tokens"].count("water") == 1
    assert second["tokens"] == toy_translator.translate(SENTENCES[1:], beam_size=1)[0].tokens


@pytest.mark.parametrize("body,status,text", [
    ({"glossary": [["katze"]]}, 422, "glossary"),
    ({"glossary": [["katze", 5]]}, 422, "glossary"),
    ({"glossary": [["a", "b"]] * 65}, 422, "glossary"),
])
def test_a_bad_glossary_is_a_422_naming_it(served, body, status, text):
    assert_error(post(served, "/v1/translate", json={"texts": SENTENCES, **body}), status, text)

"""POST /detect and `source: "auto"` over real HTTP, on a server with two models into English:
the toy de -> en run, and the toy en -> de run relabeled fr -> en (its weights write German toy
words, so an answer shows which model made it). Real German and French sentences (Multi30k's
style) are told apart by the language identifier, restricted to the server's sources."""

from __future__ import annotations

import re

import httpx
import pytest

from support import toy

GERMAN = "Zwei Hunde spielen im Schnee ."
FRENCH = "Deux chiens jouent dans la neige ."


@pytest.fixture(scope="module")
def fr_en_run(en_de_run, tmp_path_factory):
    """The en -> de toy run relabeled as fr -> en (a model of another pair whose outputs differ)."""
    return toy.edited_copy(en_de_run, tmp_path_factory.mktemp("fr_en") / "fr_en",
                           data={"src_lang": "fr", "tgt_lang": "en"})


@pytest.fixture(scope="module")
def into_english(fr_en_run, serve_run):
    from support.servers import ServeProcess

    server = ServeProcess([serve_run, fr_en_run])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def references(serve_run, fr_en_run):
    from attnmt.translator import Translator

    out = {}
    for code, run in (("de", serve_run), ("fr", fr_en_run)):
        translator = Translator.load(run, device="cpu")
        out[code] = {s: r.text for s, r in zip([GERMAN, FRENCH], translator.translate([GERMAN, FRENCH], beam_size=3))}
    assert out["de"][GERMAN] != out["fr"][GERMAN]
    return out


def post(server, path, **kwargs):
    return httpx.post(server.url + path, timeout=60, **kwargs)


def test_detect_with_json_form_and_multipart_bodies(into_english):
    for sentence, language in ((GERMAN, "de"), (FRENCH, "fr")):
        for kind in ("json", "data", "files"):
            value = {"q": sentence} if kind != "files" else {"q": (None, sentence)}
            r = post(into_english, "/detect", **{kind: value})
            assert r.status_code == 200, r.text
            ranked = r.json()
            assert [d["language"] for d in ranked][0] == language
            assert {d["language"] for d in ranked} == {"de", "fr"}  # only the server's sources
            assert ranked[0]["confidence"] > 50 and abs(sum(d["confidence"] for d in ranked) - 100) < 0.5


def test_auto_source_routes_each_text_to_the_model_of_its_language(into_english, references):
    r = post(into_english, "/translate", json={"q": GERMAN, "source": "auto", "target": "en"})
    body = r.json()
    assert body["translatedText"] == references["de"][GERMAN]
    assert body["detectedLanguage"]["language"] == "de" and body["detectedLanguage"]["confidence"] > 50
    r = post(into_english, "/translate", data={"q": [FRENCH, GERMAN], "source": "auto", "target": "en"})
    body = r.json()
    assert body["translatedText"] == [references["fr"][FRENCH], references["de"][GERMAN]]
    assert [d["language"] for d in body["detectedLanguage"]] == ["fr", "de"]


@pytest.mark.parametrize("kwargs,status,pattern", [
    ({"json": {}}, 400, r"^Invalid request: missing q parameter$"),
    ({"json": {"q": "   "}}, 400, r"missing q parameter"),
    ({"json": {"q": ["a", "b"]}}, 400, r"^Invalid request: q must be a string$"),
    ({"json": {"q": "Hund", "lang": "de"}}, 400, r"^Invalid request: unknown parameter lang$"),
    ({"json": [1, 2]}, 400, r"must be an object"),
    ({"content": b"{", "headers": {"content-type": "application/json"}}, 400, r"malformed JSON"),
    ({"content": b"q=\xff", "headers": {"content-type": "application/x-www-form-urlencoded"}}, 400, r"not valid UTF-8"),
    ({"content": b"q", "headers": {"content-type": "text/plain"}}, 400, r"send a JSON or a form body"),
    ({"files": {"q": ("a.txt", b"Hund")}}, 400, r"q must be text, not a file"),
    ({"content": b'{"q": "\\ud800"}', "headers": {"content-type": "application/json"}}, 400, r"not valid Unicode"),
])
def test_detect_errors_are_json_4xx_and_the_server_goes_on(into_english, kwargs, status, pattern):
    r = post(into_english, "/detect", **kwargs)
    assert r.status_code == status and re.search(pattern, r.json()["error"]), r.text
    assert "Traceback" not in r.text
    assert post(into_english, "/detect", json={"q": GERMAN}).json()[0]["language"] == "de"


def test_detect_and_auto_need_the_key_when_the_server_has_one(serve_run, fr_en_run):
    from support.servers import ServeProcess

    server = ServeProcess([serve_run, fr_en_run], "--api-key", "s3cret")
    try:
        assert post(server, "/detect", json={"q": GERMAN}).json() == {"error": "Invalid API key"}
        r = post(server, "/detect", data={"q": GERMAN, "api_key": "s3cret"})
        assert r.status_code == 200 and r.json()[0]["language"] == "de"
    finally:
        server.stop()


ENGLISH = "Two dogs play in the snow ."


def test_an_auto_detected_mixed_list_says_each_texts_pivot(serve_run, fr_en_run, en_de_run):
    """Issue 50: with `source: auto` and a list of texts in several languages, each text says its
    own pivot (before: one `pivot` for every text). Into German: English directly (en -> de), French
    through English (fr -> en -> de)."""
    from support.servers import ServeProcess

    server = ServeProcess([serve_run, fr_en_run, en_de_run])
    try:
        body = post(server, "/translate", json={"q": [ENGLISH, FRENCH, ENGLISH], "source": "auto",
                                                "target": "de"}).json()
        assert [d["language"] for d in body["detectedLanguage"]] == ["en", "fr", "en"]
        assert body["pivot"] == [None, "en", None]
        assert len(body["translatedText"]) == 3 and body["translatedText"][0] == body["translatedText"][2]
        assert "pivot" not in post(server, "/translate", json={"q": ENGLISH, "source": "auto", "target": "de"}).json()
        assert post(server, "/translate", json={"q": FRENCH, "source": "auto", "target": "de"}).json()["pivot"] == "en"
    finally:
        server.stop()

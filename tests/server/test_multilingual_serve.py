"""`attnmt serve` of one multilingual model (de-en, en-de, fr-en) over real HTTP: every direction it
was trained for is listed and routed; fr -> de goes through English and says so; de -> fr, which
nothing reaches, gets 400 naming the directions; /v1 routes by source and target. The expected
translations come from the model loaded in this process."""

from __future__ import annotations

import httpx
import pytest

from attnmt.translator import Translator


@pytest.fixture(scope="module")
def server(serve_process_module, multilingual_pairs_run):
    return serve_process_module(multilingual_pairs_run)


@pytest.fixture(scope="module")
def serve_process_module():
    from conftest import ServeProcess

    started = []

    def start(run_dir, *flags):
        started.append(ServeProcess(run_dir, *flags))
        return started[-1]

    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="module")
def model(multilingual_pairs_run):
    return Translator.load(multilingual_pairs_run, device="cpu")


def post(server, path: str, body: dict) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=60)


def test_languages_list_every_direction_and_what_english_reaches(server):
    languages = {entry["code"]: entry["targets"] for entry in httpx.get(server.url + "/languages").json()}
    assert languages == {"de": ["en"], "en": ["de"], "fr": ["en", "de"]}  # fr -> de through en
    cards = httpx.get(server.url + "/v1/models").json()
    assert [(c["source_lang"], c["target_lang"]) for c in cards] == [("de", "en"), ("en", "de"), ("fr", "en")]
    assert all(c["directions"] == ["de-en", "en-de", "fr-en"] and c["name"] == "run" for c in cards)


@pytest.mark.parametrize("source, target, text", [("de", "en", "hund rot haus"), ("en", "de", "dog red house"),
                                                  ("fr", "en", "chien rouge maison")])
def test_each_direction_is_translated_by_its_language_token(server, model, source, target, text):
    answer = post(server, "/translate", {"q": text, "source": source, "target": target}).json()
    beam = model.cfg.search.beam_size
    assert answer == {"translatedText": model.translate([text], source_lang=source, target_lang=target,
                                                        beam_size=beam)[0].text}
    v1 = post(server, "/v1/translate", {"texts": [text], "source": source, "target": target}).json()
    assert v1["translations"][0]["text"] == answer["translatedText"]


def test_a_direction_through_english_says_so(server, model):
    text = "chien rouge maison"
    answer = post(server, "/translate", {"q": [text], "source": "fr", "target": "de"}).json()
    beam = model.cfg.search.beam_size
    english = model.translate([text], source_lang="fr", target_lang="en", beam_size=beam)[0].text
    german = model.translate([english], source_lang="en", target_lang="de", beam_size=beam)[0].text
    assert answer == {"translatedText": [german], "pivot": "en"}


@pytest.mark.parametrize("body, pattern", [
    ({"q": "hund", "source": "de", "target": "fr"}, r"^fr is not supported: this server translates de -> en, "
                                                    r"en -> de, fr -> en$"),  # LibreTranslate's words: fr as a target
    ({"q": "hund", "source": "cs", "target": "en"}, r"^cs is not supported: this server translates"),
])
def test_a_direction_nothing_reaches_gets_400_naming_the_directions(server, body, pattern):
    import re

    response = post(server, "/translate", body)
    assert response.status_code == 400 and re.search(pattern, response.json()["error"])


def test_v1_refuses_a_pivot_direction_and_says_where_it_works(server):
    response = post(server, "/v1/translate", {"texts": ["chien"], "source": "fr", "target": "de"})
    assert response.status_code == 400
    assert "not supported directly" in response.json()["error"] and "through en" in response.json()["error"]

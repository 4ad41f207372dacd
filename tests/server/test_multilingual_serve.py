"""`attnmt serve` of one multilingual model (de-en, en-de, fr-en) over real HTTP: every direction it
was trained for is listed and routed; fr -> de goes through English and says so; de -> fr, which
nothing reaches, gets 400 naming the directions; /v1 routes by source and target. The expected
translations come from the model loaded in this process."""

from __future__ import annotations

import httpx
import pytest

from attnmt.translator import Translator


@pytest.fixture(scope="module")
def server(served_multilingual):
    return served_multilingual


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


# ---- generated languages and directions (Hypothesis), over real HTTP -----------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzzing import fuzz  # noqa: E402

CODES = st.one_of(st.sampled_from(["de", "en", "fr", "cs", "auto", "", "DE", "en-US", "<2fr>", "de-en"]),
                  st.text(max_size=12), st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))


@fuzz(60, 2000)
@given(source=CODES, target=CODES, route=st.sampled_from(["/translate", "/v1/translate", "/v1/score"]))
def test_any_source_and_target_get_an_answer_or_a_4xx_naming_the_problem(server, source, target, route):
    body = {"q": "hund rot", "source": source, "target": target} if route == "/translate" else \
        {"texts": ["hund rot"], "source": source, "target": target,
         **({"translations": ["dog red"]} if route == "/v1/score" else {})}
    response = post(server, route, body)
    assert response.status_code in (200, 400, 422), (response.status_code, response.text)
    if response.status_code != 200:
        assert isinstance(response.json()["error"], str) and response.json()["error"]
    else:
        direct = {("de", "en"), ("en", "de"), ("fr", "en")}
        if route == "/translate":  # fr -> de through en; auto: a source detected among those reaching target
            assert (source, target) in direct | {("fr", "de")} or (source == "auto" and target in ("en", "de"))
        else:  # /v1: a direction the model has, or none at all (the first one)
            assert (source, target) in direct | {(None, None)}

"""Several models in one `attnmt serve`: a de -> en and an en -> de toy run served at once, over
real HTTP. Each request is routed by its source and target; concurrent clients interleaving both
pairs always get their own pair's translation (checked against each run translated directly)."""

from __future__ import annotations

import itertools
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from attnmt.commands.serve import ModelSpec, model_specs
from support.servers import libretranslate_fields

GERMAN = ["Hund katze rot .", "Ein kind spielt ball .", "Groß haus blau wasser baum .", "Frau mann auto ."]
ENGLISH = ["Dog cat red .", "Child ball water .", "Big house blue water tree .", "Woman man car ."]


@pytest.fixture(scope="module")
def two_pairs(serve_process, serve_run, en_de_run):
    return serve_process([serve_run, en_de_run])


@pytest.fixture(scope="module")
def serve_process():  # module-scoped here: one two-model server for the whole module
    from support.servers import ServeProcess

    started = []

    def start(*args):
        started.append(ServeProcess(*args))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def references(serve_run, en_de_run):
    """Each run translated in this process: pair -> {sentence: translation} (beam 3, as served)."""
    from attnmt.translator import Translator

    answers = {}
    for pair, run, sentences in (("de-en", serve_run, GERMAN), ("en-de", en_de_run, ENGLISH)):
        translator = Translator.load(run, device="cpu")
        answers[pair] = {s: r.text for s, r in zip(sentences, translator.translate(sentences, beam_size=3))}
    assert answers["de-en"] != answers["en-de"]
    return answers


def test_languages_and_models_list_both_pairs(two_pairs):
    assert httpx.get(two_pairs.url + "/languages").json() == [
        {"code": "de", "name": "German", "targets": ["en"]}, {"code": "en", "name": "English", "targets": ["de"]}]
    models = httpx.get(two_pairs.url + "/v1/models").json()
    assert [(m["source_lang"], m["target_lang"]) for m in models] == [("de", "en"), ("en", "de")]
    assert httpx.get(two_pairs.url + "/v1/model").json()["source_lang"] == "de"  # the first is the default
    assert httpx.get(two_pairs.url + "/health").json()["model"] == "run, en_de"


def test_each_request_goes_to_its_pair(two_pairs, references):
    for source, target, sentences in (("de", "en", GERMAN), ("en", "de", ENGLISH)):
        r = httpx.post(two_pairs.url + "/translate", json={"q": sentences, "source": source, "target": target},
                       timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == [references[f"{source}-{target}"][s] for s in sentences]
        v1 = httpx.post(two_pairs.url + "/v1/translate", json={"texts": sentences[:1], "source": source,
                                                                "target": target, "beam_size": 3}, timeout=120)
        assert v1.json()["translations"][0]["text"] == references[f"{source}-{target}"][sentences[0]]


@pytest.mark.parametrize("body,pattern", [
    ({"source": "de", "target": "de"}, r"^de -> de is not supported: this server translates de -> en, en -> de$"),
    ({"source": "fr", "target": "en"}, r"^fr is not supported: this server translates de -> en, en -> de$"),
    ({"source": "en", "target": "cs"}, r"^cs is not supported: this server translates de -> en, en -> de$"),
    ({"source": "auto", "target": "fr"}, r"^fr is not supported: this server translates de -> en, en -> de$"),
])
def test_a_pair_no_model_has_is_refused_naming_the_pairs(two_pairs, body, pattern):
    for data in (body, None):  # JSON, then the same fields as a form
        r = httpx.post(two_pairs.url + "/translate", timeout=60,
                       **({"json": {"q": "Hund .", **body}} if data else {"data": {"q": "Hund .", **body}}))
        assert r.status_code == 400 and re.search(pattern, r.json()["error"]), r.text
    if body["source"] != "auto":  # /v1 has no auto
        r = httpx.post(two_pairs.url + "/v1/translate", json={"texts": ["Hund ."], **body}, timeout=60)
        assert r.status_code == 400 and re.search(pattern, r.json()["error"]), r.text
    r = httpx.post(two_pairs.url + "/v1/translate", json={"texts": ["Hund ."], "source": "de"}, timeout=60)
    assert r.status_code == 422 and "both source and target" in r.json()["error"]
    assert httpx.get(two_pairs.url + "/health").status_code == 200


def test_auto_with_one_source_into_the_target_needs_no_guess(two_pairs, references):
    r = httpx.post(two_pairs.url + "/translate", json={"q": ENGLISH[0], "source": "auto", "target": "de"}, timeout=60)
    assert libretranslate_fields(r.json()) == {"translatedText": references["en-de"][ENGLISH[0]],
                        "detectedLanguage": {"confidence": 100.0, "language": "en"}}


def test_concurrent_clients_interleaving_pairs_never_get_the_other_pairs_answer(two_pairs, references):
    jobs = list(itertools.islice(itertools.cycle(
        [("de", "en", s) for s in GERMAN] + [("en", "de", s) for s in ENGLISH]), 64))
    jobs = jobs[::2] + jobs[1::2]  # interleave the pairs within and across the clients

    def send(job):
        source, target, sentence = job
        body = {"q": sentence, "source": source, "target": target}
        with httpx.Client(timeout=120) as client:
            r = client.post(two_pairs.url + "/translate", json=body)
        return job, r.status_code, r.json()

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(send, jobs))
    for (source, target, sentence), status, body in answers:
        assert status == 200, body
        assert body["translatedText"] == references[f"{source}-{target}"][sentence], (source, sentence)
    assert httpx.get(two_pairs.url + "/health").json()["sentences"] >= len(jobs)


def test_model_arguments_are_models_and_plus_joins_an_ensemble(serve_run, en_de_run):
    specs = model_specs([f"{serve_run}+{serve_run}", str(en_de_run)], None)
    assert specs == [ModelSpec((str(serve_run), str(serve_run)), "native"), ModelSpec((str(en_de_run),), "native")]
    assert specs[0].name == "run+run"

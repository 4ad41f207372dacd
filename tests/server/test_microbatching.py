"""Micro-batching, model faults, API keys and CORS, over real HTTP to the app under uvicorn in a
thread. The translator is wrapped to record each model call, to hold a call until the test
releases it (so that what shares a batch does not depend on timing), and to fail on a marker."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest


class WrappedTranslator:
    """A Translator that records calls, can hold them (gate) and raises on texts containing `fail_on`."""

    def __init__(self, translator, fail_on: str | None = None):
        self.translator = translator
        self.fail_on = fail_on
        self.calls: list[tuple[list[str], object]] = []  # (texts, DecodingOptions)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def __getattr__(self, name):  # cfg, pipeline, model, run_dir
        return getattr(self.translator, name)

    def translate(self, texts, options=None, **kwargs):
        self.calls.append((list(texts), self.translator.decoding_options(options, **kwargs)))
        self.entered.set()
        assert self.gate.wait(timeout=300), "the test never released the gate"
        if self.fail_on and any(self.fail_on in t for t in texts):
            raise RuntimeError("injected fault")
        return self.translator.translate(texts, options, **kwargs)


def wait_for(url: str, predicate, seconds: float = 120) -> dict:
    """Poll /health until predicate(health) holds; returns that health."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        health = httpx.get(url + "/health", timeout=30).json()
        if predicate(health):
            return health
        time.sleep(0.02)
    raise AssertionError(f"/health never satisfied the condition; last: {health}")


def post_json(url, path, body, **kwargs):
    return httpx.post(url + path, json=body, timeout=300, **kwargs)


@pytest.fixture
def wrapped(toy_translator):
    return WrappedTranslator(toy_translator, fail_on="BOOM")


@pytest.fixture
def server(wrapped, thread_server):
    yield thread_server(wrapped, max_wait_ms=20, max_batch_sentences=64)
    wrapped.gate.set()


def hold_first_batch(server, wrapped, pool):
    """Start a request whose model call is held; returns its future once the model is busy."""
    wrapped.gate.clear()
    wrapped.entered.clear()  # an earlier call of the same test may have set it: wait for this request's call
    future = pool.submit(post_json, server.url, "/v1/translate", {"texts": ["Hund ."], "beam_size": 2})
    assert wrapped.entered.wait(timeout=120)
    return future


def test_concurrent_requests_share_batches_without_mixing(server, wrapped, toy_translator):
    words = "hund katze haus baum auto mann frau kind ball wasser rot blau".split()
    requests = []  # (texts, beam): beam 1 and beam 3 requests, some with several texts
    for i in range(12):
        texts = [f"{words[i].capitalize()} {words[(i + 3) % 12]} ."] + ([f"{words[(i + 5) % 12]} ."] if i % 3 == 0 else [])
        requests.append((texts, 1 if i % 2 else 3))
    sentences = sum(len(t) for t, _ in requests)
    with ThreadPoolExecutor(max_workers=16) as pool:
        first = hold_first_batch(server, wrapped, pool)
        health = httpx.get(server.url + "/health", timeout=30).json()  # answers while the model is busy
        assert health["status"] == "ok" and health["running"] == 1
        futures = [pool.submit(post_json, server.url, "/v1/translate", {"texts": t, "beam_size": b})
                   for t, b in requests]
        wait_for(server.url, lambda h: h["queued"] == sentences)
        wrapped.gate.set()
        answers = [f.result() for f in futures]
        assert first.result().status_code == 200
    for (texts, beam), answer in zip(requests, answers):
        assert answer.status_code == 200, answer.text
        expected = toy_translator.translate(texts, beam_size=beam)
        assert [t["text"] for t in answer.json()["translations"]] == [e.text for e in expected]
        assert [t["source_tokens"] for t in answer.json()["translations"]] == [e.source_tokens for e in expected]
    later_calls = wrapped.calls[1:]
    assert len(later_calls) == 2  # everything queued while the model was busy: one batch per setting
    for texts, options in later_calls:
        group = [t for ts, b in requests if b == options.beam_size for t in ts]
        assert sorted(texts) == sorted(group)  # never a sentence of the other setting
    assert httpx.get(server.url + "/health").json()["largest_batch"] == max(len(t) for t, _ in later_calls)


def test_model_fault_is_500_for_that_request_only(server, wrapped, toy_translator):
    r = post_json(server.url, "/v1/translate", {"texts": ["BOOM ."]})
    assert r.status_code == 500 and r.json() == {"error": "Cannot translate text: RuntimeError: injected fault"}
    r = post_json(server.url, "/translate", {"q": "BOOM", "source": "de", "target": "en"})
    assert r.status_code == 500 and "injected fault" in r.json()["error"] and "Traceback" not in r.text
    r = post_json(server.url, "/v1/translate", {"texts": ["Hund katze ."]})
    assert r.status_code == 200
    assert r.json()["translations"][0]["text"] == toy_translator.translate("Hund katze .", beam_size=3)[0].text

    with ThreadPoolExecutor(max_workers=4) as pool:  # a fault in a shared batch
        first = hold_first_batch(server, wrapped, pool)
        bad = pool.submit(post_json, server.url, "/v1/translate", {"texts": ["Ein BOOM ."]})
        good = [pool.submit(post_json, server.url, "/v1/translate", {"texts": [t]}) for t in ("Rot auto .", "Kind .")]
        wait_for(server.url, lambda h: h["queued"] == 3)
        wrapped.gate.set()
        assert first.result().status_code == 200
        assert bad.result().status_code == 500
        for future, text in zip(good, ("Rot auto .", "Kind .")):
            assert future.result().status_code == 200
            assert future.result().json()["translations"][0]["text"] == toy_translator.translate(text, beam_size=3)[0].text
    assert httpx.get(server.url + "/health").json()["failed_batches"] >= 3


@pytest.fixture
def guarded(toy_translator, thread_server):
    return thread_server(toy_translator, api_key="s3cret", cors_origin="http://example.test")


def test_api_key_gives_403_without_it(guarded):
    body = {"q": "Hund .", "source": "de", "target": "en"}
    for extra in ({}, {"api_key": "wrong"}):
        r = post_json(guarded.url, "/translate", {**body, **extra})
        assert r.status_code == 403 and r.json() == {"error": "Invalid API key"}
    assert post_json(guarded.url, "/translate", {**body, "api_key": "s3cret"}).status_code == 200
    assert httpx.post(guarded.url + "/translate", data={**body, "api_key": "s3cret"}).status_code == 200
    assert post_json(guarded.url, "/v1/translate", {"texts": ["Hund ."]}).status_code == 403
    assert post_json(guarded.url, "/v1/translate", {"texts": ["Hund ."]}, headers={"X-API-Key": "s3cret"}).status_code == 200
    assert post_json(guarded.url, "/v1/translate", {"texts": ["Hund ."], "api_key": "s3cret"}).status_code == 200
    assert httpx.get(guarded.url + "/languages").status_code == 200
    assert httpx.get(guarded.url + "/v1/model").json()["api_key_required"] is True


def test_cors_only_for_the_given_origin(guarded, toy_translator, thread_server):
    r = httpx.get(guarded.url + "/languages", headers={"Origin": "http://example.test"})
    assert r.headers["access-control-allow-origin"] == "http://example.test"
    r = httpx.get(guarded.url + "/languages", headers={"Origin": "http://evil.test"})
    assert "access-control-allow-origin" not in r.headers
    preflight = {"Origin": "http://example.test", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"}
    r = httpx.options(guarded.url + "/translate", headers=preflight)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "http://example.test"

    plain = thread_server(toy_translator)  # no --cors-origin: no cross-origin access at all
    r = httpx.get(plain.url + "/languages", headers={"Origin": "http://example.test"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    r = httpx.options(plain.url + "/translate", headers=preflight)
    assert "access-control-allow-origin" not in r.headers and r.json()["error"]

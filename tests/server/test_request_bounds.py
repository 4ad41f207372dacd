"""What one request may cost the service (issue 66 groups A, B, F), over real HTTP to `attnmt serve`
on the toy RNN: sentences counted before any work on every route (413 past --max-sentences, the
model untouched), a paragraph's attention as per-sentence blocks equal to each sentence's own
(computed here by translating the sentences one by one), a cut paragraph said by /translate_file,
a client that leaves has nothing more translated, and Hypothesis over request sizes: the served
process's peak memory grows at most linearly in the sentences and a one-sentence request keeps
answering while the large one runs."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.servers import ServeProcess

LIMIT = 600  # --max-sentences of the served toy
BATCH = 32  # its --max-batch-sentences
SENTENCE = "Hund katze rot ."  # 4 tokens, one sentence


def post(server, path, **kwargs):
    return httpx.post(server.url + path, timeout=300, **kwargs)


def health(server) -> dict:
    return httpx.get(server.url + "/health", timeout=30).json()


@pytest.fixture(scope="module")
def bounded(serve_run):
    server = ServeProcess(serve_run, "--max-sentences", str(LIMIT), "--max-batch-sentences", str(BATCH))
    yield server
    server.stop()


def paragraph(n: int, sentence: str = SENTENCE) -> str:
    return " ".join([sentence] * n)


# ----------------------------------------------------------------------------- A: counted before any work

def test_every_route_counts_sentences_not_texts_before_any_work(bounded):
    """413 for LIMIT + 1 sentences in one text (plain /translate had no bound; HTML and files
    counted blocks and paragraphs), and /health says no sentence went to the model."""
    before = health(bounded)["sentences"]
    over = paragraph(LIMIT + 1)
    refusals = [
        post(bounded, "/translate", json={"q": over, "source": "de", "target": "en"}),
        post(bounded, "/translate", json={"q": [paragraph(LIMIT // 2)] * 2 + [SENTENCE], "source": "de",
                                          "target": "en"}),
        post(bounded, "/translate", json={"q": f"<p>{over}</p>", "source": "de", "target": "en", "format": "html"}),
        post(bounded, "/v1/translate", json={"texts": [over]}),
        post(bounded, "/translate_file", data={"source": "de", "target": "en"},
             files={"file": ("one-line.txt", over.encode(), "text/plain")}),
    ]
    for answer in refusals:
        assert answer.status_code == 413, answer.text
        assert "exceed the limit of 600 (--max-sentences)" in answer.json()["error"]
    assert health(bounded)["sentences"] == before  # refused before any work
    fits = post(bounded, "/translate", json={"q": paragraph(3), "source": "de", "target": "en"})
    assert fits.status_code == 200 and health(bounded)["sentences"] == before + 3  # one sentence each


def test_a_paragraphs_attention_is_each_sentences_own(bounded, toy_translator):
    """/v1's attention for a text of several sentences: one block per sentence, each the
    attention of that sentence translated alone; the dense matrix only while it is small."""
    sentences = ["Hund katze rot .", "Ein kind spielt ball .", "Haus blau ."]
    alone = toy_translator.translate(sentences, beam_size=2)
    small = post(bounded, "/v1/translate", json={"texts": [" ".join(sentences)], "beam_size": 2,
                                                "attention": True}).json()["translations"][0]
    blocks = small["attention_blocks"]
    assert len(blocks) == 3
    row = col = 0
    for block, want in zip(blocks, alone):
        assert (block["row"], block["col"]) == (row, col)
        np.testing.assert_allclose(block["weights"], want.attention, atol=1e-6)
        row, col = row + len(want.tokens), col + len(want.source_tokens)
    dense = np.array(small["attention"])  # small: the matrix too, zeros off the blocks
    assert dense.shape == (row, col)
    for block in blocks:
        weights = np.array(block["weights"])
        r, c = block["row"], block["col"]
        np.testing.assert_allclose(dense[r:r + weights.shape[0], c:c + weights.shape[1]], weights, atol=1e-6)
        dense[r:r + weights.shape[0], c:c + weights.shape[1]] = 0
    assert not dense.any()

    big = post(bounded, "/v1/translate", json={"texts": [paragraph(LIMIT, "Hund katze rot blau haus .")],
                                              "beam_size": 1, "attention": True})
    assert big.status_code == 200 and len(big.content) < 3_000_000  # the dense answer was ~90 MB
    got = big.json()["translations"][0]
    assert got["attention"] is None and len(got["attention_blocks"]) == LIMIT
    assert any("given as attention_blocks only" in w for w in got["warnings"])
    plain = post(bounded, "/v1/translate", json={"texts": [SENTENCE]}).json()["translations"][0]
    assert plain["attention"] is None and plain["attention_blocks"] is None  # asked for, not by default


# ----------------------------------------------------------------------------- F: a cut is said

def test_translate_file_says_a_cut_paragraph(bounded):
    """A 60-word line without a full stop is cut at search.max_input_tokens (12 here): the answer
    says so in `warnings` (it said nothing; the CLI warned)."""
    line = " ".join(["hund", "katze", "rot", "blau"] * 15) + "\n"
    answer = post(bounded, "/translate_file", data={"source": "de", "target": "en"},
                  files={"file": ("long.txt", line.encode(), "text/plain")})
    assert answer.status_code == 200, answer.text
    assert any("cut" in w for w in answer.json()["warnings"]), answer.json()
    short = post(bounded, "/translate_file", data={"source": "de", "target": "en"},
                 files={"file": ("short.txt", b"Hund katze .\n", "text/plain")})
    assert "warnings" not in short.json()  # LibreTranslate's answer as it was when nothing was cut


# ----------------------------------------------------------------------------- B: a client that leaves

class Held:
    """The toy translator behind a gate: the first call waits until the test opens it; every call's
    sentences are counted."""

    def __init__(self, translator):
        self.translator = translator
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.translated = 0  # sentences (not `sentences`: the translator's splitter)

    def __getattr__(self, name):
        return getattr(self.translator, name)

    def translate(self, texts, options=None, **kwargs):
        self.translated += len(texts)
        self.entered.set()
        assert self.gate.wait(timeout=300)
        return self.translator.translate(texts, options, **kwargs)


def test_a_client_that_leaves_has_nothing_more_translated(toy_translator, thread_server):
    held = Held(toy_translator)
    server = thread_server(held, max_batch_sentences=8, max_wait_ms=0)
    with ThreadPoolExecutor(max_workers=1) as pool:
        gone = pool.submit(httpx.post, server.url + "/translate", timeout=1.5,
                           json={"q": paragraph(200), "source": "de", "target": "en"})
        assert held.entered.wait(timeout=60)  # the first batch of 8 is in the model
        with pytest.raises(httpx.TimeoutException):
            gone.result()  # the client gives up and closes its connection
    time.sleep(0.5)  # the server sees the disconnect
    held.gate.set()
    answer = httpx.post(server.url + "/translate", json={"q": SENTENCE, "source": "de", "target": "en"}, timeout=60)
    assert answer.status_code == 200
    time.sleep(0.5)
    assert held.translated == 8 + 1  # the batch in hand, then the next request: none of the other 192


# ----------------------------------------------------------------------------- sizes, generated

def memory_kb(pid: int, field: str) -> int:
    for line in open(f"/proc/{pid}/status", encoding="ascii"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(per_text=st.integers(1, 200), texts=st.integers(1, 3), attention=st.booleans())
def test_memory_grows_linearly_and_a_short_request_keeps_answering(bounded, per_text, texts, attention):
    """The served process's peak memory over a request (VmHWM, reset before it through
    /proc/PID/clear_refs) grows at most linearly in its sentences, and a one-sentence request sent
    again and again meanwhile answers each time well before the large one ends."""
    pid = bounded.proc.pid
    n = per_text * texts
    body = {"texts": [paragraph(per_text)] * texts, "beam_size": 1, "attention": attention}
    with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")  # VmHWM := VmRSS
    baseline = memory_kb(pid, "VmRSS")
    with ThreadPoolExecutor(max_workers=1) as pool:
        began = time.perf_counter()
        large = pool.submit(post, bounded, "/v1/translate", json=body)
        probes = []
        while not large.done():
            start = time.perf_counter()
            probe = post(bounded, "/translate", json={"q": SENTENCE, "source": "de", "target": "en"})
            assert probe.status_code == 200
            probes.append((time.perf_counter() - start, large.done()))
        answer = large.result()
        seconds = time.perf_counter() - began
    assert answer.status_code == 200, answer.text
    grown_kb = memory_kb(pid, "VmHWM") - baseline
    assert grown_kb < 64_000 + 40 * n, (n, grown_kb)  # 40 kB a sentence; the dense square passed it at ~300 sentences (old code: 500 MB at 600)
    assert seconds < 30 + 0.1 * n  # loose: a shared 2-core machine; the benchmark prints the figures
    answered_meanwhile = [latency for latency, after in probes if not after]
    batches = -(-n // BATCH)
    if batches >= 8 and answered_meanwhile:  # a probe waits for the batch in hand and its own, not for all
        # (+0.5 s: a busy 2-core machine's fixed costs of one HTTP round trip; seen 0.31 s against a
        # 0.64 s request of 11 batches on CI's Intel Xeon, 2026-12-02)
        assert max(answered_meanwhile) < seconds * 4 / batches + 0.5, (probes, seconds, batches)

"""Hostile input to `attnmt serve` over real HTTP (issue 24, items 4, 5 and 17): JSON nested
deeper than the limit, text that is not valid Unicode, a negative `alternatives`, and stalled
(slow-loris) connections sent byte by byte over raw sockets. Every refusal is a 4xx
{"error": ...} naming the limit or the field, and the server keeps serving others."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from attnmt.server.limits import BODY_TIMEOUT_S, HEAD_TIMEOUT_S, MAX_JSON_DEPTH
from support.logged_server import LoggedServer
from support.servers import libretranslate_fields

SLACK_S = 5  # scheduling slack on a loaded 2-core machine


@pytest.fixture(scope="module")
def server(serve_run):
    """`attnmt serve` on the toy run for this module; no request may leave a traceback in its log."""
    server = LoggedServer(serve_run)
    yield server
    assert server.stop() == 0, server.log
    assert "Traceback" not in server.log and "unexpected error" not in server.log, server.log


def post(server, path, content: bytes, content_type: str | None = "application/json", method="POST"):
    headers = {"Content-Type": content_type} if content_type else {}
    return httpx.request(method, server.url + path, content=content, headers=headers, timeout=120)


def assert_error(response, status, pattern):
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and isinstance(body["error"], str), body
    assert pattern in body["error"], body["error"]
    return body


def nested(depth: int, leaf="a") -> str:
    """A JSON list nested `depth` deep around `leaf`: depth 1 is ["a"]."""
    return "[" * depth + json.dumps(leaf) + "]" * depth


# ---- item 4: JSON depth, every route ----------------------------------------------------------

@pytest.mark.parametrize("path,method", [("/translate", "POST"), ("/v1/translate", "POST"),
                                         ("/languages", "GET"), ("/no/such/route", "POST")])
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000, 100_000])
def test_json_nested_too_deep_is_refused_on_every_route(server, path, method, depth):
    body = ('{"q": %s, "texts": %s, "source": "de", "target": "en"}' % (nested(depth - 1), nested(depth - 1)))
    assert_error(post(server, path, body.encode(), method=method), 400, f"nested deeper than {MAX_JSON_DEPTH}")
    bare = nested(depth)  # a bare array, also with no Content-Type (FastAPI reads that as JSON too)
    assert_error(post(server, path, bare.encode(), content_type=None, method=method), 400, "nested deeper")


def test_json_at_the_depth_limit_reaches_the_route(server):
    body = '{"q": %s, "source": "de", "target": "en"}' % nested(MAX_JSON_DEPTH - 1)
    assert_error(post(server, "/translate", body.encode()), 400, "q must be a string or a list of strings")
    body = '{"texts": %s}' % nested(MAX_JSON_DEPTH - 1)
    assert post(server, "/v1/translate", body.encode()).status_code == 422
    # brackets inside strings are text, not nesting
    text = "[{" * 5000
    body = json.dumps({"q": text, "source": "de", "target": "en"}).encode()
    assert post(server, "/translate", body).status_code == 200


# ---- item 5: text that is not valid Unicode, every route that takes text -------------------------

LT = {"source": "de", "target": "en"}


@pytest.mark.parametrize("path,body,field", [
    ("/translate", {"q": "Ein \ud800 Hund .", **LT}, "q"),
    ("/translate", {"q": ["Ein Hund .", "Ein \udfff Hund ."], **LT}, "q[1]"),
    ("/translate", {"q": "Hund .", "source": "\ud800", "target": "en"}, "source"),
    ("/translate", {"q": "Hund .", "source": "de", "target": "e\udc00n"}, "target"),
    ("/translate", {"q": "Hund .", **LT, "format": "\ud800"}, "format"),
    ("/translate", {"q": "Hund .", **LT, "api_key": "\ud83d"}, "api_key"),
    ("/translate", {"q": "Hund .", **LT, "\ud800": 1}, "a key"),
    ("/v1/translate", {"texts": ["Ein \ud800 Hund ."]}, "texts[0]"),
    ("/v1/translate", {"texts": ["Hund ."], "api_key": "\udc00"}, "api_key"),
    ("/v1/translate", {"texts": ["Hund ."], "x\ud800": 1}, "a key"),
])
def test_lone_surrogates_in_json_are_refused(server, path, body, field):
    raw = json.dumps(body).encode()  # ensure_ascii: the surrogate travels as a \\uXXXX escape
    assert b"\\ud" in raw
    error = assert_error(post(server, path, raw), 400, "not valid Unicode")["error"]
    assert field in error and "surrogate" in error


@pytest.mark.parametrize("path,raw", [
    ("/translate", b'{"q": "Ein \xed\xa0\x80 Hund .", "source": "de", "target": "en"}'),  # CESU-8 bytes
    ("/v1/translate", b'{"texts": ["Ein \xed\xa0\x80 Hund ."]}'),
])
def test_encoded_surrogates_in_json_are_refused(server, path, raw):
    assert post(server, path, raw).status_code == 400


@pytest.mark.parametrize("path", ["/translate", "/v1/translate"])
def test_invalid_utf8_in_json_is_refused(server, path):
    assert_error(post(server, path, b'{"q": "Ein \xff Hund", "texts": ["\xff"]}'), 400, "UTF-8")


def test_form_bodies_are_utf8(server, toy_translator):
    expected = toy_translator.translate("Groß haus .", beam_size=3)[0].text
    form = "application/x-www-form-urlencoded"
    for raw in ("q=Groß haus .&source=de&target=en".encode(), b"q=Gro%C3%9F+haus+.&source=de&target=en"):
        r = post(server, "/translate", raw, form)  # curl -d sends raw UTF-8; browsers percent-encode
        assert r.status_code == 200 and libretranslate_fields(r.json()) == {"translatedText": expected}, (raw, r.text)
    for raw in (b"q=Ein%ED%A0%80Hund&source=de&target=en", b"q=Ein\xffHund&source=de&target=en",
                b"q=Hund&source=de&target=en&%FF=1"):
        assert_error(post(server, "/translate", raw, form), 400, "not valid UTF-8")


def test_multipart_text_decoded_to_surrogates_is_refused(server):
    # starlette decodes parts with the charset the client names; unicode_escape turns \ud800 into a surrogate
    boundary = "XyZ"
    parts = [("q", r"Ein \ud800 Hund ."), ("source", "de"), ("target", "en")]
    raw = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in parts)
    raw = (raw + f"--{boundary}--\r\n").encode()
    r = post(server, "/translate", raw, f"multipart/form-data; boundary={boundary}; charset=unicode_escape")
    assert_error(r, 400, "not valid Unicode")


# ---- item 17: alternatives below zero ---------------------------------------------------------

@pytest.mark.parametrize("value", [-5, -1, "-5"])
def test_negative_alternatives_are_refused(server, value):
    body = json.dumps({"q": "Hund .", **LT, "alternatives": value}).encode()
    assert_error(post(server, "/translate", body), 400, "alternatives parameter must be >= 0")
    form = f"q=Hund+.&source=de&target=en&alternatives={value}".encode()
    assert_error(post(server, "/translate", form, "application/x-www-form-urlencoded"), 400,
                 "alternatives parameter must be >= 0")


# ---- item 17: stalled connections -------------------------------------------------------------

class Stalled(threading.Thread):
    """A raw-socket client that sends `head`, then `trickle` one piece per second until the server
    answers or closes; records what came back and when."""

    def __init__(self, port: int, head: bytes, trickle: bytes = b"", limit: float = 60):
        super().__init__(daemon=True)
        self.port, self.head, self.trickle, self.limit = port, head, trickle, limit
        self.reply, self.seconds, self.closed = b"", None, False

    def run(self):
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.settimeout(1.0)
            try:
                if self.head:
                    sock.sendall(self.head)
                while time.monotonic() - start < self.limit:
                    try:
                        chunk = sock.recv(65536)
                    except socket.timeout:
                        if self.trickle:
                            sock.sendall(self.trickle)
                        continue
                    if not chunk:
                        self.closed = True
                        break
                    self.reply += chunk
            except (ConnectionResetError, BrokenPipeError):
                self.closed = True
        self.seconds = time.monotonic() - start

    @property
    def status(self) -> int | None:
        line = self.reply.split(b"\r\n", 1)[0].split()
        return int(line[1]) if len(line) > 1 and line[1].isdigit() else None


def test_stalled_connections_are_cut_and_others_are_server(server):
    port = int(server.url.rsplit(":", 1)[1])
    limit = BODY_TIMEOUT_S + 4 * SLACK_S  # a client waits no longer than this (the test never hangs)
    head_clients = {
        "silent": Stalled(port, b"", limit=limit),
        "half request line": Stalled(port, b"POST /transl", limit=limit),
        "trickled headers": Stalled(port, b"POST /translate HTTP/1.1\r\nHost: x\r\n", b"X-Slow: 1\r\n", limit=limit),
        "after a keep-alive answer": Stalled(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /lang", b"u",
                                             limit=limit),
    }
    body_client = Stalled(port, b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                b"Content-Length: 1000\r\n\r\n{", b" ", limit=limit)
    clients = {**head_clients, "trickled body": body_client}
    for client in clients.values():
        client.start()
    time.sleep(1)
    for _ in range(3):  # server promptly while the stalled clients hold their connections
        start = time.monotonic()
        r = httpx.post(server.url + "/translate", json={"q": "Hund .", **LT}, timeout=30)
        assert r.status_code == 200 and time.monotonic() - start < SLACK_S
    for client in clients.values():
        client.join(limit + 10)
    for name, client in head_clients.items():
        assert client.closed, f"{name}: still open after {client.seconds:.1f} s"
        assert client.seconds <= HEAD_TIMEOUT_S + SLACK_S, f"{name}: cut after {client.seconds:.1f} s"
        if name in ("half request line", "trickled headers"):
            assert client.status == 408 and b'{"error":' in client.reply, (name, client.reply)
    assert head_clients["after a keep-alive answer"].status == 200  # the first request was answered
    assert body_client.closed and body_client.seconds <= BODY_TIMEOUT_S + SLACK_S, body_client.seconds
    assert body_client.status == 408 and b"within %d s" % BODY_TIMEOUT_S in body_client.reply, body_client.reply
    assert httpx.get(server.url + "/health", timeout=30).status_code == 200

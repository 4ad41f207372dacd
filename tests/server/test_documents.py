"""`format: "html"` on POST /translate, and POST /translate_file + GET /download_file/<name>, over
real HTTP on the toy run. The reference translations and word alignments come from the same run
loaded in this process; structure is checked by re-parsing the answers."""

from __future__ import annotations

import http.client
import json
import os
import re
import time
from urllib.parse import urlsplit

import httpx
import pytest
from bs4 import BeautifulSoup
from support.html_structure import structure  # the same markup check as tests/documents/test_markup.py

LT = {"source": "de", "target": "en"}
NAME = re.compile(r"[A-Za-z0-9_-]{32}\.(txt|html)")


def words(text: str) -> str:
    return " ".join(text.split())


def assert_error(response, status, pattern):
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert re.search(pattern, response.json()["error"]), response.text


# ---- format: html ------------------------------------------------------------------------------

def test_html_tags_wrap_the_words_aligned_to_theirs(served, toy_translator):
    html = '<p class="a  b">Hund <b>rot</b> <a href="/x?a=1&amp;b=2" title="Haus">haus</a> .</p>'
    r = httpx.post(served.url + "/translate", json={"q": html, **LT, "format": "html"}, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()["translatedText"]
    assert structure(out) == structure(html)
    reference = toy_translator.translate(["Hund rot haus ."], alignments=True)[0]
    assert words(BeautifulSoup(out, "html.parser").get_text()) == words(reference.text)
    tokens = reference.tokens  # Moses tokens: the words the alignment counts
    for tag, source_word in (("b", 1), ("a", 2)):
        aligned = [t for s, t in reference.alignment if s == source_word]
        expected = "".join(tokens[min(aligned):max(aligned) + 1]) if aligned else ""
        assert BeautifulSoup(out, "html.parser").find(tag).get_text().replace(" ", "") == expected


def test_html_list_entities_void_and_untouched_elements(served, toy_translator):
    texts = ["<div>Katze &amp; Hund<br>blau <img src='k.png' alt='Katze rot'></div>",
             "<script>if (a < b) {}</script><style>b > i {}</style><p>Kind <code>x &lt; y</code> ball .</p>",
             "<h1>Baum <i>grün <b>klein</b></i><span></span></h1>"]
    r = httpx.post(served.url + "/translate", json={"q": texts, **LT, "format": "html"}, timeout=120)
    assert r.status_code == 200, r.text
    outputs = r.json()["translatedText"]
    assert len(outputs) == 3
    for text, out in zip(texts, outputs):
        assert structure(out) == structure(text)
        for name in ("script", "style", "code", "img"):
            assert [str(e) for e in BeautifulSoup(out, "html.parser").find_all(name)] == \
                   [str(e) for e in BeautifulSoup(text, "html.parser").find_all(name)]
    first = toy_translator.translate(["Katze & Hund blau"])[0].text
    assert words(BeautifulSoup(outputs[0], "html.parser").get_text()) == words(first)


def test_html_auto_source_and_limits(thread_server, toy_translator):
    server = thread_server(toy_translator, max_sentences=2)
    r = httpx.post(server.url + "/translate", json={"q": "<p>Hund</p><p>Katze</p>", "source": "auto",
                                                    "target": "en", "format": "html"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["detectedLanguage"]["language"] == "de"
    r = httpx.post(server.url + "/translate", json={"q": ["<p>Hund</p>", "<p>a</p><p>b</p>"], **LT,
                                                    "format": "html"}, timeout=60)
    assert_error(r, 413, r"3 sentences exceed the limit of 2")
    r = httpx.post(server.url + "/translate", json={"q": "<b>" * 200 + "Hund", **LT, "format": "html"}, timeout=60)
    assert_error(r, 400, r"q is not HTML that can be translated: .*nests elements")
    assert httpx.get(server.url + "/health").status_code == 200


# ---- files ---------------------------------------------------------------------------------------

FILE_LIMITS = dict(file_limit_kb=2, max_files=3, max_sentences=20, api_key="k")


@pytest.fixture
def file_server(thread_server, toy_translator, tmp_path):
    """The toy model with its translated files in tmp_path/files: 2 kB per file, 3 files kept."""
    server = thread_server(toy_translator, files_dir=str(tmp_path / "files"), **FILE_LIMITS)
    server.files = tmp_path / "files"
    return server


@pytest.fixture(scope="module")
def refusing_server(toy_translator, tmp_path_factory):
    """file_server's twin shared by the tests that store nothing."""
    from support.servers import ThreadServer

    files = tmp_path_factory.mktemp("refusing") / "files"
    server = ThreadServer(toy_translator, files_dir=str(files), **FILE_LIMITS)
    server.files = files
    yield server
    server.stop()


def upload(server, name, data: bytes, **fields):
    return httpx.post(server.url + "/translate_file", files={"file": (name, data)},
                      data={**LT, "api_key": "k", **fields}, timeout=60)


def test_txt_file_round_trip(file_server, toy_translator):
    text = "Hund rot .\n\n  Katze blau .\r\nKind\n"
    r = upload(file_server, "a.txt", text.encode())
    assert r.status_code == 200, r.text
    url = r.json()["translatedFileUrl"]
    assert url.startswith(file_server.url + "/download_file/") and NAME.fullmatch(url.rsplit("/", 1)[1])
    got = httpx.get(url)
    assert got.status_code == 200 and got.headers["content-type"].startswith("text/plain")
    expected = [t.text for t in toy_translator.translate(["Hund rot .", "Katze blau .", "Kind"])]
    assert got.text == f"{expected[0]}\n\n  {expected[1]}\r\n{expected[2]}\n"


def test_html_file_round_trip_and_names_differ(file_server):
    html = ("<!DOCTYPE html><html><head><title>Haus</title></head><body><p>Hund <b>rot</b> .</p>"
            "<ul><li><a href='#k'>Katze</a></li></ul></body></html>").encode()
    urls = []
    for _ in range(2):
        r = upload(file_server, "page.HTML", html)
        assert r.status_code == 200, r.text
        urls.append(r.json()["translatedFileUrl"])
    assert urls[0] != urls[1]
    got = httpx.get(urls[0])
    assert got.headers["content-type"].startswith("text/html")
    assert structure(got.text) == structure(html.decode())
    stored = [p.name for p in file_server.files.iterdir() if not p.name.startswith(".")]  # not the store's record, lock
    assert sorted(stored) == sorted(u.rsplit("/", 1)[1] for u in urls)


@pytest.mark.parametrize("name,data,fields,status,pattern", [
    ("a.txt", b"Hund " * 500, {}, 413, r"over 2 kB"),
    ("a.xlsx", b"Hund", {}, 400, r"\.xlsx is not supported: send \.txt, \.html, \.docx"),  # .pdf is taken now
    ("noext", b"Hund", {}, 400, r"without an extension"),
    ("a.txt", b"", {}, 400, r"the file is empty"),
    ("a.txt", b" \n\n", {}, 400, r"the file is empty"),
    ("a.txt", b"Hund \xff", {}, 400, r"not valid UTF-8 \(byte 0xff at offset 5\)"),
    ("a.txt", "Hund\n" * 21, {}, 413, r"21 sentences exceed the limit of 20"),
    ("a.txt", b"Hund", {"target": ""}, 400, r"missing target parameter"),
    ("a.txt", b"Hund", {"source": "fr"}, 400, r"fr is not supported"),
    ("a.txt", b"Hund", {"api_key": "wrong"}, 403, r"Invalid API key"),
    ("a.txt", b"Hund", {"format": "text"}, 400, r"unknown parameter format"),
    ("a.html", b"<b>" * 200, {}, 400, r"the file is not HTML that can be translated"),
])
def test_file_refusals(refusing_server, name, data, fields, status, pattern):
    data = data.encode() if isinstance(data, str) else data
    assert_error(upload(refusing_server, name, data, **fields), status, pattern)
    assert [p.name for p in refusing_server.files.iterdir() if NAME.fullmatch(p.name)] == []


def test_form_refusals(refusing_server):
    url = refusing_server.url + "/translate_file"
    assert_error(httpx.post(url, data={**LT, "api_key": "k"}), 400, r"missing file parameter")
    two = [("file", ("a.txt", b"Hund")), ("file", ("b.txt", b"Katze"))]
    assert_error(httpx.post(url, files=two, data={**LT, "api_key": "k"}), 400, r"one file per request, not 2")
    assert_error(httpx.post(url, json={"file": "Hund", **LT}), 400, r"multipart/form-data")
    many = [("file", (f"{i}.txt", b"x")) for i in range(9)]
    assert_error(httpx.post(url, files=many, data=LT), 400, r"malformed form body")
    assert httpx.get(refusing_server.url + "/health").status_code == 200


def test_store_is_bounded_and_files_expire(file_server):
    urls = [upload(file_server, f"{i}.txt", b"Hund .").json()["translatedFileUrl"] for i in range(3)]
    assert_error(upload(file_server, "d.txt", b"Hund ."), 429, r"Too many translated files")
    name = urls[0].rsplit("/", 1)[1]
    old = time.time() - 2 * 3600  # older than the hour a file is kept
    os.utime(file_server.files / name, (old, old))
    assert_error(httpx.get(urls[0]), 404, r"File not found")
    assert not (file_server.files / name).exists()
    assert upload(file_server, "d.txt", b"Hund .").status_code == 200  # the expired one made room
    assert httpx.get(urls[1]).status_code == 200


def raw_get(server, path: str) -> tuple[int, bytes]:
    """GET `path` exactly as written (httpx would normalize dot segments)."""
    parts = urlsplit(server.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("path", [
    "/download_file/../../etc/passwd", "/download_file/..%2f..%2fetc%2fpasswd", "/download_file/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/download_file/%2e%2e", "/download_file/..", "/download_file/%2fetc%2fpasswd", "/download_file//etc/passwd",
    "/download_file/..%5c..%5cetc%5cpasswd", "/download_file/%252e%252e%252fsecret.txt", "/download_file/secret.txt",
    "/download_file/../secret.txt", "/download_file/%2e%2e%2fsecret.txt", "/download_file/" + "A" * 32 + ".txt%00",
    "/download_file/" + "A" * 32 + ".txt", "/download_file/" + "A" * 32 + ".py", "/download_file/.hidden.txt",
])
def test_download_path_tricks_get_404(refusing_server, path):
    (refusing_server.files / "secret.txt").write_text("secret inside")
    (refusing_server.files.parent / "secret.txt").write_text("secret outside")
    status, body = raw_get(refusing_server, path)
    assert status in (400, 404), (status, body)
    assert b"secret" not in body and b"root:" not in body
    assert "error" in json.loads(body)


def test_file_auto_source(file_server):
    r = upload(file_server, "a.html", b"<p>Hund <b>rot</b> .</p>", source="auto")
    assert r.status_code == 200, r.text
    assert "<b>" in httpx.get(r.json()["translatedFileUrl"]).text


def test_file_rate_limit(thread_server, toy_translator):
    server = thread_server(toy_translator, req_limit=1)
    files = {"file": ("a.txt", b"Hund .")}
    assert httpx.post(server.url + "/translate_file", files=files, data=LT).status_code == 200
    assert_error(httpx.post(server.url + "/translate_file", files=files, data=LT), 429, r"Slowdown: 1 per 1 minute")


def test_documents_take_turns_in_their_own_thread_and_a_full_lane_is_503():
    """Issue 66 B: uploads are read one at a time in a thread of their own, never in the pool the
    rest of the service uses; past the ones waiting, 503; one cancelled while it waits never runs."""
    import asyncio
    import threading

    from attnmt.server.api_errors import ApiError
    from attnmt.server.documents import DocumentLane

    gate, ran, threads = threading.Event(), [], set()

    def work(name):
        def run():
            threads.add(threading.current_thread().name)
            if name == "first":
                assert gate.wait(timeout=60)
            ran.append(name)
            return name
        return run

    async def scenario():
        lane = DocumentLane(waiting=1)
        first = asyncio.ensure_future(lane.run(work("first")))
        second = asyncio.ensure_future(lane.run(work("second")))
        await asyncio.sleep(0.1)
        try:
            await lane.run(work("third"))
        except ApiError as err:
            refused = (err.status, str(err))
        second.cancel()  # its client left while it waited
        await asyncio.sleep(0.1)  # the cancel reaches the waiting work
        gate.set()
        assert await first == "first"
        await asyncio.sleep(0.1)
        return refused

    status, message = asyncio.run(asyncio.wait_for(scenario(), timeout=60))
    assert status == 503 and "busy reading 2 documents" in message
    assert ran == ["first"] and all(name.startswith("attnmt-documents") for name in threads)

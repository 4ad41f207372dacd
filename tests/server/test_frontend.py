"""GET /frontend/settings, POST /suggest (--suggestions FILE), --req-limit, and the real
libretranslatepy client (translate, languages, detect), over real HTTP against `attnmt serve`."""

from __future__ import annotations

import json
import re

import httpx
import pytest

GERMAN = "Zwei Hunde spielen im Schnee ."


@pytest.fixture(scope="module")
def suggesting(serve_run, en_de_run, tmp_path_factory):
    """Two pairs (de -> en, en -> de) with suggestions on; (server, the suggestions file)."""
    from support.servers import ServeProcess

    path = tmp_path_factory.mktemp("suggest") / "suggestions.jsonl"
    server = ServeProcess([serve_run, en_de_run], "--suggestions", str(path))
    yield server, path
    server.stop()


def post(server, path, **kwargs):
    return httpx.post(server.url + path, timeout=60, **kwargs)


def assert_error(response, status, pattern):
    assert response.status_code == status, response.text
    assert re.search(pattern, response.json()["error"]), response.text
    assert "Traceback" not in response.text


def test_frontend_settings(served, suggesting):
    one = httpx.get(served.url + "/frontend/settings").json()
    assert one == {"charLimit": -1, "frontendTimeout": 500, "apiKeys": False, "keyRequired": False,
                   "suggestions": False, "filesTranslation": True,
                   "supportedFilesFormat": [".txt", ".html", ".docx", ".pptx", ".odt", ".odp", ".epub", ".srt", ".po",
                                            ".xliff", ".pdf", ".htm", ".ott", ".oth", ".odm", ".otp", ".pot",
                                            ".xlf"],
                   "language": {"source": {"code": "de", "name": "German"},
                                "target": {"code": "en", "name": "English"}}}
    two = httpx.get(suggesting[0].url + "/frontend/settings").json()
    assert two["suggestions"] is True
    assert two["language"] == {"source": {"code": "auto", "name": "Auto Detect"},
                               "target": {"code": "en", "name": "English"}}


def test_suggest_is_off_without_a_file(served):
    assert_error(post(served, "/suggest", json={"q": "Hund .", "s": "Dog .", "source": "de", "target": "en"}),
                 403, r"^Suggestions are disabled on this server\.$")


def test_suggestions_are_appended_one_json_line_each(suggesting):
    server, path = suggesting
    fields = {"q": "Hund .\nzwei", "s": "Dog .\u2028two", "source": "de", "target": "en"}
    assert post(server, "/suggest", json=fields).json() == {"success": True}
    assert post(server, "/suggest", data={**fields, "source": "en", "target": "de"}).json() == {"success": True}
    assert post(server, "/suggest", files={k: (None, v) for k, v in fields.items()}).json() == {"success": True}
    lines = path.read_text(encoding="ascii").split("\n")
    assert lines[-1] == "" and len(lines) == 4
    records = [json.loads(line) for line in lines[:-1]]
    assert [r["pair"] for r in records] == ["de-en", "en-de", "de-en"]
    assert all(r["source"] == fields["q"] and r["suggestion"] == fields["s"] for r in records)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", r["time"]) for r in records)


@pytest.mark.parametrize("kwargs,status,pattern", [
    ({"json": {"q": "Hund .", "source": "de", "target": "en"}}, 400, r"^Invalid request: missing s parameter$"),
    ({"json": {"q": "Hund .", "s": "Dog .", "source": "de", "target": "fr"}}, 400,
     r"^fr is not supported: this server translates de -> en, en -> de$"),
    ({"json": {"q": "Hund .", "s": 5, "source": "de", "target": "en"}}, 400, r"^Invalid request: s must be a string$"),
    ({"json": {"q": "Hund .", "s": "Dog .", "source": "de", "target": "en", "x": 1}}, 400, r"unknown parameter x"),
    ({"data": {"q": "Hund .", "source": "de"}}, 400, r"missing s parameter"),
    ({"files": {"q": ("a.txt", b"Hund")}}, 400, r"q must be text, not a file"),
    ({"content": b"{", "headers": {"content-type": "application/json"}}, 400, r"malformed JSON"),
])
def test_suggest_errors_write_nothing(suggesting, kwargs, status, pattern):
    server, path = suggesting
    before = path.read_bytes()
    assert_error(post(server, "/suggest", **kwargs), status, pattern)
    assert path.read_bytes() == before
    assert httpx.get(server.url + "/health").status_code == 200


def test_the_libretranslatepy_client(suggesting):
    from libretranslatepy import LibreTranslateAPI

    server, _ = suggesting
    client = LibreTranslateAPI(server.url + "/")
    assert client.languages() == [{"code": "de", "name": "German", "targets": ["en"]},
                                  {"code": "en", "name": "English", "targets": ["de"]}]
    expected = post(server, "/translate", json={"q": "Hund rot .", "source": "de", "target": "en"}).json()
    assert client.translate("Hund rot .", "de", "en") == expected["translatedText"]
    assert client.detect(GERMAN)[0]["language"] == "de"
    assert client.detect("Two dogs play in the snow .")[0]["language"] == "en"


def test_req_limit_per_client_with_libretranslates_message(serve_run):
    from support.servers import ServeProcess

    server = ServeProcess(serve_run, "--req-limit", "3", "--api-key", "k")
    try:
        body = {"q": "Hund .", "source": "de", "target": "en", "api_key": "k"}
        assert [post(server, "/translate", json=body).status_code for _ in range(2)] == [200, 200]
        assert post(server, "/detect", data={"q": GERMAN, "api_key": "k"}).status_code == 200  # every endpoint counts
        for path, kwargs in (("/translate", {"json": body}), ("/detect", {"json": {"q": "x", "api_key": "k"}}),
                             ("/v1/translate", {"json": {"texts": ["Hund ."]}, "headers": {"X-API-Key": "k"}})):
            assert_error(post(server, path, **kwargs), 429, r"^Slowdown: 3 per 1 minute$")
        assert_error(post(server, "/translate", json={**body, "api_key": "wrong"}), 403, "Invalid API key")
        assert httpx.get(server.url + "/languages").status_code == 200  # listing is not limited
        assert httpx.get(server.url + "/health").status_code == 200
    finally:
        server.stop()


def test_a_suggestions_file_that_cannot_be_written_stops_the_server_before_it_starts(serve_run, tmp_path, capsys):
    from attnmt.cli import main

    assert main(["serve", str(serve_run), "--suggestions", str(tmp_path / "no" / "such" / "s.jsonl")]) == 2
    assert "cannot append to it" in capsys.readouterr().err

"""Shared fixtures for the data tests: an isolated cache and a local HTTP server."""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass, field

import pytest


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """Every test gets its own cache; no ATTNMT_DATA or URL override leaks in."""
    monkeypatch.setenv("ATTNMT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTNMT_DATA", raising=False)
    monkeypatch.delenv("ATTNMT_MULTI30K_URL", raising=False)
    return tmp_path / "cache"


@dataclass
class FileServer:
    """A local HTTP server: `files` maps a URL path to its bytes; `requests` logs the paths asked."""

    url: str
    files: dict[str, bytes] = field(default_factory=dict)
    short: set[str] = field(default_factory=set)  # paths sent with a Content-Length too big
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def file_server():
    """Serve in-memory files on 127.0.0.1 from a thread; yields a `FileServer`."""
    state = FileServer(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            state.requests.append(self.path)
            body = state.files.get(self.path)
            if body is None:
                self.send_error(404, "Not Found")
                return
            self.send_response(200)
            extra = 1000 if self.path in state.short else 0
            self.send_header("Content-Length", str(len(body) + extra))
            self.end_headers()
            if extra:
                self.wfile.write(body[: len(body) // 2])  # then close: the transfer is cut short
                self.close_connection = True
                return
            self.wfile.write(body)

        def log_message(self, *args):  # keep pytest output clean
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/raw"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

"""Servers for the service tests: `attnmt serve` as a real process, or the app under uvicorn in a
thread (when a test wraps the translator to inject a fault or hold a batch). Both listen on a
port of 127.0.0.1 the system chose (never a fixed one: tests run side by side under
pytest-xdist) and are reached over real HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from support import toy

STARTUP_SECONDS = 180  # a loaded 2-core machine can take a while to import torch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen | None = None, seconds: float = STARTUP_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}:\n{proc.stdout.read()}")
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not become healthy in {seconds} s")


class ServeProcess:
    """`python -m attnmt serve RUN_DIR --port P ...` in a child process, its output captured
    (`run_dir`: a list of them serves one model each)."""

    def __init__(self, run_dir: Path | list[Path], *flags: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        src = str(Path(__file__).resolve().parents[2] / "src")
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        models = [str(p) for p in run_dir] if isinstance(run_dir, (list, tuple)) else [str(run_dir)]  # one per pair
        self.proc = subprocess.Popen([sys.executable, "-m", "attnmt", "serve", *models, "--port", str(self.port),
                                      *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        try:
            wait_healthy(self.url, self.proc)
        except Exception:
            self.stop()
            raise

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, seconds: float = 120) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=seconds)
        return self.proc.returncode, out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()


class ThreadServer:
    """The app for `translator` under uvicorn in a thread, on a socket bound to 127.0.0.1:0."""

    def __init__(self, translator, **settings):
        import uvicorn

        from attnmt.server.app import create_app
        from attnmt.server.settings import ServeSettings

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        app = create_app(ServeSettings(port=port, **settings), lambda: translator, name="toy")
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        wait_healthy(self.url, seconds=60)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)
        self.sock.close()


MAX_INPUT_TOKENS = 12  # the served toy runs cut inputs here, so over-long inputs decode quickly


def short_input_copy(run_dir: Path, dest: Path) -> Path:
    """A copy of a run whose search.max_input_tokens is MAX_INPUT_TOKENS."""
    return toy.edited_copy(run_dir, dest, search={"max_input_tokens": MAX_INPUT_TOKENS})


def libretranslate_fields(answer: dict) -> dict:
    """A /translate answer without attnmt's `confidence` and `alternativeConfidence` keys (checked:
    a probability per text and per alternative, or null for an empty one), to compare with
    LibreTranslate's own fields."""
    answer = dict(answer)
    confidence = answer.pop("confidence", None)
    for value in confidence if isinstance(confidence, list) else [confidence]:
        assert value is None or (isinstance(value, float) and 0.0 <= value <= 1.0), confidence
    alternatives = answer.pop("alternativeConfidence", None)
    if alternatives is not None:
        per_text = alternatives if alternatives and isinstance(alternatives[0], list) else [alternatives]
        texts = answer["alternatives"] if per_text is alternatives else [answer["alternatives"]]
        for values, given in zip(per_text, texts):
            assert len(values) == len(given), (alternatives, answer["alternatives"])
            assert all(v is None or 0.0 <= v <= 1.0 for v in values), alternatives
    return answer

"""Servers for the service tests: `attnmt serve` as a real process, or the app under uvicorn in a
thread (when a test wraps the translator to inject a fault or hold a batch). Both listen on
127.0.0.1 and are reached over real HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from attnmt.run_dir import RunDir

import toy

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


@pytest.fixture(scope="session")
def toy_transformer_run(tmp_path_factory):
    """A tiny Transformer (2 layers, 2 heads) trained briefly on the toy copy task (toy_run's
    corpus); its run directory."""
    from attnmt.cli import main

    base = tmp_path_factory.mktemp("toy_transformer")
    config = toy.write_config(base / "toy.yaml", "copy", "transformer", epochs=2, batch_size=32, beam_size=2,
                              model=dict(d_model=16, heads=2, ff_dim=32),
                              train=dict(schedule="constant", log_every=50))
    run_dir = base / "run"
    assert main(["train", str(config), "--run-dir", str(run_dir)]) == 0
    return short_input_copy(run_dir, base / "served")


MAX_INPUT_TOKENS = 12  # the served toy runs cut inputs here, so over-long inputs decode quickly


def short_input_copy(run_dir: Path, dest: Path) -> Path:
    """A copy of a run whose search.max_input_tokens is MAX_INPUT_TOKENS."""
    shutil.copytree(run_dir, dest)
    config = json.loads((dest / "config.json").read_text())
    config["search"]["max_input_tokens"] = MAX_INPUT_TOKENS
    (dest / "config.json").write_text(json.dumps(config))
    RunDir(dest).record_checksums(["config.json"])  # an edit made on purpose: its new sha256 is recorded
    return dest


@pytest.fixture(scope="session")
def serve_run(toy_run, tmp_path_factory):
    """The toy RNN run, cutting inputs at MAX_INPUT_TOKENS tokens."""
    return short_input_copy(toy_run, tmp_path_factory.mktemp("serve") / "run")


@pytest.fixture(scope="session")
def toy_translator(serve_run):
    """The served toy RNN run loaded in this process: the reference for the server's answers."""
    from attnmt.translator import Translator

    return Translator.load(serve_run, device="cpu")


@pytest.fixture(scope="session")
def served(serve_run):
    """`attnmt serve` on the toy RNN run, shared by the API and page tests."""
    server = ServeProcess(serve_run)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def served_transformer(toy_transformer_run):
    """`attnmt serve` on the tiny Transformer run."""
    server = ServeProcess(toy_transformer_run)
    yield server
    server.stop()


@pytest.fixture
def serve_process():
    """Start `attnmt serve` processes: serve_process(run_dir, *flags); all stopped after the test."""
    started = []

    def start(run_dir, *flags):
        started.append(ServeProcess(run_dir, *flags))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def thread_server():
    """Start the app in a thread: thread_server(translator, **settings); all stopped after the test."""
    started = []

    def start(translator, **settings):
        started.append(ThreadServer(translator, **settings))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def en_de_run(toy_run, tmp_path_factory):
    """The toy RNN's config with the languages swapped (en -> de, the same corpus), cutting inputs
    at MAX_INPUT_TOKENS tokens: with serve_run, two models of different pairs."""
    from attnmt.cli import main

    base = tmp_path_factory.mktemp("en_de")
    argv = ["train", str(toy_run.parent / "toy.yaml"), "--run-dir", str(base / "run"), "--set", "train.epochs=5",
            "--set", "data.src_lang=en", "--set", "data.tgt_lang=de"]
    assert main(argv) == 0
    return short_input_copy(base / "run", base / "en_de")


@pytest.fixture(scope="session")
def multilingual_pairs_run(tmp_path_factory):
    """A tiny multilingual Transformer of three directions, de-en, en-de and fr-en: fr -> de is
    reachable through English, de -> fr is not (no en -> fr)."""
    from attnmt.cli import main

    base = tmp_path_factory.mktemp("multilingual")
    config = toy.write_multilingual_config(base / "ml.yaml", pairs=["de-en", "en-de", "fr-en"])
    assert main(["train", str(config), "--run-dir", str(base / "run")]) == 0
    return base / "run"


@pytest.fixture(scope="session")
def served_multilingual(multilingual_pairs_run):
    """`attnmt serve` on the multilingual run (de-en, en-de, fr-en), shared by its API and page tests."""
    server = ServeProcess(multilingual_pairs_run)
    yield server
    server.stop()

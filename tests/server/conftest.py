"""Fixtures of the service tests: served toy runs (a real `attnmt serve` process, shared per
session) and starters of servers that a test stops; the servers themselves are
tests/support/servers.py's, the browser tests/support/page.py's."""

from __future__ import annotations

import os
from urllib.parse import urlparse

import pytest

from support import toy
from support.once import once
from support.servers import ServeProcess, ThreadServer, short_input_copy


@pytest.fixture(scope="session")
def toy_transformer_run(tmp_path_factory):
    """A tiny Transformer (2 layers, 2 heads) trained briefly on the toy copy task (toy_run's
    corpus); its run directory."""
    from attnmt.cli import main

    def build(base):
        config = toy.write_config(base / "toy.yaml", "copy", "transformer", epochs=2, batch_size=32, beam_size=2,
                                  model=dict(d_model=16, heads=2, ff_dim=32),
                                  train=dict(schedule="constant", log_every=50))
        assert main(["train", str(config), "--run-dir", str(base / "run")]) == 0
        return short_input_copy(base / "run", base / "served")

    return once(tmp_path_factory, "server_toy_transformer_run", build)


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

    def build(base):
        argv = ["train", str(toy_run.parent / "toy.yaml"), "--run-dir", str(base / "run"), "--set", "train.epochs=5",
                "--set", "data.src_lang=en", "--set", "data.tgt_lang=de"]
        assert main(argv) == 0
        return short_input_copy(base / "run", base / "en_de")

    return once(tmp_path_factory, "en_de_run", build)


@pytest.fixture(scope="session")
def multilingual_pairs_run(tmp_path_factory):
    """A tiny multilingual Transformer of three directions, de-en, en-de and fr-en: fr -> de is
    reachable through English, de -> fr is not (no en -> fr)."""
    from attnmt.cli import main

    def build(base):
        config = toy.write_multilingual_config(base / "ml.yaml", pairs=["de-en", "en-de", "fr-en"])
        assert main(["train", str(config), "--run-dir", str(base / "run")]) == 0
        return base / "run"

    return once(tmp_path_factory, "multilingual_pairs_run", build)


@pytest.fixture(scope="session")
def served_multilingual(multilingual_pairs_run):
    """`attnmt serve` on the multilingual run (de-en, en-de, fr-en), shared by its API and page tests."""
    server = ServeProcess(multilingual_pairs_run)
    yield server
    server.stop()


# ----------------------------------------------------------------------------- the page in chromium

@pytest.fixture(scope="module")
def browser(chromium):
    """Debian's chromium driven by Playwright (`chromium`: its path; the test is skipped without it)."""
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        browser = playwright.chromium.launch(executable_path=chromium, args=args)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh page; requests to anywhere but 127.0.0.1 are refused and make the test fail."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    outside, errors = [], []

    def guard(route):
        if urlparse(route.request.url).hostname in ("127.0.0.1", None) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.set_default_timeout(120_000)
    yield page
    context.close()
    assert outside == [], f"the page asked the internet for {outside}"
    assert errors == [], f"JavaScript errors: {errors}"

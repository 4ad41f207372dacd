"""The real small model the document tests translate with: the session's toy RNN (tests/conftest.py's
toy_run), loaded once, so that placement is checked against a real model's alignments."""

import pytest


@pytest.fixture(scope="session")
def translator(toy_run):
    from attnmt.translator import Translator

    return Translator.load(toy_run, device="cpu")

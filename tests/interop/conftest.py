"""Tiny Marian models for the interop tests, built once per session (marian_toy.py); the tests
need `transformers` (the optional extra attnmt[hf]) and are skipped without it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def marian_folder(tmp_path_factory) -> Path:
    """A tiny Marian model trained for a few seconds on the toy copy task (it translates)."""
    from support import marian_toy

    return marian_toy.write_marian(tmp_path_factory.mktemp("marian") / "opus-mt-toy", d_model=32, ff_dim=64,
                                   std=0.1, train_steps=120)


@pytest.fixture(scope="session")
def marian_run(marian_folder, tmp_path_factory) -> Path:
    from attnmt.interop.marian import import_marian

    return import_marian(marian_folder, tmp_path_factory.mktemp("runs") / "imported").path

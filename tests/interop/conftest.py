"""Tiny Marian models for the interop tests, built once per session (marian_toy.py); the tests
need `transformers` (the optional extra attnmt[hf]) and are skipped without it. And a tiny
sentencepiece Transformer with its Argos package (support/argos.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.once import once


@pytest.fixture(scope="session")
def marian_folder(tmp_path_factory) -> Path:
    """A tiny Marian model trained for a few seconds on the toy copy task (it translates)."""
    from support import marian_toy

    return once(tmp_path_factory, "marian_folder", lambda base: marian_toy.write_marian(
        base / "opus-mt-toy", d_model=32, ff_dim=64, std=0.1, train_steps=120))


@pytest.fixture(scope="session")
def marian_run(marian_folder, tmp_path_factory) -> Path:
    from attnmt.interop.marian import import_marian

    return import_marian(marian_folder, tmp_path_factory.mktemp("runs") / "imported").path


# ---- Argos Translate packages (tests/interop/test_argos_*.py; support/argos.py)

@pytest.fixture(scope="session")
def argos_run(tmp_path_factory) -> Path:
    """A tiny sentencepiece Transformer trained on the toy copy task (seconds)."""
    from support import argos

    return once(tmp_path_factory, "argos_run", argos.toy_run)


@pytest.fixture(scope="session")
def argos_package(argos_run, tmp_path_factory) -> Path:
    """`attnmt export RUN --format argos` of argos_run: an int8 package."""
    from attnmt.interop.argos.export import export_argos

    return export_argos(argos_run, tmp_path_factory.mktemp("packages") / "de_en.argosmodel")[0]

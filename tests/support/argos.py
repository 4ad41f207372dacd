"""Argos packages for the interop tests: a tiny sentencepiece Transformer trained on the toy copy
task (seconds), its CTranslate2 export and package; and the real consumers' environments
(benchmarks/interop/argos_env.sh: argostranslate, LibreTranslate, Eole from PyPI), built once per
machine, or the test skipped with the reason where they cannot be (no registry). Under
ATTNMT_REQUIRE_PARTS=1 (what .ci/run sets) a missing environment fails the test instead.

    run = argos.toy_run(tmp_path)                      # a run dir (sentencepiece, joint vocabulary)
    python = argos.require_env("argostranslate")       # that environment's python, or skip
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import toy

COPY_SOURCES = ["Hund rot .", "Katze blau groß .", "Mann frau kind ball wasser .", "Baum .", "Auto rot hund katze .",
                "Unbekannt wort hund .", "Ball ball ball ."]


def toy_run(base: Path, *, epochs: int = 8, data: dict | None = None, model: dict | None = None) -> Path:
    """Train a tiny Transformer with a joint sentencepiece vocabulary on the copy task; its run dir."""
    from attnmt.cli import main

    config = toy.write_config(base / "copy.yaml", "copy", "transformer", epochs=epochs, batch_size=32, beam_size=4,
                              data={"tokenizer": "sentencepiece", "spm_vocab_size": 60, "spm_joint": True,
                                    **(data or {})},
                              model=model, train=dict(log_every=100, eval_max_sentences=8))
    run_dir = base / "run"
    assert main(["train", str(config), "--run-dir", str(run_dir)]) == 0
    return run_dir


def require_env(name: str) -> Path:
    """The python of the environment `name`, built by argos_env.sh (minutes, once), or skip."""
    from benchmarks.interop import consumers

    try:
        return consumers.env_python(name)
    except consumers.Unavailable as err:
        message = f"the {name} environment is not available ({err}): it needs PyPI through pip"
        if os.environ.get("ATTNMT_REQUIRE_PARTS") == "1":
            pytest.fail(message + "; ATTNMT_REQUIRE_PARTS=1 makes this a failure, not a skip", pytrace=False)
        pytest.skip(message)

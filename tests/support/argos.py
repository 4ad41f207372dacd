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


def ctranslate2_beam(package: Path, texts: list[str], folder: Path, *, beam_size: int = 4) -> list[str]:
    """Each one-sentence text translated by CTranslate2 itself with the package's own files, as
    argostranslate 1.11 calls it (translate.py, apply_packaged_translation: the package's
    sentencepiece pieces, translate_batch(beam_size, num_hypotheses=1, length_penalty=0.2,
    replace_unknowns=True), decode_pieces with the space marks made spaces, a leading one dropped): the independent
    account of what argostranslate must answer. Not attnmt's engine, which ranks a beam's finished
    hypotheses by the GNMT penalty instead of CTranslate2's length^0.2 (engines/ctranslate2.py)."""
    import json
    import zipfile

    import ctranslate2
    import sentencepiece

    with zipfile.ZipFile(package) as archive:
        archive.extractall(folder)
    (root,) = {p.parent for p in folder.rglob("metadata.json")}
    prefix = json.loads((root / "metadata.json").read_text()).get("target_prefix", "")
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(root / "sentencepiece.model"))
    translator = ctranslate2.Translator(str(root / "model"), device="cpu", compute_type="auto")
    outputs = []
    for text in texts:
        found = translator.translate_batch([pieces.encode(text, out_type=str)],
                                           target_prefix=[[prefix]] if prefix else None, replace_unknowns=True,
                                           max_batch_size=32, batch_type="tokens", beam_size=beam_size,
                                           num_hypotheses=1, length_penalty=0.2, return_scores=True)
        value = pieces.decode_pieces(found[0].hypotheses[0]).replace("\u2581", " ").replace("_", " ")
        value = value[len(prefix):] if prefix and value.startswith(prefix) else value
        outputs.append(value[1:] if value.startswith(" ") else value)  # the tokenizer's leading space
    return outputs

"""Fixtures of the benchmark tests: the repository on sys.path (for the benchmarks package), one
torch thread, and tiny run directories as `attnmt train` writes them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `import benchmarks.speed.bench`, as the scripts import one another
    sys.path.insert(0, str(REPO))

TINY = {"rnn": ["model.emb_dim=8", "model.enc_hidden=8", "model.dec_hidden=16", "model.attn_dim=8"],
        "transformer": ["model.arch=transformer", "model.d_model=16", "model.heads=2", "model.ff_dim=32",
                        "model.enc_layers=1", "model.dec_layers=1"]}


@pytest.fixture
def tiny() -> dict[str, list[str]]:
    """Overrides that shrink the toy config's model, per architecture."""
    return TINY


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: tiny models only lose from more, and the CPU may be shared."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def make_run_dir(tmp_path: Path, config: Path, arch: str) -> Path:
    """A run directory as `attnmt train` writes it (config, pipeline, best.json, weights), with
    untrained weights: enough for Translator.load, in well under a second."""
    from attnmt.checkpoint import save_weights, write_json
    from attnmt.config import load_config, save_config
    from attnmt.data.prepare import prepare
    from attnmt.models import build_model

    cfg = load_config(config, TINY[arch])
    run_dir = tmp_path / f"run_{arch}"
    run_dir.mkdir()
    pipeline = prepare(cfg.data).pipeline
    pipeline.save(run_dir)
    save_config(cfg, run_dir / "config.json")
    vocab = pipeline.tgt_vocab
    torch.manual_seed(0)  # the same untrained weights every run: tests compare two codes on them
    model = build_model(cfg.model, len(pipeline.src_vocab), len(vocab), pad_id=vocab.pad_id, bos_id=vocab.bos_id,
                        eos_id=vocab.eos_id)
    save_weights(model, run_dir / "checkpoints" / "epoch_001.safetensors")
    write_json(run_dir / "best.json", {"file": "checkpoints/epoch_001.safetensors", "epoch": 1})
    return run_dir


@pytest.fixture
def rnn_run_dir(tmp_path, toy_config):
    return make_run_dir(tmp_path, toy_config, "rnn")


@pytest.fixture
def transformer_run_dir(tmp_path, toy_config):
    return make_run_dir(tmp_path, toy_config, "transformer")


def _check_schema(report: dict, benchmark: str) -> None:
    from benchmarks.common import REPORT_KEYS, SCHEMA

    assert list(report) == list(REPORT_KEYS)
    assert report["schema"] == SCHEMA and report["benchmark"] == benchmark
    assert isinstance(report["command"], list) and report["command"][0].startswith("benchmarks/")
    for key in ("date", "machine", "cpu", "cpu_count", "threads", "torch", "ctranslate2", "load_average"):
        assert key in report["environment"], key
    assert isinstance(report["settings"], dict) and isinstance(report["notes"], list)
    assert isinstance(report["results"], list) and all("kind" in row for row in report["results"])


@pytest.fixture
def check_schema():
    """`check_schema(report, benchmark)`: asserts the one report schema of benchmarks/common.py."""
    return _check_schema

"""The decoding benchmark (benchmarks/bench_decode.py): smoke runs on tiny untrained runs that check
the JSON report's rows and that every figure is a positive number. The CTranslate2 rows run where
the engine is available and are skipped with the reason otherwise. No test asserts a time."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_decode.py"
TINY = {"rnn": ["model.emb_dim=8", "model.enc_hidden=8", "model.dec_hidden=16", "model.attn_dim=8"],
        "transformer": ["model.arch=transformer", "model.d_model=16", "model.heads=2", "model.ff_dim=32",
                        "model.enc_layers=1", "model.dec_layers=1"]}


def _load():
    spec = importlib.util.spec_from_file_location("bench_decode", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench_decode = _load()


def make_run_dir(tmp_path: Path, config: Path, arch: str) -> Path:
    """A run directory as `attnmt train` writes it, with untrained weights (Translator.load works)."""
    from attnmt.checkpoint import save_weights, write_json
    from attnmt.config import load_config, save_config
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.data.pipeline import TextPipeline
    from attnmt.models import build_model

    cfg = load_config(config, TINY[arch])
    run_dir = tmp_path / f"run_{arch}"
    run_dir.mkdir()
    pipeline = TextPipeline.build(cfg.data, load_corpus(corpus_spec(cfg.data), "train"), cache_dir=run_dir)
    pipeline.save(run_dir)
    save_config(cfg, run_dir / "config.json")
    vocab = pipeline.tgt_vocab
    model = build_model(cfg.model, len(pipeline.src_vocab), len(vocab), pad_id=vocab.pad_id, bos_id=vocab.bos_id,
                        eos_id=vocab.eos_id)
    save_weights(model, run_dir / "checkpoints" / "epoch_001.safetensors")
    write_json(run_dir / "best.json", {"file": "checkpoints/epoch_001.safetensors", "epoch": 1})
    return run_dir


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_bench_decode_smoke(tmp_path, toy_config, arch, capsys):
    run_dir = make_run_dir(tmp_path, toy_config, arch)
    out = tmp_path / "decode.json"
    argv = [str(run_dir), "--split", "test", "--sentences", "6", "--threads", "1", "--batch-size", "4",
            "--export-dir", str(tmp_path / "exported"), "--json", str(out)]
    assert bench_decode.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["schema"] == bench_decode.SCHEMA and report["arch"] == arch
    assert report["sentences"] == 6 and report["env"]["threads"] == 1
    rows = {(row["engine"], row["beam"]): row for row in report["rows"]}
    for beam in (1, 5):
        row = rows[("native", beam)]  # untrained weights: the output may be empty (eos first)
        assert row["sentences"] == 6 and row["sent_per_s"] > 0 and row["seconds"] > 0
        # "seconds" is rounded to 1 ms: the rate lies between tokens / (s + 0.5 ms) and tokens / (s - 0.5 ms)
        low, high = row["seconds"] - 0.0005, row["seconds"] + 0.0005
        assert row["tgt_tokens"] / high - 0.1 <= row["tgt_tok_per_s"] <= row["tgt_tokens"] / max(low, 1e-9) + 0.1
        assert row["mean_output_len"] == pytest.approx(row["tgt_tokens"] / 6, abs=0.01)
    why_not = bench_decode.ct2_unavailable(run_dir)
    for engine in ("ct2-float32", "ct2-int8"):
        if why_not is None:
            for beam in (1, 5):
                row = rows[(engine, beam)]
                assert row["sent_per_s"] > 0 and row["tgt_tok_per_s"] >= 0
                assert 0.0 <= row["same_tokens_as_native"] <= 1.0
        else:
            assert report["skipped"][engine] == why_not
            assert not any(e == engine for e, _ in rows)
    table = capsys.readouterr().out
    assert "native" in table and "sent/s" in table
    if arch == "rnn":
        assert why_not is not None  # CTranslate2 has no RNN models (or no engine at all)


def test_bench_decode_only_native(tmp_path, toy_config):
    run_dir = make_run_dir(tmp_path, toy_config, "rnn")
    out = tmp_path / "decode.json"
    assert bench_decode.main([str(run_dir), "--split", "test", "--sentences", "3", "--threads", "1", "--beams", "2",
                              "--engines", "native", "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert [(row["engine"], row["beam"]) for row in report["rows"]] == [("native", 2)]
    assert report["skipped"] == {}

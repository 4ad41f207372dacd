"""The speed harness (benchmarks/bench.py) and its tutorial-style references: smoke runs that check
the JSON report's keys and that every figure is a positive number, and that the references have
the right shapes and learn. No test asserts a time."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnmt.config import Config
from attnmt.data.batching import make_batches

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
TINY_RNN = ["model.emb_dim=8", "model.enc_hidden=8", "model.dec_hidden=16", "model.attn_dim=8"]
TINY_TRANSFORMER = ["model.arch=transformer", "model.d_model=16", "model.heads=2", "model.ff_dim=32",
                    "model.enc_layers=1", "model.dec_layers=1"]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = _load("bench")
reference_rnn = _load("reference_rnn")
reference_transformer = _load("reference_transformer")


def _run(tmp_path: Path, config: Path, overrides: list[str], *extra: str) -> dict:
    out = tmp_path / "bench.json"
    argv = ["--config", str(config), "--device", "cpu", "--threads", "1", "--steps", "2", "--warmup-steps", "1",
            "--decode-sentences", "8", "--json", str(out), "-q", *extra]
    for item in overrides:
        argv += ["--set", item]
    assert bench.main(argv) == 0
    return json.loads(out.read_text())


def _check_report(report: dict, *, beams=("greedy", "beam5")) -> None:
    assert report["schema"] == bench.SCHEMA
    for key in ("config", "arch", "env", "data", "memory_kind", "results", "ratios", "notes"):
        assert key in report
    assert report["data"]["epoch_tgt_tokens"] > 0 and report["data"]["batches_per_epoch"] > 0
    for side in ("attnmt", "reference"):
        train = report["results"][side]["train"]
        for key in ("tgt_tok_per_s", "src_tgt_tok_per_s", "step_ms", "epoch_s_estimate", "peak_mem_mb"):
            assert train[key] > 0, (side, key)
        assert train["tgt_tokens"] > 0 and train["src_tokens"] > 0
        decode = report["results"][side]["decode"]
        assert set(decode) == set(beams)
        for result in decode.values():
            assert result["sentences"] == 8
            for key in ("sent_per_s", "seconds", "search_sent_per_s", "peak_mem_mb"):
                assert result[key] > 0, (side, key)
    for key in ("train.tgt_tok_per_s", "train.epoch_s_estimate", "decode.greedy.sent_per_s",
                "decode.beam5.search_sent_per_s", "train.peak_mem_mb"):
        assert report["ratios"][key] > 0
    assert all(math.isfinite(v) for v in report["ratios"].values() if v is not None)


def test_bench_rnn_on_toy_corpus(tmp_path, toy_config):
    report = _run(tmp_path, toy_config, TINY_RNN)
    _check_report(report)
    assert report["arch"] == "rnn" and not report["data"]["epoch_estimated"]
    assert any("lower bound" in note for note in report["notes"])  # untrained decoding is flagged


def test_bench_transformer_on_toy_corpus(tmp_path, toy_config):
    report = _run(tmp_path, toy_config, TINY_TRANSFORMER, "--full-epoch")
    _check_report(report)
    assert report["arch"] == "transformer"
    assert report["results"]["attnmt"]["train"]["epoch_s_measured"] > 0


def test_bench_multi30k_subset(tmp_path, monkeypatch, multi30k_dir):
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    config = Path(__file__).resolve().parents[1] / "configs" / "multi30k_rnn.yaml"
    report = _run(tmp_path, config, TINY_RNN, "--train-subset", "300", "--beams", "1", "--no-reference")
    assert report["data"]["train_pairs"] <= 300 and report["data"]["full_train_pairs"] == 29000
    assert report["data"]["epoch_estimated"] and report["data"]["epoch_tgt_tokens"] > 300_000
    assert report["results"]["attnmt"]["decode"]["greedy"]["tgt_tok_per_s"] > 0
    assert report["ratios"] == {} and "reference" not in report["results"]


@pytest.mark.slow
@pytest.mark.parametrize("config", ["quickstart_rnn.yaml", "multi30k_transformer.yaml"])
def test_bench_full_size_configs_on_multi30k(tmp_path, monkeypatch, multi30k_dir, config):
    """The shipped configs at full size on the whole corpus (minutes: `pytest -m slow`): both sides
    train and decode models of one parameter count, the reference with attnmt's weights."""
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    path = Path(__file__).resolve().parents[1] / "configs" / config
    report = _run(tmp_path, path, [], "--spm-cache", str(tmp_path / "spm"), "--beams", "1")
    attnmt, ref = (report["results"][side] for side in ("attnmt", "reference"))
    assert report["data"]["full_train_pairs"] == 29000
    assert attnmt["params"] == ref["params"] == attnmt["decode_params"] == ref["decode_params"] > 1_000_000
    assert report["same_outputs"] == {"greedy": 1.0}  # random weights, one model: one translation


def test_bench_needs_a_config(capsys):
    assert bench.main(["--device", "cpu"]) == 2
    assert "--config" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the references

def _toy_batch(batch: int = 6, vocab: int = 12, seed: int = 0):
    """One padded batch of a copy task: target = source (ids >= 4, lengths 3..7)."""
    gen = torch.Generator().manual_seed(seed)
    examples = []
    for i in range(batch):
        ids = torch.randint(4, vocab, (3 + i % 5,), generator=gen).tolist()
        examples.append((ids, ids))
    return make_batches(examples, batch_size=batch, shuffle=False)[0]


def _tiny_rnn():
    torch.manual_seed(0)
    return reference_rnn.ReferenceRNN(12, 12, emb_dim=8, enc_hidden=8, dec_hidden=16, attn_dim=8, dropout=0.0)


def _tiny_transformer():
    torch.manual_seed(0)
    return reference_transformer.ReferenceTransformer(12, 12, d_model=16, heads=2, ff_dim=32, enc_layers=1,
                                                      dec_layers=1, dropout=0.0)


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: tiny models only lose from more, and the CPU may be shared."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.mark.parametrize("make", [_tiny_rnn, _tiny_transformer], ids=["rnn", "transformer"])
def test_reference_forward_shape(make):
    model, batch = make(), _toy_batch()
    src, tgt_in = batch.src_ids.t(), batch.tgt_in.t()  # (src_len, batch), (tgt_len, batch)
    logits = model(src, tgt_in, 1.0)
    assert logits.shape == (tgt_in.shape[0], tgt_in.shape[1], 12)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("make", [_tiny_rnn, _tiny_transformer], ids=["rnn", "transformer"])
def test_reference_trains(make):
    model, batch = make(), _toy_batch()
    cfg = Config().replace(train=dataclasses.replace(Config().train, lr=1e-2, teacher_forcing=1.0))
    step = bench.make_reference_step(model.train(), cfg, torch.device("cpu"), pad_id=0)
    losses = [step(batch) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("ref,make", [(reference_rnn, _tiny_rnn), (reference_transformer, _tiny_transformer)],
                         ids=["rnn", "transformer"])
def test_reference_decoding_shapes(ref, make):
    model, batch = make().eval(), _toy_batch()
    src = batch.src_ids.t()  # (src_len, batch)
    out = ref.greedy_decode(model, src, 9, bos_id=2)
    assert out.shape == (9, src.shape[1])
    hyp = ref.beam_search_one(model, src[:, :1][: int(batch.src_lengths[0])], beam_size=3, max_len=9,
                              bos_id=2, eos_id=3)
    assert len(hyp) <= 9 and all(isinstance(t, int) and t != 3 for t in hyp)



# ----------------------------------------------------------------------------- same weights, same model

def _attnmt_rnn(**kw):
    from attnmt.models.rnn import RNNSeq2Seq

    torch.manual_seed(0)
    return RNNSeq2Seq(12, 14, emb_dim=8, enc_hidden=6, dec_hidden=10, attn_dim=7, dropout=0.0, **kw).double().eval()


def _attnmt_transformer(*, pre_norm=True, share=True, tie=True, vocab=(15, 15)):
    from attnmt.models.transformer import TransformerSeq2Seq

    torch.manual_seed(0)
    model = TransformerSeq2Seq(*vocab, d_model=16, heads=2, ff_dim=24, enc_layers=2, dec_layers=2, dropout=0.0,
                               pre_norm=pre_norm, share_embeddings=share, tie_embeddings=tie)
    with torch.no_grad():  # attnmt zeroes the biases at init: make them count in the comparison
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0, 0.1)
    return model.double().eval()


def _sources(lengths, vocab=12, seed=3):
    """Random ids >= 4, padded: src_ids (batch, src_len), mask, lengths."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    mask = torch.arange(int(lengths.max())) < lengths[:, None]  # (batch, src_len)
    return torch.randint(4, vocab, mask.shape, generator=gen).masked_fill(~mask, 0), mask, lengths


def test_rnn_reference_from_attnmt_has_the_same_logits():
    """Same weights -> same logits on a padded batch, same parameter count."""
    from attnmt.models import count_parameters

    model = _attnmt_rnn()
    ref = reference_rnn.from_attnmt(model).double().eval()
    assert count_parameters(ref) == count_parameters(model)
    src_ids, src_mask, lengths = _sources([6, 2, 4])
    tgt_in = torch.randint(4, 14, (3, 5), generator=torch.Generator().manual_seed(4))
    tgt_in[:, 0] = 2
    with torch.no_grad():
        expected = model(src_ids, src_mask, lengths, tgt_in).logits  # (batch, tgt_len, vocab)
        got = ref(src_ids.t(), tgt_in.t(), 1.0).transpose(0, 1)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="Bahdanau attention, 1 encoder layer and an untied output"):
        reference_rnn.from_attnmt(_attnmt_rnn(attention="luong-general"))


@pytest.mark.parametrize("pre_norm,share,tie", [(True, True, True), (False, False, False), (True, False, True)])
def test_transformer_reference_from_attnmt_has_the_same_logits(pre_norm, share, tie):
    """Same weights -> same logits on a padded batch (real target positions), same parameters."""
    from attnmt.models import count_parameters

    model = _attnmt_transformer(pre_norm=pre_norm, share=share, tie=tie, vocab=(15, 15) if share else (13, 15))
    ref = reference_transformer.from_attnmt(model).double().eval()
    assert count_parameters(ref) == count_parameters(model)
    assert (ref.tgt_tok_emb is ref.src_tok_emb) == share
    assert (ref.generator.weight is ref.tgt_tok_emb.weight) == tie
    src_ids, src_mask, lengths = _sources([7, 3, 5])
    tgt_in = torch.randint(4, 15, (3, 6), generator=torch.Generator().manual_seed(4))
    tgt_in[:, 0] = 2
    tgt_in[1, 4:] = 0  # padding
    with torch.no_grad():
        expected = model(src_ids, src_mask, lengths, tgt_in).logits  # (batch, tgt_len, vocab)
        got = ref(src_ids.t(), tgt_in.t(), 1.0).transpose(0, 1)
    real = tgt_in != 0
    torch.testing.assert_close(got[real], expected[real], rtol=1e-6, atol=1e-6)


def test_transformer_reference_greedy_equals_attnmt_greedy():
    """Same weights -> the same greedy translations, each searched to the same budget."""
    from attnmt.search import greedy_search

    model = _attnmt_transformer()
    ref = reference_transformer.from_attnmt(model).double().eval()
    src_ids, src_mask, lengths = _sources([7, 3, 5])
    found = greedy_search(model, src_ids, src_mask, lengths, max_len_ratio=0.0, max_len_offset=9, bos_id=2,
                          eos_id=3)
    rows = reference_transformer.greedy_decode(ref, src_ids.t(), 9, bos_id=2, eos_id=3).t().tolist()
    assert [row[: row.index(3)] if 3 in row else row for row in rows] == found.tokens


@pytest.mark.parametrize("config", ["quickstart_rnn.yaml", "multi30k_rnn.yaml", "multi30k_transformer.yaml"])
def test_reference_built_from_a_config_has_attnmt_parameter_count(config):
    """Training throughput compares models of one size: build_reference matches build_model."""
    from attnmt.config import load_config
    from attnmt.models import build_model, count_parameters

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / config)
    attnmt_model = build_model(cfg.model, 300, 300)
    ref = bench.reference_module(cfg.model.arch).build_reference(cfg.model, 300, 300)
    assert count_parameters(ref) == count_parameters(attnmt_model)


@pytest.fixture
def toy_run_dir(tmp_path, toy_config):
    return _toy_run_dir(tmp_path, toy_config, TINY_RNN)


def _toy_run_dir(tmp_path, toy_config, overrides):
    """A run directory as `attnmt train` writes it (config, pipeline, best.json, weights), with
    untrained weights: enough for Translator.load, in well under a second."""
    from attnmt.checkpoint import save_weights, write_json
    from attnmt.config import load_config, save_config
    from attnmt.data.corpus import load_corpus
    from attnmt.data.pipeline import TextPipeline
    from attnmt.models import build_model
    from attnmt.data.corpus import corpus_spec

    cfg = load_config(toy_config, overrides)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    pipeline = TextPipeline.build(cfg.data, load_corpus(corpus_spec(cfg.data), "train"), cache_dir=run_dir)
    pipeline.save(run_dir)
    save_config(cfg, run_dir / "config.json")
    model = build_model(cfg.model, len(pipeline.src_vocab), len(pipeline.tgt_vocab))
    save_weights(model, run_dir / "checkpoints" / "epoch_001.safetensors")
    write_json(run_dir / "best.json", {"file": "checkpoints/epoch_001.safetensors", "epoch": 1})
    return run_dir


def test_bench_decodes_a_checkpoint(tmp_path, toy_run_dir):
    """With --decode-checkpoint and no --config, the run's own config and pipeline are used."""
    out = tmp_path / "bench.json"
    assert bench.main(["--decode-checkpoint", str(toy_run_dir), "--device", "cpu", "--threads", "1",
                       "--no-train", "--beams", "1", "--decode-sentences", "8", "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert report["config"].endswith("config.json")
    assert report["data"]["decode_checkpoint"] == str(toy_run_dir)
    assert "train" not in report["results"]["attnmt"]
    assert report["results"]["attnmt"]["decode"]["greedy"]["sent_per_s"] > 0
    assert report["ratios"]["decode.greedy.sent_per_s"] > 0
    assert not any("lower bound" in note for note in report["notes"])


@pytest.fixture
def toy_transformer_run_dir(tmp_path, toy_config):
    return _toy_run_dir(tmp_path, toy_config, TINY_TRANSFORMER)


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_reference_decodes_the_checkpoint_weights(tmp_path, request, arch):
    """Same weights, same budgets: greedy (padded batches) and beam search give the same
    translations on both sides, hence the same mean length."""
    run_dir = request.getfixturevalue("toy_run_dir" if arch == "rnn" else "toy_transformer_run_dir")
    out = tmp_path / "bench.json"
    assert bench.main(["--decode-checkpoint", str(run_dir), "--device", "cpu", "--threads", "1", "--no-train",
                       "--beams", "1", "3", "--decode-sentences", "6", "--decode-batch-size", "4", "--no-search-only",
                       "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert report["same_outputs"] == {"greedy": 1.0, "beam3": 1.0}
    attnmt, ref = (report["results"][side] for side in ("attnmt", "reference"))
    assert attnmt["decode_params"] == ref["decode_params"]
    for name in ("greedy", "beam3"):
        assert attnmt["decode"][name]["mean_len"] == ref["decode"][name]["mean_len"] > 0


# ----------------------------------------------------------------------------- running the scripts

@pytest.mark.parametrize("script", ["bench.py", "bench_attention.py"])
def test_benchmark_scripts_run_as_commands(script):
    """`benchmarks/bench.py ...` as the README writes it: a shebang and the run bit."""
    path = BENCH_DIR / script
    assert path.read_text(encoding="utf-8").startswith("#!/usr/bin/env python3\n")
    assert os.access(path, os.X_OK)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_bench_runs_the_benchmark():
    out = subprocess.run(["make", "-n", "bench"], cwd=BENCH_DIR.parent, capture_output=True, text=True,
                         check=True).stdout
    assert any(line.split()[1:2] == ["benchmarks/bench.py"] for line in out.splitlines() if line.strip())

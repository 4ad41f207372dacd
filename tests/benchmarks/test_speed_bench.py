"""benchmarks/speed/bench.py: smoke runs on the toy corpus that check the report's schema and
figures the test knows independently (pairs, batches, sentences decoded, steps), and that the
reference decodes attnmt's weights to the same translations. No test asserts a time."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.common import rows
from benchmarks.speed import bench

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = ["speed/bench.py", "speed/bench_decode.py", "speed/bench_attention.py", "speed/bench_distributed.py",
           "speed/compare_decode.py", "speed/serve_load.py", "peers/onmt_compare.py",
           "peers/plot_quality_per_update.py", "gpu/gpu_suite.py"]
TOY_PAIRS, TOY_BATCH = 600, 16  # tests/conftest.py: the toy corpus and its batch size (sentences)


def _run(tmp_path: Path, config: Path, overrides: list[str], *extra: str) -> dict:
    out = tmp_path / "bench.json"
    argv = ["--config", str(config), "--device", "cpu", "--threads", "1", "--steps", "2", "--warmup-steps", "1",
            "--decode-sentences", "8", "--json", str(out), "-q", *extra]
    for item in overrides:
        argv += ["--set", item]
    assert bench.main(argv) == 0
    return json.loads(out.read_text())


def _check_figures(report: dict, *, names=("greedy", "beam5"), sentences: int = 8) -> None:
    for row in rows(report, "train"):
        assert row["steps"] == 2 and row["warmup_steps"] == 1
        # two batches of at most TOY_BATCH sentences, each of at least one word and <eos>
        assert 2 * 2 <= row["tgt_tokens"] and row["src_tokens"] >= 2
        for key in ("tgt_tok_per_s", "src_tgt_tok_per_s", "step_ms", "epoch_s_estimate", "peak_mem_mb"):
            assert row[key] > 0, (row["side"], key)
    for side in {row["side"] for row in report["results"]}:
        decode = [row for row in rows(report, "decode") if row["side"] == side]
        assert [row["name"] for row in decode] == list(names)
        for row in decode:
            assert row["sentences"] == row["outputs"] == sentences  # every input sentence was translated
            for key in ("sent_per_s", "seconds", "peak_mem_mb"):
                assert row[key] > 0, (side, key)
    for row in report["results"]:
        if row["side"] == "attnmt" and "ratio" in row:
            assert row["ratio"]["seconds"] > 0
            assert all(math.isfinite(v) for v in row["ratio"].values() if v is not None)


def test_bench_rnn_on_toy_corpus(tmp_path, toy_config, tiny, check_schema):
    report = _run(tmp_path, toy_config, tiny["rnn"])
    check_schema(report, "bench")
    _check_figures(report)
    s = report["settings"]
    assert s["arch"] == "rnn" and not s["epoch_estimated"]
    assert s["train_pairs"] == s["full_train_pairs"] == TOY_PAIRS
    assert s["batches_per_epoch"] == math.ceil(TOY_PAIRS / TOY_BATCH) and s["decode_sentences"] == 8
    assert {(row["kind"], row["side"]) for row in report["results"]} == {
        (kind, side) for kind in ("train", "decode") for side in ("attnmt", "reference")}
    train = {row["side"]: row for row in rows(report, "train")}
    assert train["attnmt"]["tgt_tokens"] == train["reference"]["tgt_tokens"]  # the same batches
    assert train["attnmt"]["ratio"]["tgt_tok_per_s"] > 0
    for row in train.values():  # each side beside this machine's training limit
        assert row["macs_per_tgt_token"] > 0 and row["limit_tgt_tok_per_s"] > 0
        assert row["share_of_limit"] == pytest.approx(row["tgt_tok_per_s"] / row["limit_tgt_tok_per_s"], rel=1e-3, abs=1e-4)
    assert any("lower bound" in note for note in report["notes"])  # untrained decoding is flagged


def test_bench_transformer_on_toy_corpus(tmp_path, toy_config, tiny):
    report = _run(tmp_path, toy_config, tiny["transformer"], "--full-epoch", "--beams", "1")
    _check_figures(report, names=("greedy",))
    assert report["settings"]["arch"] == "transformer"
    train = rows(report, "train")[0]
    assert train["epoch_s_measured"] > 0 and train["epoch_batches"] == math.ceil(TOY_PAIRS / TOY_BATCH)


def test_bench_multi30k_subset(tmp_path, monkeypatch, multi30k_dir, tiny):
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    report = _run(tmp_path, REPO / "configs" / "multi30k_rnn.yaml", tiny["rnn"], "--train-subset", "300",
                  "--beams", "1", "--no-reference", "--no-search-only")
    s = report["settings"]
    assert s["train_pairs"] <= 300 and s["full_train_pairs"] == 29000
    assert s["epoch_estimated"] and s["epoch_tgt_tokens"] > 300_000
    assert [row["side"] for row in report["results"]] == ["attnmt", "attnmt"]
    assert "ratio" not in report["results"][0]


@pytest.mark.slow
@pytest.mark.parametrize("config", ["quickstart_rnn.yaml", "multi30k_transformer.yaml"])
def test_bench_full_size_configs_on_multi30k(tmp_path, monkeypatch, multi30k_dir, config):
    """The shipped configs at full size on the whole corpus (minutes: `pytest -m slow`): both sides
    train and decode models of one parameter count, the reference with attnmt's weights."""
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    report = _run(tmp_path, REPO / "configs" / config, [], "--beams", "1")
    assert report["settings"]["full_train_pairs"] == 29000
    assert len({row["params"] for row in report["results"]}) == 1 and report["results"][0]["params"] > 1_000_000
    greedy = [row for row in rows(report, "decode") if row["side"] == "attnmt"][0]
    assert greedy["same_outputs"] == 1.0  # random weights, one model: one translation


def test_bench_needs_a_config(capsys):
    assert bench.main(["--device", "cpu"]) == 2
    assert "--config" in capsys.readouterr().err


def test_bench_decodes_a_checkpoint(tmp_path, rnn_run_dir):
    """With --decode-checkpoint and no --config, the run's own config and pipeline are used."""
    out = tmp_path / "bench.json"
    assert bench.main(["--decode-checkpoint", str(rnn_run_dir), "--device", "cpu", "--threads", "1",
                       "--no-train", "--beams", "1", "--decode-sentences", "8", "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert report["settings"]["config"].endswith("config.json")
    assert report["settings"]["decode_checkpoint"] == str(rnn_run_dir)
    assert rows(report, "train") == []
    attnmt = [row for row in rows(report, "decode") if row["side"] == "attnmt"][0]
    assert attnmt["outputs"] == 8 and attnmt["ratio"]["sent_per_s"] > 0
    assert not any("lower bound" in note for note in report["notes"])


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_reference_decodes_the_checkpoint_weights(tmp_path, request, arch):
    """Same weights, same budgets: greedy (padded batches) and beam search give the same
    translations on both sides, hence the same lengths."""
    run_dir = request.getfixturevalue(f"{arch}_run_dir")
    out = tmp_path / "bench.json"
    assert bench.main(["--decode-checkpoint", str(run_dir), "--device", "cpu", "--threads", "1", "--no-train",
                       "--beams", "1", "3", "--decode-sentences", "6", "--decode-batch-size", "4", "--no-search-only",
                       "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    decode = {(row["side"], row["name"]): row for row in rows(report, "decode")}
    for name in ("greedy", "beam3"):
        attnmt, ref = decode["attnmt", name], decode["reference", name]
        assert attnmt["same_outputs"] == 1.0 and attnmt["params"] == ref["params"]
        assert attnmt["tgt_tokens"] == ref["tgt_tokens"] and attnmt["mean_len"] == ref["mean_len"] > 0


def test_every_script_runs_as_a_file():
    """`benchmarks/speed/bench.py --help` and the others, run as files from elsewhere (as the docs
    write them): their shebang, run bit and imports of the benchmarks package work."""
    scripts = [REPO / "benchmarks" / name for name in SCRIPTS]
    probe = ("import runpy, sys\nfor path in sys.argv[1:]:\n    sys.argv = [path, '--help']\n    try:\n"
             "        runpy.run_path(path, run_name='__main__')\n    except SystemExit as e:\n"
             "        assert e.code in (0, None), (path, e.code)\n")
    done = subprocess.run([sys.executable, "-c", probe, *map(str, scripts)], cwd="/", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("usage:") == len(scripts)
    for script in scripts:
        assert script.stat().st_mode & 0o111 and script.read_text().startswith("#!/usr/bin/env python3\n"), script


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_bench_runs_the_benchmark():
    out = subprocess.run(["make", "-n", "bench"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    commands = [line.split() for line in out.splitlines() if "bench.py" in line]
    assert commands and (REPO / commands[-1][1]).is_file()

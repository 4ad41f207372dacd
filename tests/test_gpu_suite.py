"""The GPU suite's parts that run without a GPU: argument handling, the no-CUDA exit, the plan of
speed runs, the parsers of pytest's and bench.py's output, the summary it writes, and (slow) a
dry run of every stage on the CPU with tiny sizes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def load_suite():
    spec = importlib.util.spec_from_file_location("gpu_suite", ROOT / "benchmarks" / "gpu_suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


suite = load_suite()
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")


def test_arguments(capsys):
    args = suite.parse_args(["out"])
    assert args.stages == ["tests", "quality", "speed"] and args.budget_s == 540 and not args.dry_run
    args = suite.parse_args(["out", "--only", "speed, tests", "--dry-run", "--budget-s", "60"])
    assert args.stages == ["speed", "tests"] and args.dry_run and args.budget_s == 60
    for bad, message in ((["out", "--only", "tests,bogus"], "unknown stage"), (["out", "--budget-s", "0"], "positive"),
                         ([], "out_dir")):
        with pytest.raises(SystemExit) as exit_info:
            suite.parse_args(bad)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


@no_cuda
def test_without_cuda_prints_one_line_and_exits_0(tmp_path, capsys):
    assert suite.main([str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip() == suite.NO_CUDA
    assert not (tmp_path / "out").exists()


@no_cuda
def test_shell_entry_point_without_cuda(tmp_path):
    script = ROOT / "benchmarks" / "gpu_suite.sh"
    usage = subprocess.run([str(script)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: benchmarks/gpu_suite.sh OUT_DIR" in usage.stderr
    env = dict(os.environ, PYTHON=str(Path(os.sys.executable)))
    done = subprocess.run([str(script), str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert done.returncode == 0
    assert done.stdout.splitlines() == [suite.NO_CUDA]


def test_speed_plan_covers_both_configs_batches_and_modes(tmp_path):
    args = suite.parse_args([str(tmp_path)])
    plan = dict(suite.speed_plan(args, tmp_path))
    assert set(plan) == {f"{arch}_b{batch}_{mode}" for arch in ("transformer", "rnn") for batch in (128, 512)
                         for mode in ("none", "default", "cudagraphs")} - {"rnn_b128_cudagraphs", "rnn_b512_cudagraphs"}
    decoding = [name for name, cmd in plan.items() if "--no-decode" not in cmd]
    assert decoding == ["transformer_b128_none", "rnn_b128_none"]  # once per config, eager
    cmd = plan["transformer_b512_cudagraphs"]
    assert "train.compile=cudagraphs" in cmd and "train.batch_size=512" in cmd and "--device" in cmd
    dry = dict(suite.speed_plan(suite.parse_args([str(tmp_path), "--dry-run"]), tmp_path))
    assert all(cmd[cmd.index("--device") + 1] == "cpu" for cmd in dry.values())


def test_junit_counts(tmp_path):
    path = tmp_path / "pytest.xml"
    path.write_text("""<?xml version="1.0"?><testsuites><testsuite>
        <testcase classname="tests.test_gpu" name="test_a"/>
        <testcase classname="tests.test_gpu" name="test_b"><failure message="x"/></testcase>
        <testcase classname="tests.test_gpu" name="test_c"><skipped message="no cuda"/></testcase>
        <testcase classname="tests.test_gpu" name="test_d"><skipped/></testcase>
        <testcase classname="tests.test_gpu" name="test_e"><error message="y"/></testcase>
        </testsuite></testsuites>""")
    counts = suite.junit_counts(path)
    assert (counts["passed"], counts["failed"], counts["skipped"], counts["errors"]) == (1, 1, 2, 1)
    assert counts["failures"] == ["tests.test_gpu::test_b", "tests.test_gpu::test_e"]
    assert suite.junit_counts(tmp_path / "missing.xml") == {}


def test_bench_figures_keep_each_figure_with_its_ratio():
    report = {
        "data": {"batch_size": 128}, "overrides": ["train.compile=cudagraphs"], "notes": ["n"],
        "results": {"attnmt": {"train": {"tgt_tok_per_s": 500000.0, "step_ms": 3.5, "epoch_s_estimate": 0.8,
                                         "amp": "bf16"},
                               "decode": {"beam5": {"sentences": 1000, "sent_per_s": 2000.0, "seconds": 0.5,
                                                    "tgt_tok_per_s": 26000.0, "search_seconds": 0.3}}},
                    "reference": {}},
        "ratios": {"train.tgt_tok_per_s": 4.5, "decode.beam5.sent_per_s": 30.0},
    }
    figures = suite.bench_figures(report)
    assert figures["train"] == {"tgt_tok_per_s": 500000.0, "step_ms": 3.5, "epoch_s_estimate": 0.8, "amp": "bf16",
                                "ratio_tgt_tok_per_s": 4.5}
    assert figures["beam5"]["ratio_sent_per_s"] == 30.0 and figures["beam5"]["seconds"] == 0.5
    assert figures["overrides"] == ["train.compile=cudagraphs"] and figures["batch_size"] == 128


def test_summary_is_written_whole(tmp_path):
    summary = {"schema": suite.SCHEMA, "stages": {"tests": {"status": "ok", "passed": 3}}}
    path = suite.write_summary(tmp_path, summary)
    assert json.loads(path.read_text()) == summary
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_read_report_lines_merges_reported_figures(tmp_path):
    path = tmp_path / "gpu_report.jsonl"
    path.write_text('{"sdpa_backends": {"MATH/float32": true}}\n\n{"bf16_beam_batch_variance_rate": 0.03}\n')
    assert suite.read_report_lines(path) == {"sdpa_backends": {"MATH/float32": True},
                                             "bf16_beam_batch_variance_rate": 0.03}


@pytest.mark.slow
def test_dry_run_of_every_stage(tmp_path):
    """Every stage on the CPU with tiny sizes: the summary has each stage's figures."""
    out = tmp_path / "out"
    assert suite.main([str(out), "--dry-run", "--budget-s", "1800", "--quality-minutes", "0.05"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == suite.SCHEMA and summary["dry_run"] is True
    stages = summary["stages"]
    assert stages["tests"]["status"] == "ok" and stages["tests"]["skipped"] >= 1  # no CUDA: all skipped
    quality = stages["quality"]["transformer"]
    assert quality["status"] == "ok" and quality["epochs"] == 1 and quality["beam"] == 5
    assert 0 <= quality["bleu"] <= 100 and quality["signature"].startswith("nrefs:1")
    runs = stages["speed"]["runs"]
    assert set(runs) == {"transformer_b8_none", "rnn_b8_none"}
    for run in runs.values():
        assert run["status"] == "ok" and run["train"]["tgt_tok_per_s"] > 0
        assert run["train"]["ratio_tgt_tok_per_s"] > 0
    assert runs["rnn_b8_none"]["beam5"]["ratio_sent_per_s"] > 0
    for log in ("tests.log", "quality_transformer.log", "speed.log"):
        assert (out / log).stat().st_size > 0

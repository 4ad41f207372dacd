"""benchmarks/gpu/gpu_suite.{sh,py}, the parts that run without a GPU: argument handling, the
no-CUDA exit, the plan of speed runs, the parsers of pytest's and speed/bench.py's output, a dry run
of the tests stage that writes the summary, and (slow) a dry run of every stage on the CPU with tiny
sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from benchmarks.common import REPO as ROOT
from benchmarks.common import rows
from benchmarks.gpu import gpu_suite as suite
from benchmarks.speed import bench

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
    script = ROOT / "benchmarks" / "gpu" / "gpu_suite.sh"
    usage = subprocess.run([str(script)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: benchmarks/gpu/gpu_suite.sh OUT_DIR" in usage.stderr
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run([str(script), str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert done.returncode == 0
    assert done.stdout.splitlines() == [suite.NO_CUDA]


def test_speed_plan_covers_both_configs_batches_and_modes(tmp_path):
    args = suite.parse_args([str(tmp_path)])
    plan = dict(suite.speed_plan(args, tmp_path))
    training = {f"{arch}_b{batch}_{mode}" for arch in ("transformer", "rnn") for batch in (128, 512)
                for mode in ("none", "default", "cudagraphs")} - {"rnn_b128_cudagraphs", "rnn_b512_cudagraphs"}
    assert set(plan) == training | {"transformer_decode", "rnn_decode"}
    assert all("--no-decode" in plan[name] and "--no-train" not in plan[name] for name in training)
    decoding = [name for name, cmd in plan.items() if "--no-decode" not in cmd]
    assert decoding == ["transformer_decode", "rnn_decode"]  # once per config, eager, no training
    assert all("--no-train" in plan[name] and "train.compile=none" in plan[name] for name in decoding)
    assert all(plan[name][plan[name].index("--decode-sentences") + 1] == "200" for name in decoding)
    order = list(plan)  # eager and graphs before decoding, torch.compile last
    assert order.index("transformer_b512_cudagraphs") < order.index("transformer_decode")
    assert order.index("rnn_decode") < min(order.index(name) for name in training if name.endswith("_default"))
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


def test_bench_figures_read_a_real_bench_report(tmp_path, toy_config, tiny):
    """speed/bench.py's report as the speed stage gets it: the attnmt figures and their ratios."""
    out = tmp_path / "bench.json"
    argv = ["--config", str(toy_config), "--device", "cpu", "--threads", "1", "--steps", "1", "--warmup-steps", "0",
            "--decode-sentences", "3", "--beams", "2", "--no-search-only", "--json", str(out), "-q",
            "--set", "train.batch_size=8"]
    for item in tiny["rnn"]:
        argv += ["--set", item]
    assert bench.main(argv) == 0
    figures = suite.bench_figures(json.loads(out.read_text()))
    assert figures["batch_size"] == 8 and "train.batch_size=8" in figures["overrides"]
    assert set(figures) == {"batch_size", "overrides", "train", "beam2", "notes"}
    assert figures["train"]["amp"] == "fp32" and figures["train"]["ratio_tgt_tok_per_s"] > 0
    assert figures["beam2"]["sentences"] == 3 and figures["beam2"]["ratio_sent_per_s"] > 0


@no_cuda
def test_dry_run_of_the_tests_stage_writes_the_summary(tmp_path, check_schema):
    """Without CUDA every gpu test skips; the summary is a report of the one schema."""
    out = tmp_path / "out"
    assert suite.main([str(out), "--dry-run", "--only", "tests", "--budget-s", "300"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    check_schema(summary, "gpu_suite")
    assert summary["settings"]["dry_run"] is True and summary["settings"]["stages"] == ["tests"]
    [stage] = summary["results"]
    assert (stage["kind"], stage["stage"], stage["status"]) == ("stage", "tests", "ok")
    assert stage["passed"] == stage["failed"] == 0 and stage["skipped"] >= 1
    assert sorted(p.name for p in out.iterdir()) == ["pytest.xml", "summary.json", "tests.log"]


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
    assert summary["settings"]["dry_run"] is True
    stages = {row["stage"]: row for row in rows(summary, "stage")}
    assert stages["tests"]["status"] == "ok" and stages["tests"]["skipped"] >= 1  # no CUDA: all skipped
    quality = stages["quality"]["transformer"]
    assert quality["status"] == "ok" and quality["epochs"] == 1 and quality["beam"] == 5
    assert 0 <= quality["bleu"] <= 100 and quality["signature"].startswith("nrefs:1")
    runs = stages["speed"]["runs"]
    assert set(runs) == {"transformer_b8_none", "rnn_b8_none", "transformer_decode", "rnn_decode"}
    assert all(run["status"] == "ok" for run in runs.values())
    for name in ("transformer_b8_none", "rnn_b8_none"):
        assert runs[name]["train"]["tgt_tok_per_s"] > 0 and runs[name]["train"]["ratio_tgt_tok_per_s"] > 0
        assert "beam5" not in runs[name]
    for name in ("transformer_decode", "rnn_decode"):
        assert "train" not in runs[name] and runs[name]["beam5"]["ratio_sent_per_s"] > 0
    for log in ("tests.log", "quality_transformer.log", "speed.log"):
        assert (out / log).stat().st_size > 0

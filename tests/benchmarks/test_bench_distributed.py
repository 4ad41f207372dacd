"""benchmarks/speed/bench_distributed.py: a short run on the toy corpus (2 torchrun ranks, then
one process with 2 threads and with 1). The report has one row per set-up, each with the updates
that one epoch of the toy corpus makes. No test asserts a time."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.speed import bench_distributed

TOY_PAIRS = 600  # tests/conftest.py


@pytest.mark.slow  # three trainings, torchrun among them: about 30 s on 2 cores
def test_bench_distributed_smoke(tmp_path, toy_config, check_schema, capsys):
    out = tmp_path / "distributed.json"
    assert bench_distributed.main(["--config", str(toy_config), "--minutes", "2", "--json", str(out),
                                   "--set", "train.batch_by=sentences", "--set", "train.batch_size=50",
                                   "--set", "train.log_every=1"]) == 0
    report = json.loads(out.read_text())
    check_schema(report, "bench_distributed")
    assert [(r["processes"], r["threads"]) for r in report["results"]] == [(2, 1), (1, 2), (1, 1)]
    for row in report["results"]:
        # one epoch of 600 pairs in batches of 50, two batches an update, logged every update
        assert row["updates"] == math.ceil(TOY_PAIRS / 50 / 2) and row["records"] == row["updates"] - 1
        assert row["tokens_per_s"] > 0
    assert "ratio 2 ranks" in capsys.readouterr().out


def test_bench_distributed_refuses_one_rank(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_distributed.main(["--ranks", "1"])
    assert exit_info.value.code == 2 and "--ranks=1 must be >= 2" in capsys.readouterr().err


def test_rates_leave_out_the_first_record(tmp_path):
    lines = [{"event": "train", "step": 2, "tokens_per_s": 1.0}, {"event": "valid", "step": 2, "bleu": 1.0},
             {"event": "train", "step": 4, "tokens_per_s": 30.0}, {"event": "train", "step": 6, "tokens_per_s": 10.0},
             {"event": "train", "step": 8, "tokens_per_s": 20.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert bench_distributed.read_rates("x", tmp_path) == {"tokens_per_s": 20.0, "records": 3, "updates": 8}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(lines[0]) + "\n")
    with pytest.raises(SystemExit, match="none for training after the first"):
        bench_distributed.read_rates("x", tmp_path)

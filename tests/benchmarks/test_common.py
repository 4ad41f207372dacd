"""benchmarks/common.py: the thread setting is restored, the median is taken over the timed
calls only, and reports are written whole, in the one schema, and refused when they are not."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks import common


def test_torch_threads_are_restored_even_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError):
        with common.torch_threads(before + 1) as threads:
            assert threads == torch.get_num_threads() == before + 1
            assert common.environment()["threads"] == before + 1
            raise RuntimeError
    assert torch.get_num_threads() == before
    with common.torch_threads(None) as threads:
        assert threads == before


def test_median_time_leaves_out_the_warmup(monkeypatch):
    clock = iter([0.0, 5.0, 10.0, 11.0, 20.0, 23.0])  # start/stop of three timed calls: 5, 1, 3 s
    monkeypatch.setattr(common.time, "perf_counter", lambda: next(clock))
    calls = []
    timing = common.median_time(lambda: calls.append(1) or len(calls), repeats=3, warmup=2)
    assert timing.seconds == [5.0, 1.0, 3.0] and timing.median == 3.0
    assert len(calls) == 5 and timing.result == 5  # the last call's result


def test_reports_are_written_whole_and_read_back(tmp_path):
    report = common.make_report("x", command=common.command(common.__file__, ["--a"]),
                                environment=common.environment(), settings={"n": 1}, results=[{"kind": "k"}])
    assert report["command"] == ["benchmarks/common.py", "--a"]
    path = common.write_report(tmp_path / "sub" / "r.json", report)
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary file left
    assert common.read_report(path, "x") == json.loads(json.dumps(report))
    with pytest.raises(ValueError, match="missing \\['notes'\\]"):
        common.write_report(tmp_path / "bad.json", {k: v for k, v in report.items() if k != "notes"})
    (tmp_path / "old.json").write_text('{"schema": "attnmt-bench/1"}')
    with pytest.raises(ValueError, match="not a attnmt-benchmark/1 report"):
        common.read_report(tmp_path / "old.json")

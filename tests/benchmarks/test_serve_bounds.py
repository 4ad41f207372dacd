"""benchmarks/speed/serve_bounds.py against a real `attnmt serve` of a tiny untrained run: a row per
route and size, every large request answered, probes answered meanwhile. No test asserts a time."""

from __future__ import annotations

import json

from benchmarks.speed import serve_bounds


def test_serve_bounds_smoke(tmp_path, rnn_run_dir, check_schema):
    out = tmp_path / "bounds.json"
    assert serve_bounds.main([str(rnn_run_dir), "--sentences", "5", "40", "--batch", "4", "--server-threads", "1",
                              "--timeout", "120", "--json", str(out), "--quiet"]) == 0
    report = json.loads(out.read_text())
    check_schema(report, "serve_bounds")
    assert [(row["route"], row["sentences"]) for row in report["results"]] == [
        ("translate", 5), ("translate", 40), ("v1", 5), ("v1", 40)]
    for row in report["results"]:
        assert row["status"] == 200 and row["peak_mb"] >= 0 and row["answer_kb"] > 0
        assert row["probes"] == 0 or row["probe_max_s"] is not None

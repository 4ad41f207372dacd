"""benchmarks/speed/workers.py: a smoke run on a tiny untrained run. The report has the one
schema, one row per configuration and beam, every sentence translated, and the same tokens in
every configuration (workers change the speed, not the output). No test asserts a time."""

from __future__ import annotations

import json

import pytest

from benchmarks.speed import workers


def test_bench_workers_smoke(tmp_path, rnn_run_dir, check_schema, capsys):
    out = tmp_path / "workers.json"
    argv = [str(rnn_run_dir), "--split", "test", "--sentences", "5", "--beams", "1", "2", "--configs", "1x1", "2x1",
            "--rounds", "2", "--batch-size", "2", "--json", str(out)]
    assert workers.main(argv) == 0
    report = json.loads(out.read_text())
    check_schema(report, "bench_workers")
    assert report["settings"]["configs"] == ["1x1", "2x1"] and report["settings"]["baseline"] == "1x1"
    rows = {(row["config"], row["beam"]): row for row in report["results"]}
    assert sorted(rows) == [("1x1", 1), ("1x1", 2), ("2x1", 1), ("2x1", 2)]
    for (config, beam), row in rows.items():
        assert row["kind"] == "workers" and row["sentences"] == row["outputs"] == 5
        assert len(row["all_seconds"]) == 2 and row["sent_per_s"] > 0
        assert row["same_tokens_as_baseline"] == 1.0
        assert row["workers"] == int(config[0]) and row["threads"] == 1
    assert rows[("1x1", 1)]["ratio_to_baseline"] == 1.0
    assert "2x1" in capsys.readouterr().out


@pytest.mark.parametrize("bad,message", [("2", "WORKERSxTHREADS"), ("axb", "WORKERSxTHREADS"),
                                         ("0x1", "workers and threads must be >= 1")])
def test_bench_workers_refuses_bad_configs(tmp_path, rnn_run_dir, capsys, bad, message):
    with pytest.raises(SystemExit) as exit_:  # argparse's own error
        workers.main([str(rnn_run_dir), "--configs", bad, "--json", str(tmp_path / "x.json")])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()

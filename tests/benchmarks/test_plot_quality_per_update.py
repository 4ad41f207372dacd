"""benchmarks/peers/plot_quality_per_update.py: the OpenNMT-py windows become a running mean per
target token over the epoch, and a plot of an attnmt run against an onmt_compare report is written
with its table of the updates both curves share."""

from __future__ import annotations

import json

import pytest

from benchmarks.common import make_report, write_report
from benchmarks.peers import plot_quality_per_update as plot


def test_running_mean_restarts_each_epoch():
    windows = [{"step": 2, "loss": 4.0, "tgt_tokens": 10}, {"step": 4, "loss": 1.0, "tgt_tokens": 30},
               {"step": 6, "loss": 2.0, "tgt_tokens": 20}]
    assert plot.onmt_running_mean(windows, epoch_updates=4) == {2: 4.0, 4: (40 + 30) / 40, 6: 2.0}


def test_plot_smoke(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    records = [{"event": "train", "step": s, "loss": 5.0 - s / 100} for s in (50, 100, 150)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    onmt = write_report(tmp_path / "summary.json", make_report(
        "onmt_compare", command=["benchmarks/peers/onmt_compare.py"], environment={}, settings={},
        results=[{"kind": "loss", "step": s, "loss": 6.0, "tgt_tokens": 100} for s in (50, 100)]))
    out = tmp_path / "curves.png"
    assert plot.main(["-o", str(out), "--attnmt", f"pre={run_dir}", "--onmt", str(onmt),
                      "--epoch-updates", "227"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert table == ["| update | pre | OpenNMT-py 3.5.1 |", "| 50 | 4.500 | 6.000 |", "| 100 | 4.000 | 6.000 |"]


def test_plot_refuses_another_report(tmp_path):
    other = write_report(tmp_path / "bench.json", make_report("bench", command=[], environment={}, settings={},
                                                              results=[]))
    with pytest.raises(ValueError, match="a report of 'bench', expected 'onmt_compare'"):
        plot.main(["-o", str(tmp_path / "x.png"), "--onmt", str(other)])

"""benchmarks/speed/bench_attention.py on tiny shapes: one row per attention and path, with the
shapes and repeats asked for. No test asserts a time."""

from __future__ import annotations

import json

import pytest

from benchmarks.speed import bench_attention

PATHS = {"additive (1 step)": ["loop", "batched", "batched, keys re-projected"],
         "scaled dot-product": ["loop", "batched", "sdpa"], "multi-head (8)": ["loop", "batched", "sdpa"]}


def test_bench_attention_smoke(tmp_path, monkeypatch, check_schema):
    tiny = {"multi30k": dict(batch=3, src_len=5, tgt_len=4, hidden=16)}
    monkeypatch.setattr(bench_attention, "SETTINGS", tiny)
    out = tmp_path / "attention.json"
    assert bench_attention.main(["--settings", "multi30k", "--threads", "1", "--repeats", "2", "--loop-repeats", "1",
                                 "--warmup", "0", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    check_schema(report, "bench_attention")
    assert report["settings"]["shapes"] == tiny and report["environment"]["threads"] == 1
    assert [(r["attention"], r["path"]) for r in report["results"]] == [
        (attention, path) for attention, paths in PATHS.items() for path in paths]
    for row in report["results"]:
        assert (row["batch"], row["src_len"], row["hidden"]) == (3, 5, 16)
        assert row["ms_per_call"] > 0 and row["repeats"] == (1 if row["path"] == "loop" else 2)


def test_bench_attention_refuses_bad_numbers(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_attention.main(["--repeats", "0"])
    assert exit_info.value.code == 2 and ">= 1" in capsys.readouterr().err

"""Smoke test of benchmarks/speed/ct2_calls_ab.py on a tiny random Transformer export: every
variant asked for is timed at every beam, and the baseline's ratio to itself is 1."""

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("ctranslate2")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt.engines.ctranslate2_export import export_run  # noqa: E402
from benchmarks.speed import ct2_calls_ab  # noqa: E402


def test_ct2_calls_ab_times_each_variant(tmp_path, random_run, multi30k_dir, monkeypatch, capsys):
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    export = export_run(random_run(tmp_path / "run"), tmp_path / "export")
    variants = ["new", "new-intra", "ct2-own-lp"]
    assert ct2_calls_ab.main([str(export), "--beams", "1", "2", "--sentences", "4", "--rounds", "1",
                              "--variants", *variants]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("beam ")]
    assert [tuple(line.split()[1:3]) for line in lines] == [(b, v) for b in ("1", "2") for v in variants]
    for line in lines[::len(variants)]:  # the first variant is the baseline
        assert re.search(r"x 1\.00 vs new", line), line

"""benchmarks/speed/compare_decode.py against the committed package (--before HEAD): both sides
translate every sentence, and where the working tree's decoding equals HEAD's every translation is
identical. No test asserts a time."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks.common import REPO
from benchmarks.speed import compare_decode


def test_compare_decode_smoke(tmp_path, rnn_run_dir, check_schema, capsys):
    changed = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "src/attnmt"], capture_output=True,
                             text=True, check=True).stdout
    out = tmp_path / "compare.json"
    assert compare_decode.main([str(rnn_run_dir), "--before", "HEAD", "--split", "test", "--sentences", "5",
                                "--beams", "1", "2", "--threads", "1", "--repeats", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    check_schema(report, "compare_decode")
    assert [row["beam"] for row in report["results"]] == [1, 2]
    for row in report["results"]:
        assert row["sentences"] == 5 and len(row["before"]["seconds"]) == len(row["after"]["cpu_seconds"]) == 1
        if not changed:  # the same package twice: the same translations
            assert row["identical"] == 5 and row["max_score_diff"] == pytest.approx(0.0, abs=1e-5)
    assert capsys.readouterr().out.count("identical") == 2

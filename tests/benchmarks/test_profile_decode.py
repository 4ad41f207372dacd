"""benchmarks/speed/profile_decode.py: the grouping of decoder steps by rows against a hand
count, and a smoke run on tiny untrained runs (the clock wraps the model without changing its
output and is removed after; the groups add up to the steps; the op shares to the whole). No
test asserts a time."""

from __future__ import annotations

import json

import pytest

from attnmt import Translator
from benchmarks.speed import profile_decode
from benchmarks.speed.profile_decode import StepClock, step_groups


def test_step_groups_by_hand():
    steps = [(10, 1.0), (10, 1.0), (4, 1.0), (1, 1.0), (0.5, 0.5)]  # (rows, seconds)
    groups, full_row_s = step_groups(steps)
    assert [(g["steps"], g["rows"], g["seconds"]) for g in groups] == [(2, 20, 2.0), (2, 5, 2.0), (1, 0.5, 0.5)]
    assert groups[0]["us_per_row"] == pytest.approx(1e5) and groups[1]["us_per_row"] == pytest.approx(4e5)
    assert full_row_s == pytest.approx(0.1 * 25.5)  # every row at the full steps' 0.1 s


def test_step_clock_leaves_the_output_alone(rnn_run_dir):
    translator = Translator.load(rnn_run_dir, device="cpu")
    sentences = ["ein hund läuft .", "zwei männer", "eine frau singt ein lied ."]
    plain = [r.tokens for r in translator.translate(sentences, beam_size=2)]
    clock = StepClock(translator.model)
    try:
        wrapped = [r.tokens for r in translator.translate(sentences, beam_size=2)]
    finally:
        clock.restore()
    assert wrapped == plain and clock.steps and all(rows <= 3 * 2 for rows, _ in clock.steps)
    assert "decode_step" not in vars(translator.model) and "encode" not in vars(translator.model)


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_profile_decode_smoke(tmp_path, request, arch, check_schema, capsys):
    run_dir = request.getfixturevalue(f"{arch}_run_dir")
    out = tmp_path / "profile.json"
    argv = [str(run_dir), "--split", "test", "--sentences", "6", "--batch-size", "3", "--beam", "2",
            "--threads", "1", "--json", str(out)]
    assert profile_decode.main(argv) == 0
    report = json.loads(out.read_text())
    check_schema(report, "profile_decode")
    wall = next(r for r in report["results"] if r["kind"] == "wall")
    groups = [r for r in report["results"] if r["kind"] == "rows"]
    assert wall["sentences"] == 6 and sum(g["steps"] for g in groups) == wall["steps"] > 0
    assert sum(g["seconds"] for g in groups) == pytest.approx(wall["steps_s"], abs=1e-3)
    ops = [r for r in report["results"] if r["kind"] == "ops"]
    assert sum(r["share"] for r in ops) == pytest.approx(1.0, abs=0.01)
    assert "decoder steps by rows" in capsys.readouterr().out


def test_profile_decode_refuses_bad_numbers(rnn_run_dir, capsys):
    assert profile_decode.main([str(rnn_run_dir), "--beam", "0"]) == 2
    assert "must be >= 1" in capsys.readouterr().err

"""benchmarks/speed/bench_decode.py: smoke runs on tiny untrained runs. The report has the one
schema, one row per engine and beam, every input sentence translated, and the native rows' output
tokens are those Translator.translate gives for the same sentences here. The CTranslate2 rows run
where the engine is available and are skipped with the reason otherwise. No test asserts a time."""

from __future__ import annotations

import json

import pytest

from attnmt import Translator
from benchmarks.speed import bench_decode


def _first_lines(path, n: int) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[:n]


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_bench_decode_smoke(tmp_path, request, toy_corpus, arch, capsys, check_schema):
    run_dir = request.getfixturevalue(f"{arch}_run_dir")
    out = tmp_path / "decode.json"
    argv = [str(run_dir), "--split", "test", "--sentences", "6", "--threads", "1", "--batch-size", "4",
            "--export-dir", str(tmp_path / "exported"), "--json", str(out)]
    assert bench_decode.main(argv) == 0
    report = json.loads(out.read_text())
    check_schema(report, "bench_decode")
    assert report["settings"]["arch"] == arch and report["settings"]["sentences"] == 6
    assert report["environment"]["threads"] == 1
    rows = {(row["engine"], row["beam"]): row for row in report["results"]}
    translator = Translator.load(run_dir, device="cpu")
    for beam in (1, 5):
        row = rows[("native", beam)]
        assert row["sentences"] == row["outputs"] == 6 and row["sent_per_s"] > 0 and row["seconds"] > 0
        found = translator.translate(_first_lines(toy_corpus / "test.de", 6), beam_size=beam, batch_size=4)
        assert row["tgt_tokens"] == sum(len(r.tokens) for r in found)  # counted here, independently
    why_not = bench_decode.ct2_unavailable(run_dir)
    for engine in ("ct2-float32", "ct2-int8"):
        if why_not is None:
            for beam in (1, 5):
                row = rows[(engine, beam)]
                assert row["outputs"] == 6 and row["sent_per_s"] > 0
                assert 0.0 <= row["same_tokens_as_native"] <= 1.0
        else:
            assert f"{engine} skipped: {why_not}" in report["notes"]
            assert not any(e == engine for e, _ in rows)
    table = capsys.readouterr().out
    assert "native" in table and "sent/s" in table
    if arch == "rnn":
        assert why_not is not None  # CTranslate2 has no RNN models (or no engine at all)


def test_bench_decode_only_native(tmp_path, rnn_run_dir):
    out = tmp_path / "decode.json"
    assert bench_decode.main([str(rnn_run_dir), "--split", "test", "--sentences", "3", "--threads", "1",
                              "--beams", "2", "--engines", "native", "--json", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert [(row["engine"], row["beam"]) for row in report["results"]] == [("native", 2)]
    assert report["notes"] == []


def test_bench_decode_refuses_bad_numbers(tmp_path, rnn_run_dir, capsys):
    assert bench_decode.main([str(rnn_run_dir), "--beams", "0", "--json", str(tmp_path / "x.json")]) == 2
    assert "must be >= 1" in capsys.readouterr().err and not (tmp_path / "x.json").exists()

"""benchmarks/speed/serve_load.py against a real `attnmt serve` of a tiny untrained run: every
request of the cell is sent and answered, none lost or in error. No test asserts a time."""

from __future__ import annotations

import gzip
import json

from benchmarks.speed import serve_load


def test_serve_load_smoke(tmp_path, rnn_run_dir, toy_corpus, check_schema):
    data = tmp_path / "data"
    data.mkdir()
    with gzip.open(data / "test.de.gz", "wt", encoding="utf-8") as f:
        f.write((toy_corpus / "test.de").read_text(encoding="utf-8"))
    out = tmp_path / "serve.json"
    assert serve_load.main([str(rnn_run_dir), "--data", str(data), "--split", "test", "--requests", "7",
                            "--clients", "1", "3", "--modes", "batched", "--beam", "2", "--warmup", "2",
                            "--timeout", "60", "--max-seconds", "120", "--server-threads", "1",
                            "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    check_schema(report, "serve_load")
    assert [(row["mode"], row["clients"]) for row in report["results"]] == [("batched", 1), ("batched", 3)]
    for row in report["results"]:
        assert row["sent"] == row["answered"] == 7 and row["errors"] == row["lost"] == row["unsent"] == 0
        assert 1 <= row["largest_batch"] <= 3 and row["p50_s"] <= row["p99_s"]

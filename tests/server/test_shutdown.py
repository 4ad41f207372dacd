"""`attnmt serve` as a process: SIGTERM with requests in flight lets them finish and exits 0;
Ctrl-C (SIGINT) exits 0; bad arguments are one clear line and exit code 2."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from attnmt.cli import main


def test_sigterm_finishes_requests_in_flight(serve_run, toy_translator, serve_process):
    # 2 x 64 sentences in batches of 2: a window of 64 model calls in which both requests are in
    # flight with sentences queued, wide enough for the polling below even on a fast, idle host
    server = serve_process(serve_run, "--max-batch-sentences", "2")
    texts = [f"Hund katze {w} haus baum auto mann frau ." for w in "rot blau groß klein".split()] * 16  # 64
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(httpx.post, server.url + "/v1/translate", timeout=300,
                                   json={"texts": texts, "beam_size": 4, "attention": False}) for _ in range(2)]
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # both arrived, sentences still waiting
                health = httpx.get(server.url + "/health", timeout=30).json()
                if health["in_flight"] == 2 and health["queued"] > 0:
                    break
                time.sleep(0.01)
            else:
                pytest.fail(f"the requests never were all in flight: {health}")
            server.signal(signal.SIGTERM)
            answers = [f.result() for f in futures]
        code, log = server.wait()
    finally:
        server.stop()
    expected = [r.text for r in toy_translator.translate(texts[:4], beam_size=4)] * (len(texts) // 4)
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert [t["text"] for t in answer.json()["translations"]] == expected
    assert code == 0, log
    assert "Shutting down" in log and "stopped after" in log and "Traceback" not in log
    with pytest.raises(httpx.TransportError):
        httpx.get(server.url + "/health", timeout=5)


def test_ctrl_c_exits_0_and_binds_loopback(serve_run, serve_process):
    server = serve_process(serve_run)
    try:
        server.signal(signal.SIGINT)
        code, log = server.wait()
    finally:
        server.stop()
    assert code == 0, log
    assert f"open http://127.0.0.1:{server.port}/" in log


def test_bad_arguments_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["serve", str(tmp_path)]) == 2
    assert "no config.json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # argparse checks the value
        main(["serve", str(tmp_path), "--max-batch-sentences", "0"])
    assert exit_.value.code == 2
    assert "argument --max-batch-sentences: 0 must be a positive integer" in capsys.readouterr().err

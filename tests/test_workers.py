"""workers.py and `--workers`: decoding in several processes gives what one Translator gives, in
input order; a failing or killed worker is a clean AttnmtError that leaves no process behind."""

from __future__ import annotations

import multiprocessing
import json
import os
import re
import shutil
import signal
import sys

import pytest

from support import toy
from attnmt.cli import main
from attnmt import workers as workers_module
from attnmt.errors import AttnmtError
from attnmt.translator import Translator
from attnmt.sharding import usable_cpus
from attnmt.workers import WorkerPool, deal

# 30 sentences of 0 to 9 toy words, lengths mixed so that sorting moves them around
SENTENCES = [" ".join(toy.SRC_WORDS[(i * 5 + j) % len(toy.SRC_WORDS)] for j in range((i * 7) % 10)) + " ."
             for i in range(29)] + [""]

# the CLI refuses more workers than CPUs (the library does not: its tests run on one CPU too)
needs_two_cpus = pytest.mark.skipif(usable_cpus() < 2, reason="--workers 2 needs 2 CPUs")


def _workers() -> set[int]:
    """The pids of this process's live decoding workers (the module's shared pool's included)."""
    return {p.pid for p in multiprocessing.active_children() if p.name.startswith("attnmt-worker")}


@pytest.fixture(scope="module")
def pool(toy_run):
    with WorkerPool(toy_run, workers=2, threads=1) as running:
        yield running
    assert not _workers()


def test_deal_shares_the_length_sorted_input_in_turn():
    parts = deal(["a b c", "a", "", "a b", "a b c d", "a b c d e"], 2)
    assert parts == [[2, 3, 4], [1, 0, 5]]  # lengths 0 1 2 3 4 5 are sentences 2 1 3 0 4 5
    assert deal(["x"], 3) == [[0], [], []]


@pytest.mark.parametrize("beam", [1, 3])
def test_two_workers_translate_as_one_translator(pool, toy_run, beam):
    expected = Translator.load(toy_run, device="cpu").translate(SENTENCES, beam_size=beam, batch_size=4, n_best=beam)
    found = pool.translate(SENTENCES, beam_size=beam, batch_size=4, n_best=beam)
    # input order: each its own source, as the model read it (a lower-case line in the training data's case)
    assert [r.source_tokens for r in found] == [(w.read_as or s).split() for s, w in zip(SENTENCES, expected)]
    assert [r.read_as for r in found] == [r.read_as for r in expected]
    for got, want in zip(found, expected):
        assert got.tokens == want.tokens and got.text == want.text
        assert got.score == pytest.approx(want.score, abs=1e-5)
        assert got.attention == pytest.approx(want.attention, abs=1e-5)
        # other batches pad differently: the sums may differ in the last float bits
        assert [a.score for a in got.alternatives] == pytest.approx([a.score for a in want.alternatives], abs=1e-5)
        assert [a.tokens for a in got.alternatives] == [a.tokens for a in want.alternatives]


def test_per_sentence_options_follow_their_sentences(pool, toy_run):
    prefixes = ["dog" if i % 3 == 0 else None for i in range(len(SENTENCES))]
    found = pool.translate(SENTENCES, beam_size=2, target_prefix=prefixes)
    expected = Translator.load(toy_run, device="cpu").translate(SENTENCES, beam_size=2, target_prefix=prefixes)
    assert [r.tokens for r in found] == [r.tokens for r in expected]
    assert all(r.tokens[:1] == ["dog"] for r, p in zip(found, prefixes) if p)


def test_a_failed_call_names_the_worker_and_the_pool_goes_on(pool):
    with pytest.raises(AttnmtError, match=r"decoding worker [01] \(pid \d+\) failed: ValueError: beam_size=0"):
        pool.translate(SENTENCES, beam_size=0)
    assert len(pool.translate(SENTENCES[:3], beam_size=1)) == 3  # the failed call's answers are dropped


def test_a_worker_that_cannot_load_is_an_error_and_no_worker_is_left(toy_run):
    before = _workers()
    with pytest.raises(AttnmtError, match=r"decoding worker \d \(pid \d+\) failed: .*no-such-checkpoint"):
        with WorkerPool(toy_run, workers=2, threads=1, checkpoint="no-such-checkpoint"):
            pass
    assert _workers() == before


def test_a_killed_worker_is_an_error_not_a_hang(toy_run):
    before = _workers()
    with pytest.raises(AttnmtError, match=r"decoding worker 1 \(pid \d+\) exited with code -9"):
        with WorkerPool(toy_run, workers=2, threads=1) as running:
            victim = next(p for p in multiprocessing.active_children()
                          if p.name == "attnmt-worker-1" and p.pid not in before)
            os.kill(victim.pid, signal.SIGKILL)
            victim.join()
            running.translate(SENTENCES, beam_size=1)
    assert _workers() == before


def test_cli_refuses_more_workers_than_cpus(toy_run, capsys, monkeypatch):
    monkeypatch.setattr(workers_module, "usable_cpus", lambda: 3)
    assert main(["translate", str(toy_run), "--workers", "4"]) == 2
    assert "--workers 4: this process may use 3 CPU(s)" in capsys.readouterr().err


@needs_two_cpus
def test_cli_translate_with_workers_writes_the_same_file(toy_run, tmp_path):
    before = _workers()
    source = tmp_path / "in.de"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    outputs = {}
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}.en"
        assert main(["translate", str(toy_run), "-i", str(source), "-o", str(out), "--beam", "2",
                     "--workers", workers, "--threads", "1", "--shard-lines", "16"]) == 0
        outputs[workers] = out.read_text(encoding="utf-8")
    assert outputs["1"] == outputs["2"] and outputs["1"].count("\n") == len(SENTENCES)
    assert _workers() == before


@needs_two_cpus
def test_cli_evaluate_with_workers_gives_the_same_report(toy_run, tmp_path, capsys):
    run = shutil.copytree(toy_run, tmp_path / "run")  # evaluate writes its report into the run
    reports = []
    for workers in ("1", "2"):
        assert main(["evaluate", str(run), "--split", "test", "--beam", "2", "--workers", workers]) == 0
        reports.append(json.loads(capsys.readouterr().out))
    for report in reports:
        report.pop("seconds")
    assert reports[0].pop("workers") == 1 and reports[1].pop("workers") == 2
    assert reports[0] == reports[1] and reports[0]["sentences"] > 0


@pytest.mark.parametrize("argv,message", [
    ("translate {run} --workers 0", r"argument --workers: 0 must be a positive integer"),
    ("translate {run} --workers 65", r"argument --workers: 65 must be at most 64"),
    ("evaluate {run} --workers 65", r"argument --workers: 65 must be at most 64"),
    ("translate {run} --workers 2 --engine ctranslate2",
     r"--workers is the native engine's.*ATTNMT_CT2_INTER_THREADS"),
    ("evaluate {run} --workers 2 --engine ctranslate2",
     r"--workers is the native engine's.*ATTNMT_CT2_INTER_THREADS"),
])
def test_cli_refuses_bad_workers_in_one_line(argv, message, toy_run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("hund .\n"))
    try:
        code = main(argv.format(run=toy_run).split(" "))
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    verb = argv.split(" ")[0]
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"attnmt {verb}: error: ")]
    assert len(lines) == 1 and re.search(message, lines[0]), err


def test_cli_refuses_workers_under_torchrun(toy_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert main(["translate", str(toy_run), "-i", str(tmp_path / "x"), "-o", str(tmp_path / "y"), "--workers", "2"]) == 2
    assert "--workers > 1 under torchrun" in capsys.readouterr().err and not (tmp_path / "y").exists()

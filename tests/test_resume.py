"""A run killed with SIGKILL mid-epoch and resumed ends exactly where an uninterrupted run ends."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from attnmt.checkpoint import load_train_state, load_weights_file
from attnmt.cli import main

TIMING_KEYS = {"tokens_per_s", "seconds"}


def metrics_without_timings(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]


def final_weights(run_dir):
    info = json.loads((run_dir / "last.json").read_text())
    return load_weights_file(run_dir / info["file"])


def test_sigkill_mid_epoch_then_resume_matches_uninterrupted_run(tmp_path, toy_config):
    settings = ["--set", "train.epochs=3", "--set", "train.save_every_steps=4", "--set", "train.num_threads=1",
                "--set", "model.dropout=0.2", "--set", "train.log_every=5"]
    straight = tmp_path / "straight"
    assert main(["train", str(toy_config), "--run-dir", str(straight), *settings]) == 0

    killed = tmp_path / "killed"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "attnmt", "train", str(toy_config), "--run-dir", str(killed),
                             *settings], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state_file, caught = killed / "train_state.pt", None
    deadline = time.time() + 120
    try:
        while time.time() < deadline and proc.poll() is None:
            if state_file.exists():
                counters = load_train_state(state_file)["counters"]
                if counters["epoch"] >= 1 and counters["batch_in_epoch"] > 0:
                    caught = counters
                    os.kill(proc.pid, signal.SIGKILL)
                    break
            time.sleep(0.02)
    finally:
        proc.wait(timeout=30)
    assert caught is not None, "the run finished before it could be killed mid-epoch"
    assert proc.returncode == -signal.SIGKILL

    assert main(["train", "--resume", str(killed)]) == 0
    a, b = final_weights(straight), final_weights(killed)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)
    assert metrics_without_timings(straight) == metrics_without_timings(killed)


def test_a_finished_run_extended_with_more_epochs_matches_a_longer_run(tmp_path, toy_config):
    settings = ["--set", "train.num_threads=1", "--set", "model.dropout=0.2"]
    longer = tmp_path / "longer"
    assert main(["train", str(toy_config), "--run-dir", str(longer), "--set", "train.epochs=2", *settings]) == 0
    extended = tmp_path / "extended"
    assert main(["train", str(toy_config), "--run-dir", str(extended), "--set", "train.epochs=1", *settings]) == 0
    assert main(["train", "--resume", str(extended)]) == 0  # nothing left: trains nothing, changes nothing
    assert main(["train", "--resume", str(extended), "--set", "train.epochs=2"]) == 0

    a, b = final_weights(longer), final_weights(extended)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)
    assert metrics_without_timings(longer) == metrics_without_timings(extended)
    assert json.loads((extended / "config.json").read_text())["train"]["epochs"] == 2


def test_resume_refuses_changes_to_what_is_trained(tmp_path, toy_config, capsys):
    run = tmp_path / "run"
    assert main(["train", str(toy_config), "--run-dir", str(run), "--set", "train.epochs=1"]) == 0
    before = (run / "config.json").read_text()
    assert main(["train", "--resume", str(run), "--set", "train.lr=1"]) == 2
    err = capsys.readouterr().err
    assert "--set train.lr cannot change a run that is being resumed" in err and "train.epochs" in err
    assert main(["train", "--resume", str(run), "--set", "train.epochs=zero"]) == 2
    assert "train.epochs" in capsys.readouterr().err
    assert (run / "config.json").read_text() == before

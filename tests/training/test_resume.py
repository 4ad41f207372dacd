"""A run killed with SIGKILL, or stopped by its time budget, mid-epoch and resumed ends exactly
where an uninterrupted run ends: the RNN with Adam, a constant rate and sentence batches, and the
Transformer with AdamW, inverse-sqrt warmup or plateau, and token batches."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import attnmt.training.loop as loop
import attnmt.training.compiled_step as step  # make_update_step looks train_step up there
from attnmt.checkpoint import load_train_state
from attnmt.cli import main
from attnmt.translator import Translator

from support import toy
from support.runs import assert_same_end, metrics_without_timings

def test_sigkill_mid_epoch_then_resume_matches_uninterrupted_run(tmp_path, toy_config):
    settings = ["--set", "train.epochs=3", "--set", "train.save_every_steps=4", "--set", "train.num_threads=1",
                "--set", "model.dropout=0.2", "--set", "train.log_every=5"]
    straight = tmp_path / "straight"
    assert main(["train", str(toy_config), "--run-dir", str(straight), *settings]) == 0

    killed = tmp_path / "killed"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "attnmt", "train", str(toy_config), "--run-dir", str(killed),
                             *settings], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state_file, caught = killed / "train_state.json", None
    deadline = time.time() + 120
    try:
        while time.time() < deadline and proc.poll() is None:
            if state_file.exists():
                counters = json.loads(state_file.read_text())["state"]["counters"]  # replaced atomically
                if counters["epoch"] >= 1 and counters["update_in_epoch"] > 0:
                    caught = counters
                    os.kill(proc.pid, signal.SIGKILL)
                    break
            time.sleep(0.02)
    finally:
        proc.wait(timeout=30)
    assert caught is not None, "the run finished before it could be killed mid-epoch"
    assert proc.returncode == -signal.SIGKILL

    assert main(["train", "--resume", str(killed)]) == 0
    assert_same_end(straight, killed)
    assert metrics_without_timings(straight) == metrics_without_timings(killed)


def test_a_finished_run_extended_with_more_epochs_matches_a_longer_run(tmp_path, toy_config):
    settings = ["--set", "train.num_threads=1", "--set", "model.dropout=0.2"]
    longer = tmp_path / "longer"
    assert main(["train", str(toy_config), "--run-dir", str(longer), "--set", "train.epochs=2", *settings]) == 0
    extended = tmp_path / "extended"
    assert main(["train", str(toy_config), "--run-dir", str(extended), "--set", "train.epochs=1", *settings]) == 0
    assert main(["train", "--resume", str(extended)]) == 0  # nothing left: trains nothing, changes nothing
    assert main(["train", "--resume", str(extended), "--set", "train.epochs=2"]) == 0

    assert_same_end(longer, extended)
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


SETUPS = {
    "rnn-adam-constant-sentences": ["model.dropout=0.2"],
    "transformer-adamw-inverse_sqrt-tokens": [
        "model.arch=transformer", "model.d_model=16", "model.heads=2", "model.ff_dim=32", "model.enc_layers=1",
        "model.dec_layers=1", "model.dropout=0.1", "train.optimizer=adamw", "train.weight_decay=0.01",
        "train.schedule=inverse_sqrt", "train.warmup_steps=10", "train.batch_by=tokens", "train.batch_size=120",
        "train.lr=5e-3"],
    "transformer-adam-plateau-tokens": [
        "model.arch=transformer", "model.d_model=16", "model.heads=2", "model.ff_dim=32", "model.enc_layers=1",
        "model.dec_layers=1", "model.dropout=0.1", "train.schedule=plateau", "train.plateau_patience=0",
        "train.plateau_factor=0.5", "train.early_stopping_metric=loss", "train.batch_by=tokens",
        "train.batch_size=120", "train.lr=5e-2"],
}


def stop_budget_after(monkeypatch, updates):
    """From the `updates`-th update on, the training loop's clock says the time budget is spent."""
    original, calls = step.train_step, {"n": 0}

    def counting_step(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)

    clock = lambda: 0.0 if calls["n"] < updates else 1e9  # noqa: E731
    monkeypatch.setattr(step, "train_step", counting_step)
    monkeypatch.setattr(loop, "time", type("FakeTime", (), {"perf_counter": staticmethod(clock)}))


@pytest.mark.parametrize("setup", list(SETUPS))
def test_time_budget_stop_mid_epoch_then_resume_matches_uninterrupted_run(tmp_path, toy_config, monkeypatch, setup):
    settings = ["train.num_threads=1", "train.save_every_steps=1000", "train.log_every=7", "data.train_subset=200",
                *SETUPS[setup]]
    sets = toy.sets(settings)
    straight = tmp_path / "straight"
    assert main(["train", str(toy_config), "--run-dir", str(straight), "--set", "train.epochs=3", *sets]) == 0
    rows = metrics_without_timings(straight)
    per_epoch = [r["step"] for r in rows if r["event"] == "epoch"][0]
    assert [r["step"] for r in rows if r["event"] == "epoch"] == [per_epoch, 2 * per_epoch, 3 * per_epoch]

    # Two epochs with a budget that runs out 5 updates into epoch 2, then extended to three.
    cut = tmp_path / "cut"
    stop_budget_after(monkeypatch, per_epoch + 5)
    assert main(["train", str(toy_config), "--run-dir", str(cut), "--set", "train.epochs=2",
                 "--set", "train.max_minutes=1", *sets]) == 0
    monkeypatch.undo()
    counters = load_train_state(cut)["counters"]
    assert (counters["epoch"], counters["update_in_epoch"], counters["step"]) == (1, 5, per_epoch + 5)
    stop = [r for r in metrics_without_timings(cut) if r["event"] == "stop"]
    assert len(stop) == 1 and stop[0]["update_in_epoch"] == 5 and stop[0]["updates_in_epoch"] == per_epoch
    last = json.loads((cut / "last.json").read_text())
    assert last["complete"] is False and last["step"] == per_epoch + 5 and "val_bleu" in last
    assert Translator.load(cut, checkpoint="last").translate(["hund ."], beam_size=1)[0].text  # evaluable
    # the end record names the epoch best.json points at, the unfinished one included when it scored best
    best, end = json.loads((cut / "best.json").read_text()), metrics_without_timings(cut)[-1]
    assert end["event"] == "end" and end["best_epoch"] == best["epoch"], (end, best)

    assert main(["train", "--resume", str(cut), "--set", "train.epochs=3", "--set", "train.max_minutes=null"]) == 0
    assert_same_end(straight, cut)
    assert metrics_without_timings(straight) == metrics_without_timings(cut)
    assert json.loads((straight / "best.json").read_text())["file"] == json.loads((cut / "best.json").read_text())["file"]


def test_a_used_run_directory_is_refused_unless_resumed_or_overwritten(tmp_path, toy_config, capsys):
    run = tmp_path / "run"
    fast = ["--set", "train.epochs=1", "--set", "data.train_subset=64"]
    assert main(["train", str(toy_config), "--run-dir", str(run), *fast]) == 0
    (run / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["train", str(toy_config), "--run-dir", str(run), *fast]) == 2
    err = capsys.readouterr().err
    assert f"{run} already holds a run" in err and f"--resume {run}" in err and "--overwrite" in err
    assert "Traceback" not in err
    assert main(["train", "--resume", str(run), "--overwrite"]) == 2
    assert "cannot be combined with --resume" in capsys.readouterr().err

    assert main(["train", str(toy_config), "--run-dir", str(run), "--overwrite", *fast]) == 0
    events = [r["event"] for r in metrics_without_timings(run)]
    assert events == ["start", "epoch", "end"]  # one run, not appended to the old log
    assert (run / "notes.txt").read_text() == "mine"  # --overwrite deletes only what a run writes

    interrupted = tmp_path / "interrupted"  # config and state, but no metrics: still a run
    interrupted.mkdir()
    for name in ("config.json", "train_state.json"):
        (run / name).rename(interrupted / name) if name == "train_state.json" else \
            (interrupted / name).write_text((run / name).read_text())
    assert main(["train", str(toy_config), "--run-dir", str(interrupted), *fast]) == 2
    assert "already holds a run (config.json, train_state.json)" in capsys.readouterr().err


def test_validation_every_n_updates_and_max_updates_and_a_resume_between_them(tmp_path, toy_config):
    """train.validate_every=5 validates and checkpoints at every 5th update as well as at epoch
    ends, train.max_updates ends the run with a checkpoint; a run stopped at update 15 and resumed
    to 23 is the run that went to 23 at once, record for record and weight for weight."""
    settings = toy.sets(["train.num_threads=1", "data.train_subset=200", "model.dropout=0.2", "train.epochs=10",
                         "train.validate_every=5", "train.keep_last=3", "train.log_every=4"])
    straight = tmp_path / "straight"
    assert main(["train", str(toy_config), "--run-dir", str(straight), "--set", "train.max_updates=23", *settings]) == 0
    rows = metrics_without_timings(straight)
    per_epoch = next(r["step"] for r in rows if r["event"] == "epoch")  # 200 pairs in batches of 16: 13 updates
    assert per_epoch == 13
    validated = [(r["event"], r["step"]) for r in rows if r["event"] in ("epoch", "validate")]
    assert validated == [("validate", 5), ("validate", 10), ("epoch", 13), ("validate", 15), ("validate", 20),
                         ("validate", 23)]
    assert rows[-1]["event"] == "end" and rows[-1]["epochs"] == 1
    kept = sorted(p.name for p in (straight / "checkpoints").glob("*_*.safetensors") if "train_state" not in p.name)
    assert kept == ["step_0000015.safetensors", "step_0000020.safetensors", "step_0000023.safetensors"]
    assert json.loads((straight / "last.json").read_text())["file"] == "checkpoints/step_0000023.safetensors"

    stopped = tmp_path / "stopped"
    assert main(["train", str(toy_config), "--run-dir", str(stopped), "--set", "train.max_updates=15", *settings]) == 0
    assert main(["train", "--resume", str(stopped), "--set", "train.max_updates=23"]) == 0
    assert_same_end(straight, stopped)
    assert metrics_without_timings(straight) == metrics_without_timings(stopped)

    assert main(["average", str(straight), "--last", "2"]) == 0
    assert json.loads((straight / "average.json").read_text())["from"] == ["step_0000020.safetensors",
                                                                            "step_0000023.safetensors"]

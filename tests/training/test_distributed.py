"""Data-parallel training on 2 CPU ranks (gloo): the same weights as one process accumulating the
same batches, exact resume after every rank is killed, a failing rank ends the whole job, and the
run directory is an ordinary one. Every multi-process run has a hard timeout.

The ranks are forked from the test process (torch is already imported, so they start in well
under a second), with torchrun's environment variables set by hand; one test runs torchrun itself
through the real command line."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
# What the ranks import lazily is imported once here, so that forked ranks do not each import it.
import safetensors.torch  # noqa: F401,E402
import sacrebleu.metrics  # noqa: F401,E402
import sacremoses  # noqa: F401,E402
import tqdm.auto  # noqa: F401,E402
from torch.nn.parallel import DistributedDataParallel  # noqa: F401,E402

import attnmt
import attnmt.training.compiled_step as step_module  # where make_update_step looks train_step up
from attnmt.checkpoint import load_train_state, load_weights_file
from attnmt.cli import main
from attnmt.config import load_config
from attnmt.data.epochs import shard_update
from attnmt.world import init_world
from attnmt.errors import AttnmtError, ConfigError
from attnmt.translator import Translator

from support import toy
from support.ranks import RANKS_TIMEOUT_S, run_ranks  # noqa: F401 (RANKS_TIMEOUT_S: the tests' limit)


TIMING_KEYS = {"tokens_per_s", "seconds", "data_wait"}
TINY_TRANSFORMER = ["model.arch=transformer", "model.d_model=16", "model.heads=2", "model.ff_dim=32",
                    "model.enc_layers=1", "model.dec_layers=1", "train.batch_by=tokens", "train.batch_size=100"]
# 320 pairs in 16-sentence batches: 20 batches, 10 updates of 2 batches an epoch.
BASE = ["train.num_threads=1", "data.train_subset=320", "train.log_every=3", "model.dropout=0.0"]


def train_cli(rank, argv):
    return main(argv)


def kill_every_rank_at_update(rank, argv, update):
    """Every rank SIGKILLs itself when it reaches `update`, as if the machine went down."""
    original, calls = step_module.train_step, {"n": 0}

    def step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == update:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    step_module.train_step = step
    return main(argv)


def weights(path):
    return load_weights_file(path)


def assert_same_weights(a, b, tol):
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=tol, atol=tol, msg=name)


def metrics_without_timings(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]


@pytest.fixture(scope="module")
def toy_yaml(tmp_path_factory):
    return toy.write_config(tmp_path_factory.mktemp("dist") / "toy.yaml")


@pytest.fixture(scope="module")
def two_rank_run(toy_yaml):
    """An uninterrupted 2-rank RNN run: 2 epochs of 10 updates, dropout on (per-rank masks)."""
    run_dir = toy_yaml.parent / "two_ranks"
    argv = ["train", str(toy_yaml), "--run-dir", str(run_dir),
            *toy.sets([*BASE, "train.epochs=2", "model.dropout=0.2", "train.save_every_steps=4"])]
    assert run_ranks(train_cli, argv) == [0, 0]
    return run_dir


def test_shard_update_gives_every_rank_its_own_equal_token_balanced_share():
    tokens = [10, 2, 8, 4, 6, 6, 3, 9]  # the target tokens of an update's 8 batches
    shares = shard_update(tokens, 2)
    assert [len(s) for s in shares] == [4, 4]
    assert sorted(i for s in shares for i in s) == list(range(8))  # disjoint, and together the whole update
    assert [sum(tokens[i] for i in s) for s in shares] == [24, 24]  # 10 6 6 2 | 9 8 4 3: an exact half of 48
    assert shard_update(tokens, 2) == shares  # the same on every rank
    with pytest.raises(ValueError, match="7 batches cannot be shared equally by 2 ranks"):
        shard_update(tokens[:7], 2)


def test_accum_steps_and_backend_are_validated_naming_the_key(toy_yaml, monkeypatch):
    with pytest.raises(ConfigError, match=r"train.accum_steps=0 must be positive"):
        load_config(toy_yaml, ["train.accum_steps=0"])
    with pytest.raises(ConfigError, match=r"train.backend='mpi' is not one of 'auto', 'gloo', 'nccl'"):
        load_config(toy_yaml, ["train.backend=mpi"])
    assert init_world("auto", torch.device("cpu"))[0].distributed is False  # no torchrun: no process group
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(AttnmtError, match=r"train.backend='nccl' needs CUDA devices, but train.device is cpu"):
        init_world("nccl", torch.device("cpu"))


def test_an_update_larger_than_an_epoch_is_refused(toy_yaml, tmp_path):
    from attnmt.training import train

    cfg = load_config(toy_yaml, ["train.epochs=1", "data.train_subset=32", "train.accum_steps=3"])  # 2 batches
    with pytest.raises(AttnmtError, match=r"an epoch has 2 batches, fewer than one update takes \(1 ranks x "
                                          r"train.accum_steps=3\)"):
        train(cfg, tmp_path / "run")


@pytest.mark.parametrize("arch", ["rnn", "transformer"])
def test_two_ranks_train_what_one_process_accumulating_two_batches_trains(toy_yaml, tmp_path, arch):
    extra = [*BASE, "train.epochs=1", *(TINY_TRANSFORMER if arch == "transformer" else [])]
    ranks = tmp_path / "ranks"
    assert run_ranks(train_cli, ["train", str(toy_yaml), "--run-dir", str(ranks), *toy.sets(extra)]) == [0, 0]
    single = tmp_path / "single"
    assert main(["train", str(toy_yaml), "--run-dir", str(single), *toy.sets([*extra, "train.accum_steps=2"])]) == 0
    assert not torch.distributed.is_initialized()  # plain `attnmt train`: no process group

    steps = [r["step"] for r in metrics_without_timings(ranks) if r["event"] == "epoch"]
    assert steps == [r["step"] for r in metrics_without_timings(single) if r["event"] == "epoch"]
    assert steps[0] >= 10
    assert_same_weights(weights(ranks / "checkpoints/epoch_001.safetensors"),
                        weights(single / "checkpoints/epoch_001.safetensors"), tol=1e-5)
    loss_ranks = [r["loss"] for r in metrics_without_timings(ranks) if r["event"] == "train"]
    loss_single = [r["loss"] for r in metrics_without_timings(single) if r["event"] == "train"]
    assert loss_ranks == pytest.approx(loss_single, abs=2e-4)  # the global loss, logged once by rank 0
    start = metrics_without_timings(ranks)[0]
    assert start["event"] == "start" and start["ranks"] == 2


def test_killing_every_rank_mid_epoch_then_resuming_matches_the_uninterrupted_run(two_rank_run, tmp_path):
    argv = ["train", str(two_rank_run.parent / "toy.yaml"), "--run-dir", str(tmp_path / "killed"),
            *toy.sets([*BASE, "train.epochs=2", "model.dropout=0.2", "train.save_every_steps=4"])]
    codes = run_ranks(kill_every_rank_at_update, argv, 14)  # update 14: epoch 2, after the save at step 12
    assert codes == [-signal.SIGKILL, -signal.SIGKILL]
    counters = load_train_state(tmp_path / "killed")["counters"]
    assert (counters["epoch"], counters["update_in_epoch"], counters["step"]) == (1, 2, 12)

    assert run_ranks(train_cli, ["train", "--resume", str(tmp_path / "killed")]) == [0, 0]
    assert_same_weights(weights(two_rank_run / "checkpoints/epoch_002.safetensors"),
                        weights(tmp_path / "killed" / "checkpoints/epoch_002.safetensors"), tol=1e-6)
    assert metrics_without_timings(two_rank_run) == metrics_without_timings(tmp_path / "killed")


def test_resuming_on_another_number_of_ranks_is_refused_naming_both(two_rank_run, capsys):
    assert main(["train", "--resume", str(two_rank_run)]) == 2
    err = capsys.readouterr().err
    assert "was trained on 2 rank(s) and is being resumed on 1" in err and "--nproc-per-node 2" in err


def test_a_run_trained_on_two_ranks_is_an_ordinary_run_directory(two_rank_run, capsys):
    translator = Translator.load(two_rank_run)
    assert translator.translate(["Hund ."], beam_size=2)[0].text
    capsys.readouterr()
    assert main(["evaluate", str(two_rank_run), "--split", "test", "--beam", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["sentences"] == 40
    assert main(["average", str(two_rank_run), "--last", "2"]) == 0


FAILING_WORKER = """
import os, sys, time
import attnmt.training.compiled_step as training  # make_update_step looks train_step up there
from attnmt.cli import main

original, calls = training.train_step, {"n": 0}

def step(*args, **kwargs):
    calls["n"] += 1
    if os.environ["RANK"] == "1" and calls["n"] == 3:
        with open(os.environ["FAILED_AT_FILE"], "w") as handle:
            handle.write(repr(time.time()))
        raise RuntimeError("rank 1 fails at update 3")
    return original(*args, **kwargs)

training.train_step = step
sys.exit(main(sys.argv[1:]))
"""


def test_a_failing_rank_ends_the_whole_torchrun_job(toy_yaml, tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text(FAILING_WORKER)
    src = str(Path(attnmt.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
               FAILED_AT_FILE=str(tmp_path / "failed_at"), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(worker),
           "train", str(toy_yaml), "--run-dir", str(tmp_path / "run"), *toy.sets([*BASE, "train.epochs=3"])]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=240)  # torchrun and 2 ranks start slowly on a busy machine
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the torchrun job did not end within 240 s")
    ended = time.time()
    assert proc.returncode != 0
    assert "rank 1 fails at update 3" in output  # the failing rank's error is printed
    failed_at = float((tmp_path / "failed_at").read_text())
    assert ended - failed_at < 60, f"the job ended {ended - failed_at:.0f} s after rank 1 failed"

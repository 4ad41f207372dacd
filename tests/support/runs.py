"""What the training tests compare between two runs: their metrics without timings, their final
weights and training states, bit for bit (a resumed run, a run on two ranks, against the run
that went straight through)."""

from __future__ import annotations

import json

import torch

from attnmt.checkpoint import load_train_state, load_weights_file


TIMING_KEYS = {"tokens_per_s", "seconds", "data_wait"}


def metrics_without_timings(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]


def final_weights(run_dir):
    info = json.loads((run_dir / "last.json").read_text())
    return load_weights_file(run_dir / info["file"])


def assert_same_weights(a, b):
    """Bit for bit (the CPU, where these runs train: the sweep saw equality, not closeness)."""
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name


UNTIMED = {"seconds", "metrics_bytes"}  # how long it ran, and the log's length (its timings' digits)


def assert_same_state(a, b, where="state"):
    """Two final training states equal bit for bit: optimizer moments, schedules, random states,
    the running and best losses as floats (metrics.jsonl rounds losses to 4 decimals)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a.keys() - UNTIMED:
            assert_same_state(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} != {b!r}"


def assert_same_end(straight, other):
    assert_same_weights(final_weights(straight), final_weights(other))
    assert_same_state(load_train_state(straight), load_train_state(other))

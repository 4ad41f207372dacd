"""Checkpoints: atomic writes, safetensors round trip, clear errors, and no code execution."""

import os
import pickle

import pytest
import torch
from torch import nn

from attnmt.checkpoint import (
    atomic_write,
    average_weights,
    load_train_state,
    load_weights,
    save_train_state,
    save_weights,
)
from attnmt.errors import CheckpointError


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, 4)
        self.out = nn.Linear(4, 7)
        self.out.weight = self.embed.weight  # tied: safetensors must still save it


def test_weights_round_trip_with_tied_parameters(tmp_path):
    torch.manual_seed(0)
    model, other = Tied(), Tied()
    save_weights(model, tmp_path / "w.safetensors")
    load_weights(other, tmp_path / "w.safetensors")
    for (name, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        assert torch.equal(a, b), name
    assert other.out.weight is other.embed.weight


def test_truncated_checkpoint_names_the_file(tmp_path):
    save_weights(Tied(), tmp_path / "w.safetensors")
    data = (tmp_path / "w.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut.safetensors: not a readable safetensors checkpoint"):
        load_weights(Tied(), tmp_path / "cut.safetensors")
    with pytest.raises(CheckpointError, match=r"missing.safetensors: checkpoint not found"):
        load_weights(Tied(), tmp_path / "missing.safetensors")


def test_checkpoint_of_another_model_is_refused(tmp_path):
    save_weights(nn.Linear(3, 3), tmp_path / "w.safetensors")
    with pytest.raises(CheckpointError, match=r"w.safetensors: does not match the model"):
        load_weights(Tied(), tmp_path / "w.safetensors")


def test_crash_during_write_keeps_previous_file(tmp_path):
    target = tmp_path / "state.bin"
    atomic_write(target, lambda tmp: tmp.write_bytes(b"old"))

    def crash(tmp):
        tmp.write_bytes(b"half-written")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_write(target, crash)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.bin"]  # no temp file left behind


class Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_pickle_that_runs_code_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "train_state.pt"
    with open(path, "wb") as handle:
        pickle.dump({"optimizer": Evil()}, handle)
    with pytest.raises(CheckpointError, match=r"train_state.pt: refused or unreadable training state"):
        load_train_state(path)
    assert not (tmp_path / "PWNED").exists()


def test_train_state_round_trip(tmp_path):
    state = {"step": 3, "rng": torch.get_rng_state(), "opt": {"lr": 0.1, "m": torch.ones(2)}}
    save_train_state(tmp_path / "s.pt", state)
    back = load_train_state(tmp_path / "s.pt")
    assert back["step"] == 3 and torch.equal(back["rng"], state["rng"])


def test_average_weights(tmp_path):
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    save_weights(a, tmp_path / "a.safetensors")
    save_weights(b, tmp_path / "b.safetensors")
    mean = average_weights([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])
    assert torch.allclose(mean["weight"], (a.weight + b.weight).detach() / 2)

"""Checkpoints: atomic writes, safetensors round trip, clear errors, and no code execution."""

import json
import os
import pickle

import pytest
import torch
from torch import nn

from attnmt.checkpoint import (
    average_weights,
    convert_legacy_train_state,
    load_train_state,
    load_weights,
    save_train_state,
    save_weights,
)
from attnmt.errors import CheckpointError
from attnmt.files import atomic_write


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


def test_old_pickle_train_state_gets_a_clear_error_and_nothing_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open(tmp_path / "train_state.pt", "wb") as handle:
        pickle.dump({"optimizer": Evil()}, handle, protocol=2)  # the protocol torch.load expects
    with pytest.raises(CheckpointError, match=r"train_state.pt: a training state in the old pickle format.*"
                                              r"convert_legacy_train_state"):
        load_train_state(tmp_path)
    # The converter reads it with weights_only=True, which refuses the code.
    with pytest.raises(CheckpointError, match=r"train_state.pt: refused or unreadable training state"):
        convert_legacy_train_state(tmp_path)
    assert not (tmp_path / "PWNED").exists()


def test_old_train_state_converts_and_loads_without_pickle(tmp_path):
    opt = torch.optim.Adam([nn.Parameter(torch.ones(3))], lr=0.1)
    opt.param_groups[0]["params"][0].grad = torch.ones(3)
    opt.step()
    rng = torch.get_rng_state()
    torch.save({"weights": "checkpoints/epoch_001.safetensors", "optimizer": opt.state_dict(),
                "schedule": {"last_epoch": 4}, "counters": {"epoch": 1, "batch_in_epoch": 7},
                "rng_cpu": rng}, tmp_path / "train_state.pt")
    convert_legacy_train_state(tmp_path)
    back = load_train_state(tmp_path)
    assert back["counters"] == {"epoch": 1, "update_in_epoch": 7} and back["world_size"] == 1
    assert torch.equal(back["rng"]["cpu"][0], rng)
    assert torch.equal(back["optimizer"]["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])


def test_train_state_is_safetensors_and_json_and_round_trips(tmp_path):
    opt = torch.optim.AdamW([nn.Parameter(torch.ones(2, 3)), nn.Parameter(torch.zeros(4))], lr=0.1,
                            betas=(0.8, 0.9))
    for p in opt.param_groups[0]["params"]:
        p.grad = torch.full_like(p, 0.5)
    opt.step()
    state = {"step": 3, "best": float("-inf"), "rng": {"cpu": [torch.get_rng_state()]},
             "optimizer": opt.state_dict(), "info": {"file": "x", "nested": [1, 2.5, None, True]}}
    save_train_state(tmp_path, state)
    save_train_state(tmp_path, state)
    save_train_state(tmp_path, state)  # a third save deletes the first tensor file; the second stays
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "train_state_000002.safetensors", "train_state_000003.safetensors"]  # the newest and the previous state
    assert json.loads((tmp_path / "train_state.prev.json").read_text())["number"] == 2
    text = (tmp_path / "train_state.json").read_text()
    assert json.loads(text)["state"]["step"] == 3  # plain JSON, readable without attnmt
    back = load_train_state(tmp_path)
    assert back["step"] == 3 and back["best"] == float("-inf") and back["info"] == state["info"]
    assert torch.equal(back["rng"]["cpu"][0], state["rng"]["cpu"][0])
    saved_opt = opt.state_dict()
    assert back["optimizer"]["param_groups"] == saved_opt["param_groups"]  # int keys, tuples kept
    for index, moments in saved_opt["state"].items():
        for key, value in moments.items():
            assert torch.equal(back["optimizer"]["state"][index][key], value), (index, key)
    other = torch.optim.AdamW([nn.Parameter(torch.ones(2, 3)), nn.Parameter(torch.zeros(4))], lr=0.1)
    other.load_state_dict(back["optimizer"])  # accepted by torch as it is


def test_missing_tensor_file_of_a_train_state_is_named(tmp_path):
    save_train_state(tmp_path, {"m": torch.ones(2)})
    (tmp_path / "checkpoints" / "train_state_000001.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"train_state_000001.safetensors: checkpoint not found"):
        load_train_state(tmp_path)
    with pytest.raises(CheckpointError, match=r"train_state.json: training state not found"):
        load_train_state(tmp_path / "elsewhere")


def test_average_weights(tmp_path):
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    save_weights(a, tmp_path / "a.safetensors")
    save_weights(b, tmp_path / "b.safetensors")
    mean = average_weights([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])
    assert torch.allclose(mean["weight"], (a.weight + b.weight).detach() / 2)

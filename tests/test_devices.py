"""devices.resolve_device: a device that is accepted exists; anything else is refused by name."""

import pytest
import torch

from attnmt.devices import check_device_name, resolve_device
from attnmt.errors import AttnmtError


@pytest.fixture
def no_gpu(monkeypatch):
    """This machine as one without CUDA or MPS, whatever it really has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_cpu_and_auto_without_a_gpu(no_gpu):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cpu")


@pytest.mark.parametrize("name,message", [
    ("cuda", r"train.device='cuda' but no CUDA device is available"),
    ("cuda:0", r"train.device='cuda:0' but no CUDA device is available"),
    ("mps", r"train.device='mps' but no Apple MPS device is available"),
])
def test_missing_devices_are_refused_by_key(no_gpu, name, message):
    with pytest.raises(AttnmtError, match=message):
        resolve_device(name)
    with pytest.raises(AttnmtError, match=message.replace("train.device", "--device")):
        resolve_device(name, key="--device")


def test_cuda_index_must_exist(two_gpus):
    assert resolve_device("cuda:1") == torch.device("cuda:1")
    assert resolve_device("auto") == torch.device("cuda")
    with pytest.raises(AttnmtError, match=r"--device='cuda:2' but this machine has 2 CUDA device\(s\): cuda:0 to cuda:1"):
        resolve_device("cuda:2", key="--device")


@pytest.mark.parametrize("name", ["gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "mps:0", "", "cpu "])
def test_misspelled_names(name):
    with pytest.raises(AttnmtError, match=r"must be auto, cpu, cuda, cuda:N or mps"):
        check_device_name(name)
    with pytest.raises(AttnmtError, match=r"must be auto, cpu, cuda, cuda:N or mps"):
        resolve_device(name)


def test_translator_and_training_share_the_check(no_gpu, toy_run, toy_config, tmp_path):
    from attnmt.config import load_config
    from attnmt.training import train
    from attnmt.translator import Translator

    with pytest.raises(AttnmtError, match=r"device='mps' but no Apple MPS device"):
        Translator.load(toy_run, device="mps")
    assert Translator.load(toy_run, device="cpu").device == torch.device("cpu")
    cfg = load_config(toy_config, ["train.device=cuda"])
    with pytest.raises(AttnmtError, match=r"train.device='cuda' but no CUDA device"):
        train(cfg, tmp_path / "run")

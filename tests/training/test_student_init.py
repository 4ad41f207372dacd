"""A shrunk student: `train.init_from` with fewer Transformer layers than the init run starts from
a copy of some of its layers (shrink-and-fine-tune); the kept layers, the refusals, and what the
copy is worth on a toy task."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from hypothesis import given, strategies as st
from safetensors.torch import load_file

from support import toy

from attnmt.cli import main
from attnmt.config import config_from_dict
from attnmt.errors import ConfigError
from attnmt.run_dir import RunDir
from attnmt.training.init_from import kept_layers, resolve_init_from


@pytest.mark.parametrize("available, wanted, expected", [
    (3, 1, [0]), (3, 2, [0, 2]), (3, 3, [0, 1, 2]), (6, 2, [0, 5]), (6, 4, [0, 2, 3, 5]), (12, 4, [0, 4, 7, 11])])
def test_kept_layers_are_spread_with_the_first_and_last(available, wanted, expected):
    assert kept_layers(available, wanted) == expected


@given(st.integers(1, 48).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n))))
def test_kept_layers_are_distinct_in_order_and_in_range(pair):
    available, wanted = pair
    kept = kept_layers(available, wanted)
    assert len(kept) == wanted and kept == sorted(set(kept)) and kept[0] == 0
    assert 0 <= min(kept) and max(kept) < available
    assert wanted == 1 or kept[-1] == available - 1


def test_more_layers_than_the_run_cannot_be_kept():
    with pytest.raises(ValueError, match="cannot keep 4 of 3"):
        kept_layers(3, 4)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A 2+2-layer toy Transformer trained to copy (6 epochs); returns its config path and run."""
    base = tmp_path_factory.mktemp("shrink")
    config = toy.write_config(base / "teacher.yaml", arch="transformer", epochs=6)
    assert main(["train", str(config), "--run-dir", str(base / "teacher-run")]) == 0
    return config, base / "teacher-run"


def student_config(path, teacher_config, teacher_run, *, model: dict, train: dict):
    raw = yaml.safe_load(teacher_config.read_text(encoding="utf-8"))
    raw["model"] = {"arch": "transformer", "dropout": 0.0, **model}  # the other sizes come from the run
    raw["train"].update(init_from=str(teacher_run), **train)
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def test_a_shrunk_student_starts_from_the_kept_layers(teacher, tmp_path):
    """lr 1e-9: the student's weights after one epoch are those it started from, compared with
    the teacher's file read apart from attnmt."""
    config, run = teacher
    student = student_config(tmp_path / "student.yaml", config, run, model={"enc_layers": 1, "dec_layers": 1},
                             train={"lr": 1e-9, "epochs": 1, "init_checkpoint": "last"})
    assert main(["train", str(student), "--run-dir", str(tmp_path / "student")]) == 0
    saved = RunDir(tmp_path / "student")
    assert (saved.config().model.enc_layers, saved.config().model.dec_layers) == (1, 1)
    assert saved.config().model.d_model == 32  # taken from the run
    last = json.loads((run / "last.json").read_text())["file"]
    source = load_file(str(run / last))
    got = saved.load_model("last").state_dict()
    assert not any(name.startswith(("encoder_layers.1.", "decoder_layers.1.")) for name in got)
    for name, tensor in got.items():  # one of two layers kept: layer 0, under its own name
        assert torch.allclose(tensor, source[name], atol=1e-6), name
    assert not torch.allclose(source["decoder_layers.0.feed_forward.in_proj.weight"],
                              source["decoder_layers.1.feed_forward.in_proj.weight"])


def test_the_kept_layer_of_three_is_renumbered(tmp_path_factory):
    """A 1+3 run shrunk to 1+2 keeps decoder layers 0 and 2: the student's layer 1 is the run's 2."""
    base = tmp_path_factory.mktemp("renumber")
    config = toy.write_config(base / "corpus.yaml", arch="transformer", epochs=1, model={"enc_layers": 1, "dec_layers": 3})
    assert main(["train", str(config), "--run-dir", str(base / "t-run")]) == 0
    student = student_config(base / "s.yaml", config, base / "t-run", model={"dec_layers": 2},
                             train={"lr": 1e-9, "epochs": 1})
    assert main(["train", str(student), "--run-dir", str(base / "s")]) == 0
    best = json.loads((base / "t-run" / "best.json").read_text())["file"]
    source = load_file(str(base / "t-run" / best))
    got = RunDir(base / "s").load_model("last").state_dict()
    assert RunDir(base / "s").config().model.enc_layers == 1
    for name, tensor in got.items():
        origin = name.replace("decoder_layers.1.", "decoder_layers.2.")
        assert torch.allclose(tensor, source[origin], atol=1e-6), name


def test_more_layers_or_a_missing_checkpoint_are_refused_by_name(teacher, tmp_path, capsys):
    config, run = teacher
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    raw["model"] = {"arch": "transformer", "dec_layers": 4, "enc_layers": 1}
    raw["train"]["init_from"] = str(run)
    with pytest.raises(ConfigError, match=r"model.dec_layers=4 \(the run has 2; a Transformer may keep fewer"):
        resolve_init_from(config_from_dict(raw))
    student = student_config(tmp_path / "s.yaml", config, run, model={"dec_layers": 1},
                             train={"init_checkpoint": "average"})
    assert main(["train", str(student), "--run-dir", str(tmp_path / "s")]) != 0
    err = capsys.readouterr().err
    assert "train.init_checkpoint='average'" in err and "attnmt average" in err and "Traceback" not in err


def test_a_stray_tensor_in_a_shrunk_stack_is_refused_by_name(teacher, tmp_path, capsys):
    """A checkpoint file with a tensor under the decoder's layers whose index is no number: the
    shrink leaves it for the weight checks, which name it (no ValueError, no traceback)."""
    from safetensors.torch import save_file

    config, run = teacher
    last = json.loads((run / "last.json").read_text())["file"]
    tensors = load_file(str(run / last))
    tensors["decoder_layers.extra.weight"] = torch.zeros(2)
    save_file(tensors, str(tmp_path / "stray.safetensors"))
    student = student_config(tmp_path / "s.yaml", config, run, model={"dec_layers": 1},
                             train={"init_checkpoint": str(tmp_path / "stray.safetensors"), "epochs": 1})
    assert main(["train", str(student), "--run-dir", str(tmp_path / "s")]) != 0
    err = capsys.readouterr().err
    assert "decoder_layers.extra.weight" in err and "stray.safetensors" in err and "Traceback" not in err


@pytest.mark.learned
def test_a_student_from_its_teachers_layers_learns_faster_than_from_scratch(teacher, tmp_path):
    """One epoch of a 1+1 student: started from the 2+2 copier's kept layers it ends with a far
    lower val loss than the same student from random weights (the same data, steps and seed)."""
    config, run = teacher
    losses = {}
    for name, train in (("shrunk", {"init_from": str(run)}), ("scratch", {})):
        raw = yaml.safe_load(config.read_text(encoding="utf-8"))
        raw["model"].update(enc_layers=1, dec_layers=1)
        raw["train"].update(epochs=1, **train)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        assert main(["train", str(path), "--run-dir", str(tmp_path / name)]) == 0
        metrics = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        losses[name] = [m for m in metrics if "val_loss" in m][-1]["val_loss"]
    assert losses["shrunk"] < 0.5 * losses["scratch"], losses  # 0.18 and 0.10 (seeds 1, 2)

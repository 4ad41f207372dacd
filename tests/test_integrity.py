"""Nothing corrupt is trusted: every file a run writes and reads back is checked on load, a damaged
one is refused naming it (or, for --resume, skipped for the previous intact state), and a byte
changed anywhere in a run either is refused or changes nothing."""

import json
import re
import shutil

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

from attnmt.checkpoint import load_weights_file, save_tensors
from attnmt.cli import main
from attnmt.errors import AttnmtError, CheckpointError
from attnmt.translator import Translator
from support.fuzzing import fuzz

SENTENCES = ["Hund katze haus .", "Rot blau ball wasser .", "Klein ."]


def empty_input(run):
    """An empty line file beside the run (a device such as /dev/null is refused as input)."""
    path = run.parent / "empty.txt"
    path.write_text("")
    return path


@pytest.fixture
def run(toy_run, tmp_path):
    """A private copy of the session's toy run, free to damage."""
    return shutil.copytree(toy_run, tmp_path / "run")


def best_weights(run_dir):
    return run_dir / json.loads((run_dir / "best.json").read_text())["file"]


def flip(path, position, bit=0):
    data = bytearray(path.read_bytes())
    data[position] ^= 1 << bit
    path.write_bytes(bytes(data))


def cli_error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def translations(run_dir):
    return [(r.text, r.score) for r in Translator.load(run_dir).translate(SENTENCES, beam_size=2)]


# ----------------------------------------------------------------------------- weights

def test_a_flipped_byte_in_the_weights_is_refused_naming_the_file(run, capsys):
    weights = best_weights(run)
    flip(weights, weights.stat().st_size - 3)  # inside the last tensor's data
    err = cli_error(capsys, ["translate", str(run), "-i", str(empty_input(run))])
    assert weights.name in err and "corrupted" in err


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64, torch.int32, torch.bool])
@pytest.mark.parametrize("with_digest", [True, False])
def test_weights_of_another_dtype_are_refused_not_cast(run, dtype, with_digest):
    weights = best_weights(run)
    tensors = {name: t.to(dtype) for name, t in load_file(str(weights)).items()}
    if with_digest:
        save_tensors(tensors, weights)
    else:
        save_file(tensors, str(weights))
    pointer = json.loads((run / "best.json").read_text())
    pointer.pop("sha256")  # so that the dtype check itself is what refuses them
    (run / "best.json").write_text(json.dumps(pointer))
    with pytest.raises(CheckpointError, match=rf"is {dtype}, the model expects torch.float32"):
        Translator.load(run)


def test_weights_with_nan_are_refused(run):
    weights = best_weights(run)
    tensors = {name: torch.full_like(t, float("nan")) for name, t in load_file(str(weights)).items()}
    save_tensors(tensors, weights)
    pointer = json.loads((run / "best.json").read_text())
    pointer.pop("sha256")
    (run / "best.json").write_text(json.dumps(pointer))
    with pytest.raises(CheckpointError, match="holds NaN or infinite values"):
        Translator.load(run)


def test_a_pointer_to_other_valid_weights_is_refused(run):
    """best.json edited to name another epoch's (intact) weights: its recorded sha256 says no."""
    pointer = json.loads((run / "best.json").read_text())
    others = [p for p in (run / "checkpoints").glob("epoch_*.safetensors") if p.name not in pointer["file"]]
    pointer["file"] = f"checkpoints/{others[0].name}"
    (run / "best.json").write_text(json.dumps(pointer))
    with pytest.raises(CheckpointError, match="whose sha256 is not the one recorded here"):
        Translator.load(run)


@pytest.mark.parametrize("outside", ["../elsewhere.safetensors", "/etc/passwd", "checkpoints/../../x"])
def test_a_pointer_outside_the_run_is_refused_before_anything_is_opened(run, outside, monkeypatch):
    import attnmt.checkpoint

    opened = []
    monkeypatch.setattr(attnmt.checkpoint, "load_weights_file", lambda path: opened.append(path))
    (run / "best.json").write_text(json.dumps({"file": outside}))
    with pytest.raises(CheckpointError, match=f"names '{outside}', outside"):
        Translator.load(run)
    assert opened == []


def test_safetensors_digest_is_checked_against_an_independent_hash(tmp_path):
    """The digest covers names, dtypes, shapes and bytes: change any one and the file is refused."""
    tensors = {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.tensor(7, dtype=torch.int64)}
    path = tmp_path / "w.safetensors"
    save_tensors(tensors, path)
    assert torch.equal(load_weights_file(path)["a"], tensors["a"])
    raw = path.read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    for position in range(8 + header_len, len(raw)):  # every byte of the tensor data
        damaged = bytearray(raw)
        damaged[position] ^= 0x10
        path.write_bytes(bytes(damaged))
        with pytest.raises(CheckpointError, match="corrupted"):
            load_weights_file(path)


# ----------------------------------------------------------------------------- the run's other files

@pytest.mark.parametrize("name", ["config.json", "vocab.src.json", "vocab.tgt.json", "tokenizers.json"])
def test_a_changed_run_file_is_refused_naming_it(run, name, capsys):
    path = run / name
    text = path.read_text()
    path.write_text(text.replace("e", "a", 1) if "e" in text else text + " ")
    err = cli_error(capsys, ["translate", str(run), "-i", str(empty_input(run))])
    assert name in err and "sha256 does not match" in err and "delete its entry" in err


@pytest.mark.parametrize("settings_json", ['{"x": 1}', "[1]", '{"src": {"type": "moses"}, "tgt": 3}'])
def test_malformed_tokenizer_settings_get_one_line(run, settings_json, capsys):
    (run / "tokenizers.json").write_text(settings_json)
    (run / "checksums.json").unlink()  # a run from before checksums: the settings' own checks speak
    err = cli_error(capsys, ["translate", str(run), "-i", str(empty_input(run))])
    assert "tokenizers.json" in err


_INTACT: dict = {}


@fuzz(25, 1000)
@given(data=st.data())
def test_any_flipped_bit_in_a_run_is_refused_or_changes_nothing(toy_run, tmp_path_factory, data):
    """The files a translator reads (config, tokenizers, vocabularies, checksums, pointer, weights):
    one bit flipped anywhere either is refused with an attnmt error or translates exactly as before."""
    if "intact" not in _INTACT:  # the untouched run's translations, computed once
        _INTACT["intact"] = translations(toy_run)
    run = shutil.copytree(toy_run, tmp_path_factory.mktemp("mutated") / "run")
    names = ["config.json", "tokenizers.json", "vocab.src.json", "vocab.tgt.json", "checksums.json", "best.json",
             json.loads((run / "best.json").read_text())["file"]]
    path = run / data.draw(st.sampled_from(names), label="file")
    flip(path, data.draw(st.integers(0, path.stat().st_size - 1), label="byte"), data.draw(st.integers(0, 7)))
    try:
        after = translations(run)
    except AttnmtError:
        return
    assert after == _INTACT["intact"]


# ----------------------------------------------------------------------------- resume

def train_cli(config, run_dir, *sets):
    args = ["train", str(config), "--run-dir", str(run_dir)] if config else ["train", "--resume", str(run_dir)]
    for item in sets:
        args += ["--set", item]
    assert main(args) == 0


FAST = ("data.train_subset=96", "train.num_threads=1")


@pytest.mark.parametrize("damage", ["state json", "state tensors", "state weights"])
def test_resume_skips_a_damaged_newest_state_and_ends_as_an_uninterrupted_run(tmp_path, toy_config, damage, caplog):
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    train_cli(toy_config, straight, "train.epochs=3", *FAST)
    train_cli(toy_config, cut, "train.epochs=2", *FAST)
    state = json.loads((cut / "train_state.json").read_text())
    target = {"state json": cut / "train_state.json", "state tensors": cut / state["tensors"],
              "state weights": cut / state["state"]["weights"]}[damage]
    flip(target, target.stat().st_size - 20)
    with caplog.at_level("WARNING", logger="attnmt"):
        train_cli(None, cut, "train.epochs=3")
    assert any("newest training state is damaged" in r.message and "train_state.prev.json" in r.message
               for r in caplog.records)
    for name, tensor in load_weights_file(straight / "checkpoints" / "epoch_003.safetensors").items():
        torch.testing.assert_close(load_weights_file(cut / "checkpoints" / "epoch_003.safetensors")[name], tensor,
                                   rtol=1e-5, atol=1e-6, msg=name)


def test_resume_with_no_intact_state_names_both(tmp_path, toy_config, capsys):
    run_dir = tmp_path / "run"
    train_cli(toy_config, run_dir, "train.epochs=2", *FAST)
    for name in ("train_state.json", "train_state.prev.json"):
        flip(run_dir / name, 30)
    err = cli_error(capsys, ["train", "--resume", str(run_dir), "--set", "train.epochs=3"])
    assert "train_state.json" in err and "train_state.prev.json" in err


@pytest.mark.parametrize("edit", ["drop counters", "counter of the wrong type", "drop rng"])
def test_a_malformed_training_state_gets_one_line(tmp_path, toy_config, edit, capsys):
    """A state edited by hand (its digest recomputed, so the shape checks themselves speak)."""
    from attnmt.checkpoint import _body_digest

    run_dir = tmp_path / "run"
    train_cli(toy_config, run_dir, "train.epochs=1", *FAST)
    (run_dir / "train_state.prev.json").unlink(missing_ok=True)
    info = json.loads((run_dir / "train_state.json").read_text())
    if edit == "drop counters":
        del info["state"]["counters"]
    elif edit == "counter of the wrong type":
        info["state"]["counters"]["step"] = "seven"
    else:
        del info["state"]["rng"]
    info["sha256"] = _body_digest(info["state"])
    (run_dir / "train_state.json").write_text(json.dumps(info))
    err = cli_error(capsys, ["train", "--resume", str(run_dir), "--set", "train.epochs=2"])
    assert "train_state.json" in err


def test_a_metrics_log_shorter_than_recorded_is_refused_not_padded(tmp_path, toy_config, capsys):
    run_dir = tmp_path / "run"
    train_cli(toy_config, run_dir, "train.epochs=1", *FAST)
    log = run_dir / "metrics.jsonl"
    log.write_bytes(log.read_bytes()[:100])
    err = cli_error(capsys, ["train", "--resume", str(run_dir), "--set", "train.epochs=2"])
    assert "metrics.jsonl" in err and "shorter than" in err
    assert b"\0" not in log.read_bytes() and log.stat().st_size == 100


# ----------------------------------------------------------------------------- training data

@pytest.mark.parametrize("case", ["empty train", "empty valid", "every pair too long"])
def test_training_without_usable_data_is_refused_before_the_first_step(tmp_path, toy_config, case, capsys):
    folder = toy_config.parent / "toy"
    sets = []
    if case == "empty train":
        for lang in ("de", "en"):
            (folder / f"train.{lang}").write_text("")
    elif case == "empty valid":
        for lang in ("de", "en"):
            (folder / f"valid.{lang}").write_text("")
    else:
        sets = ["--set", "data.max_len=1"]
    run_dir = tmp_path / "run"
    assert main(["train", str(toy_config), "--run-dir", str(run_dir), *sets]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    expected = {"empty train": r"train.*(no sentence pairs|empty)", "empty valid": r"valid.*(no sentence pairs|empty)",
                "every pair too long": r"none of its 600 sentence pairs is usable.*data.max_len=1"}[case]
    assert re.search(expected, err), err
    assert not list(run_dir.glob("checkpoints/*"))  # nothing trained

"""The CLI end to end on tiny generated files: train -> evaluate -> translate -> attention -> average."""

import json
import subprocess
import sys

import pytest

from attnmt.cli import main


def test_help_runs_as_module():
    out = subprocess.run([sys.executable, "-m", "attnmt", "--help"], capture_output=True, text=True, check=True)
    assert "train" in out.stdout and "translate" in out.stdout


def test_train_evaluate_translate_attention(tmp_path, toy_config, capsys, monkeypatch):
    run_dir = tmp_path / "run"
    assert main(["train", str(toy_config), "--run-dir", str(run_dir), "--set", "train.epochs=6"]) == 0
    for name in ("config.json", "vocab.src.json", "vocab.tgt.json", "tokenizers.json", "best.json",
                 "last.json", "metrics.jsonl", "train_state.json"):
        assert (run_dir / name).is_file(), name
    epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    epochs = [r for r in epochs if r["event"] == "epoch"]
    assert len(epochs) == 6 and epochs[-1]["val_loss"] < epochs[0]["val_loss"]
    capsys.readouterr()

    assert main(["evaluate", str(run_dir), "--split", "test", "--beam", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == 40 and report["signature"].startswith("nrefs:1")
    assert report["bleu"] > 50, report  # the word-for-word task is learned

    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("Hund katze .\n\n   \nBaum blau groß .\n"))
    assert main(["translate", str(run_dir), "--beam", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[1] == "" and lines[2] == ""
    assert lines[0].lower().startswith("dog cat")

    (tmp_path / "in.txt").write_text("Hund .\nKatze .\n")
    assert main(["translate", str(run_dir), "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt"),
                 "--beam", "1"]) == 0
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 2

    png = tmp_path / "att.png"
    assert main(["attention", str(run_dir), "Hund katze haus .", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert main(["evaluate", str(run_dir), "--split", "test", "--checkpoint", "average"]) == 2
    assert "attnmt average" in capsys.readouterr().err
    assert main(["average", str(run_dir), "--last", "3"]) == 0
    assert (run_dir / "average.json").is_file()
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--split", "test", "--beam", "3", "--checkpoint", "average"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] > 50


def test_user_errors_exit_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  heads: many\n")
    assert main(["train", str(bad), "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml: model.heads must be int" in err and "Traceback" not in err
    assert main(["evaluate", str(tmp_path / "nothing")]) == 2
    assert "config.json" in capsys.readouterr().err


def test_resume_of_a_folder_without_a_run_names_the_missing_file(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path), "--set", "train.epochs=3"]) == 2
    assert "config.json" in capsys.readouterr().err

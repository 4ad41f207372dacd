"""The cache of prepared data heals itself (issue 50, group D): a folder without its manifest, a
preparation left unfinished, a damaged folder met by `train --resume` are said and prepared
again; refused inputs leave nothing behind; a whole cache is usable read-only; a prepared file
cut under a running training is one line naming it, not a SIGBUS. Every process started here
has a timeout and is killed by its pid at the end."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from support import toy
from attnmt.cli import main
from attnmt.config import config_from_dict
from attnmt.data.cache import make_plan
from attnmt.data.prepare import prepare
from attnmt.errors import DataError


def data_config(folder: Path, **data):
    return config_from_dict(yaml.safe_load(toy.config_text(folder, data=data))).data


def digests(prepared) -> dict:
    return {name: info["sha256"] for name, info in prepared.manifest["files"].items()}


def leftovers(root: Path) -> list[str]:
    """What the cache holds besides whole preparations, lock files and the digest cache."""
    return sorted(p.name for p in root.iterdir() if not (p.name.endswith(".lock") or p.name == "digests.json"
                                                          or (p / "manifest.json").is_file()))


def test_a_deleted_manifest_is_said_and_prepared_again(tmp_path, toy_corpus, caplog, capsys):
    d = data_config(toy_corpus)
    first = prepare(d, workers=1)
    expected = digests(first)
    (first.folder / "manifest.json").unlink()
    with caplog.at_level(logging.WARNING, logger="attnmt.data.prepare"):
        again = prepare(d, workers=1)
    assert again.folder == first.folder and digests(again) == expected
    assert f"refusing the prepared data in {first.folder}: {first.folder / 'manifest.json'}: missing" in caplog.text
    (first.folder / "manifest.json").unlink()  # and through the CLI: exit 0, every time after
    config = tmp_path / "toy.yaml"
    config.write_text(toy.config_text(toy_corpus))
    assert main(["prepare", str(config), "--workers", "1"]) == 0
    assert main(["prepare", str(config), "--workers", "1"]) == 0
    assert "could not be written" not in capsys.readouterr().err
    assert leftovers(first.folder.parent) == []


def test_a_preparation_left_unfinished_is_said_and_discarded(tmp_path, toy_corpus, caplog):
    d = data_config(toy_corpus)
    plan = make_plan(d)
    (plan.partial / "part000").mkdir(parents=True)
    (plan.partial / "part000" / "src.tok").write_bytes(b"\0" * 1000)  # what a killed preparation leaves
    with caplog.at_level(logging.WARNING, logger="attnmt.data.prepare"):
        prepared = prepare(d, workers=1)
    assert len(prepared) == 600
    assert f"discarding {plan.partial}: a preparation left unfinished" in caplog.text
    assert leftovers(plan.root) == []


@pytest.mark.parametrize("bad, message", [
    ({"train.en": b"dog\n" * 300 + b"d\xffg\n" + b"dog\n" * 299}, r"train\.en:301: invalid UTF-8"),
    ({"train.de": b"hund\n" * 599 + b"hu\0nd\n"}, r"train\.de:600: NUL byte"),
    ({"train.de": b"hund\n" * 599}, r"train\.de has 599 lines, .*train\.en has 600"),
])
def test_refused_inputs_leave_nothing_in_the_cache(tmp_path, toy_corpus, bad, message):
    for name, content in bad.items():
        (toy_corpus / name).write_bytes(content)
    d = data_config(toy_corpus)
    for workers in (1, 2):
        with pytest.raises(DataError, match=message):
            prepare(d, workers=workers)
        assert leftovers(make_plan(d).root) == []


def test_resume_with_a_damaged_prepared_file_prepares_it_again(tmp_path, caplog, capsys):
    """`train --resume` now does what `train CONFIG` and `prepare` did: the same key, prepared again."""
    config = toy.write_config(tmp_path / "toy.yaml", epochs=1)
    run = tmp_path / "run"
    assert main(["train", str(config), "--run-dir", str(run)]) == 0
    recorded = json.loads((run / "prepared.json").read_text())
    folder = Path(recorded["folder"])
    ids = folder / "part000" / "src.ids.npy"
    data = bytearray(ids.read_bytes())
    data[-1] ^= 1
    ids.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="attnmt.data.prepare"):
        assert main(["train", "--resume", str(run), "--set", "train.epochs=2"]) == 0
    assert f"refusing the prepared data in {folder}: {ids}: sha256" in caplog.text
    assert (folder / "manifest.json").is_file() and json.loads((run / "prepared.json").read_text()) == recorded
    capsys.readouterr()


READ_ONLY_READER = """
import sys
from attnmt.config import load_config
from attnmt.data.prepare import prepare
print(len(prepare(load_config(sys.argv[1]).data, workers=1)))
"""


def test_a_whole_read_only_cache_is_usable(tmp_path, toy_corpus):
    """A read-only cache (a read-only bind mount when root; else no write permission) that holds
    the preparation: read without creating a lock file or anything else."""
    config = tmp_path / "toy.yaml"
    config.write_text(toy.config_text(toy_corpus))
    cache = tmp_path / "cache"
    prepare(data_config(toy_corpus), workers=1)
    for lock in (cache / "prepared").glob(".*.lock"):
        lock.unlink()  # none may be needed to read
    before = sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))
    command = [sys.executable, "-c", READ_ONLY_READER, str(config)]
    if os.geteuid() == 0:  # root writes through permissions: mount the cache read-only in a namespace
        if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], timeout=30).returncode:
            pytest.skip("root without mount namespaces: no way to make the cache read-only")
        command = ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(cache), *command]
    else:
        for path in [cache, *cache.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "ATTNMT_CACHE": str(cache)})
    finally:
        for path in [cache, *cache.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    assert done.returncode == 0 and done.stdout.strip() == "600", done.stderr
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) == before


def test_a_prepared_file_cut_under_a_running_training_is_one_line_naming_it(tmp_path):
    config = toy.write_config(tmp_path / "toy.yaml")
    run = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "attnmt", "train", str(config), "--run-dir", str(run),
                                "--set", "train.epochs=500", "--set", "train.num_threads=1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not (run / "train_state.json").is_file():  # an epoch done: the maps are in use
            assert process.poll() is None and time.monotonic() < deadline, "the training did not start"
            time.sleep(0.2)
        ids = Path(json.loads((run / "prepared.json").read_text())["folder"]) / "part000" / "tgt.ids.npy"
        os.truncate(ids, 200)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == 2, (process.returncode, err[-2000:])  # -7 was SIGBUS
    lines = [line for line in err.splitlines() if line.startswith("attnmt train: error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert f"{ids}: cut to 200 bytes while in use" in lines[0]


@pytest.mark.parametrize("where", ["partial", "key", "inside"])
def test_a_fifo_in_the_cache_is_removed_not_waited_on(tmp_path, toy_corpus, where):
    """Issue 66 E: a FIFO at $ATTNMT_CACHE/prepared/.KEY.partial (or as KEY) blocked `attnmt
    prepare` in shutil.rmtree for ever, holding the key's lock. Now it is said and removed (never
    opened), and the data prepared; a FIFO in place of a prepared array is damage, said and healed.
    Run as a process with a timeout, so that a hang fails instead of blocking the suite."""
    config = tmp_path / "toy.yaml"
    config.write_text(toy.config_text(toy_corpus))
    plan = make_plan(data_config(toy_corpus))
    plan.root.mkdir(parents=True, exist_ok=True)
    if where == "inside":
        prepare(data_config(toy_corpus), workers=1)
        target = plan.folder / "part000" / "tgt.ids.npy"
        target.unlink()
    else:
        target = plan.partial if where == "partial" else plan.folder
    os.mkfifo(target)
    process = subprocess.Popen([sys.executable, "-m", "attnmt", "prepare", str(config), "--workers", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                               env=dict(os.environ))
    try:
        _, err = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert process.returncode == 0, err[-2000:]
    assert "Traceback" not in err
    again = prepare(data_config(toy_corpus), workers=1)
    assert len(again) == 600 and leftovers(plan.root) == []
    assert not os.path.exists(plan.partial)

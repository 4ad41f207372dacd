"""What keeps a user's run and files whole (issue 34): one writer per run directory, a failed
write (disk full) as one line with the previous state resumable, no output over an input, and
every count a command could not honour said. Each test fails on d1edee0."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import toy
from attnmt.cli import main
from attnmt.errors import AttnmtError
from attnmt.files import LOCK_FILE, refuse_overwrite, writer_lock

REPO = Path(__file__).resolve().parents[1]


def one_error_line(err: str, verb: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"attnmt {verb}: error: ")]
    assert len(lines) == 1, err
    return lines[0]


def epochs_logged(run: Path) -> list[int]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["epoch"] for r in rows if r["event"] == "epoch"]


# ----------------------------------------------------------------------------- one writer per run

@pytest.fixture
def training(tmp_path):
    """A real `attnmt train` of many epochs in another process, once its first epoch is logged;
    killed (SIGKILL) at the end of the test if still running."""
    config = toy.write_config(tmp_path / "toy.yaml")
    run = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "attnmt", "train", str(config), "--run-dir", str(run),
                                "--set", "train.epochs=500", "--set", "train.num_threads=1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    deadline = time.monotonic() + 120
    # last.json is written before train_state.json at an epoch's end: wait for both, or a kill in between
    # (seen under load) leaves a run that cannot resume
    while not ((run / "last.json").is_file() and (run / "train_state.json").is_file()):
        assert process.poll() is None and time.monotonic() < deadline, "the training did not start"
        time.sleep(0.2)
    yield process, run
    process.kill()
    process.wait(timeout=30)


def test_a_second_writer_of_a_run_is_refused_naming_the_first(training, tmp_path, capsys):
    process, run = training
    before = len(epochs_logged(run))
    for argv in (["train", "--resume", str(run), "--set", "train.epochs=600"],  # what the issue found: two trainings
                 ["train", "--resume", str(run)],
                 ["average", str(run), "--last", "2"],
                 ["train", str(tmp_path / "toy.yaml"), "--run-dir", str(run), "--overwrite"]):
        assert main(argv) == 2, argv
        line = one_error_line(capsys.readouterr().err, argv[0])
        assert f"{run}: another attnmt is writing here" in line and f"pid {process.pid}" in line, line
        assert "train" in line and str(run) in line.split("writing here:")[1]  # the holder's command line
    assert json.loads((run / "config.json").read_text())["train"]["epochs"] == 500  # the refused --set changed nothing
    assert not (run / "average.json").exists()
    # readers are not blocked while it trains, and see only whole files
    (tmp_path / "in.txt").write_text("Hund katze .\n")
    assert main(["translate", str(run), "-i", str(tmp_path / "in.txt"), "--beam", "1"]) == 0
    assert capsys.readouterr().out.strip()
    deadline = time.monotonic() + 120  # the training goes on meanwhile: it logs another epoch
    while len(epochs_logged(run)) <= before:
        assert process.poll() is None and time.monotonic() < deadline, "the training stopped"
        time.sleep(0.2)
    assert process.poll() is None


def test_a_killed_writer_leaves_no_stale_lock(training, capsys):
    process, run = training
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert (run / LOCK_FILE).is_file()  # the file stays; the kernel let go of its lock
    assert main(["train", "--resume", str(run), "--set", "train.epochs=2"]) == 0
    epochs = epochs_logged(run)
    assert epochs == sorted(set(epochs))  # one training's log, each epoch once


def test_two_processes_racing_for_a_lock_get_one_writer_each_time(tmp_path):
    """Eight processes try the lock of one folder at once: whoever holds it is alone (each holder
    appends its pid twice, with a pause between; a second writer would interleave)."""
    script = (f"import sys, os, time\nsys.path.insert(0, {str(REPO / 'src')!r})\n"
              "from attnmt.files import writer_lock\nfrom attnmt.errors import AttnmtError\n"
              "folder, log = sys.argv[1], sys.argv[2]\n"
              "for _ in range(200):\n"
              "    try:\n"
              "        with writer_lock(folder):\n"
              "            for _ in range(2):\n"
              "                with open(log, 'a') as f: f.write(f'{os.getpid()}\\n')\n"
              "                time.sleep(0.002)\n"
              "        break\n"
              "    except AttnmtError:\n"
              "        time.sleep(0.005)\n")
    log = tmp_path / "log.txt"
    processes = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "run"), str(log)]) for _ in range(8)]
    assert all(p.wait(timeout=120) == 0 for p in processes)
    pids = log.read_text().split()
    assert len(pids) == 16 and all(pids[i] == pids[i + 1] for i in range(0, 16, 2))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=300))
def test_a_lock_file_of_any_content_is_taken_when_free_and_named_when_held(tmp_path, content):
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    (folder / LOCK_FILE).write_bytes(content)  # what a crash, an editor or another program left there
    with writer_lock(folder):
        pass  # free: taken, whatever it held
    (folder / LOCK_FILE).write_bytes(content)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a');"
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(folder / LOCK_FILE)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(AttnmtError) as refused:
            with writer_lock(folder):
                pass
        message = str(refused.value)
        assert "\n" not in message and message.startswith(f"{folder}: another attnmt is writing here")
    finally:
        holder.kill()
        holder.wait()


# ----------------------------------------------------------------------------- disk full

class _FullDisk:
    """A file whose write() stores half of what it is given and then fails with ENOSPC (at="write"),
    or whose close() fails with ENOSPC once its bytes are flushed (at="close": as NFS and quota
    file systems report a full disk)."""

    def __init__(self, handle, at: str):
        self._handle, self._at = handle, at

    def write(self, data):
        if self._at == "write":
            self._handle.write(data[:len(data) // 2])
            self._handle.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._handle.write(data)

    def close(self):
        self._handle.close()
        if self._at == "close":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        else:
            self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


def _fail_writes_of(monkeypatch, pattern: str, skip: int = 0, at: str = "fsync", run: Path | None = None) -> list[str]:
    """Make the write of a file whose name contains `pattern` fail as on a full disk: ENOSPC at
    its fsync (after the bytes went to a temporary file), at its write() (half written) or at its
    close(), after `skip` such writes went through; returns the names it failed. With `run`, the
    training state files there are read at the moment of the failure (failed[1:]: {name: bytes})."""
    import builtins
    import io

    import attnmt.files as files_module

    failed: list = []
    seen = [0]

    def fails(name: str) -> bool:
        if pattern not in name or failed:
            return False
        seen[0] += 1
        if seen[0] <= skip:
            return False
        failed.append(name)
        if run is not None:
            failed.append(_state_files(run))
        return True

    if at == "fsync":
        real_fsync = os.fsync

        def fsync(fd):
            if fails(os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_fsync(fd)
        monkeypatch.setattr(files_module.os, "fsync", fsync)
        return failed
    real_open = builtins.open

    def open_(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and ("w" in mode or "a" in mode) and fails(os.path.basename(file)):
            return _FullDisk(handle, at)
        return handle
    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)  # pathlib's write_bytes / write_text open through io.open
    return failed


def _state_files(run: Path) -> dict[str, bytes]:
    """The bytes of the training states (train_state.json, train_state.prev.json) and of the tensor files they name."""
    files = {}
    for name in ("train_state.json", "train_state.prev.json"):
        if (run / name).is_file():
            files[name] = (run / name).read_bytes()
            tensors = json.loads(files[name])["tensors"]
            files[tensors] = (run / tensors).read_bytes()
    return files


@pytest.mark.parametrize("pattern,skip,at", [
    ("epoch_002", 0, "fsync"), ("train_state.json", 1, "fsync"), ("train_state_000002", 0, "fsync"),
    ("last.json", 1, "fsync"), ("best.json", 1, "fsync"),
    ("epoch_002", 0, "write"), ("train_state.json", 1, "write"), ("train_state_000002", 0, "close"),
    ("last.json", 1, "close"), ("metrics.jsonl", 6, "write")])  # metrics: a row of epoch 2
def test_disk_full_at_a_write_is_one_line_and_the_run_resumes(tmp_path, monkeypatch, capsys, caplog, pattern, skip,
                                                              at):
    """Epoch 2's writes, each in turn, fail (at fsync, at write() or at close()): the last training
    state is byte for byte what it was when the write failed, and the run resumes from it and ends as asked."""
    config = toy.write_config(tmp_path / "toy.yaml", epochs=3)
    run = tmp_path / "run"
    failed = _fail_writes_of(monkeypatch, pattern, skip, at, run)
    assert main(["train", str(config), "--run-dir", str(run)]) == 2
    assert failed, f"no write of {pattern} happened"
    line = one_error_line(capsys.readouterr().err, "train")
    assert "could not be written: No space left on device" in line and pattern in line, line
    assert not list(run.rglob("*.tmp"))  # no temporary file left behind
    monkeypatch.undo()  # space freed
    state = failed[1]
    assert json.loads(state["train_state.json"])["state"]["counters"]["epoch"] == 1  # epoch 1's, complete
    assert _state_files(run) == state  # the training state is what it was when the write failed
    caplog.clear()
    with caplog.at_level("INFO"):
        assert main(["train", "--resume", str(run)]) == 0
    assert "resuming from the training state" in caplog.text  # which state it went on from
    assert epochs_logged(run) == [1, 2, 3]
    assert json.loads(capsys.readouterr().out)["epochs"] == 3


def test_disk_full_before_the_first_state_says_what_there_is(tmp_path, monkeypatch, capsys):
    config = toy.write_config(tmp_path / "toy.yaml", epochs=2)
    run = tmp_path / "run"
    _fail_writes_of(monkeypatch, "train_state_000001")
    assert main(["train", str(config), "--run-dir", str(run)]) == 2
    capsys.readouterr()
    monkeypatch.undo()
    assert main(["train", "--resume", str(run)]) == 2
    line = one_error_line(capsys.readouterr().err, "train")
    assert "stopped before it saved one" in line and "epoch_001.safetensors" in line and "--overwrite" in line


def test_a_file_size_limit_during_preparation_is_one_line_and_leaves_no_partial_data(tmp_path):
    """A real write failure of the operating system (RLIMIT_FSIZE: EFBIG at the first write past
    4 kB) while the prepared data are written."""
    config = toy.write_config(tmp_path / "toy.yaml")
    cache = tmp_path / "cache"
    script = ("import resource, signal, sys\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
              "from attnmt.cli import main\nsys.exit(main(['prepare', sys.argv[1], '--workers', '1']))\n")
    done = subprocess.run([sys.executable, "-c", script, str(config)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ATTNMT_CACHE": str(cache)})
    assert done.returncode == 2, done.stderr
    line = one_error_line(done.stderr, "prepare")
    assert "could not be written:" in line and "whole preparations" in line, line
    assert "File too large" in line or "a file size limit was reached" in line, line
    prepared = cache / "prepared"
    assert not [p for p in prepared.iterdir() if p.is_dir()], list(prepared.iterdir())  # no partial, no folder


def test_a_run_killed_before_its_first_state_says_what_to_do_and_does_not_loop(tmp_path, capsys):
    """Issue 50: a training SIGKILLed at its 3rd update (before any state was saved): `--resume` said
    only "training state not found", and a fresh `train` sent the user back to `--resume`. Now
    both say to start afresh with --overwrite, and that works."""
    config = toy.write_config(tmp_path / "toy.yaml", epochs=1)
    run = tmp_path / "run"
    script = ("import os, signal, sys\nfrom attnmt.training.loop import Trainer\nupdate = Trainer._update\n"
              "calls = [0]\ndef killed(self, *args, **kwargs):\n    calls[0] += 1\n"
              "    if calls[0] == 3:\n        os.kill(os.getpid(), signal.SIGKILL)\n"
              "    return update(self, *args, **kwargs)\nTrainer._update = killed\n"
              "from attnmt.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", script, "train", str(config), "--run-dir", str(run)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (run / "config.json").is_file() and not list(run.glob("train_state*"))
    assert main(["train", "--resume", str(run)]) == 2
    line = one_error_line(capsys.readouterr().err, "train")
    assert "training state not found (cannot resume): the run stopped before it saved its first one" in line, line
    assert f"--run-dir {run} --overwrite" in line, line
    assert main(["train", str(config), "--run-dir", str(run)]) == 2
    line = one_error_line(capsys.readouterr().err, "train")
    assert "stopped before it saved its first training state, so it cannot be resumed" in line, line
    assert "--overwrite" in line and "--resume" not in line, line  # no loop back to --resume
    assert main(["train", str(config), "--run-dir", str(run), "--overwrite"]) == 0
    assert epochs_logged(run) == [1]


# ----------------------------------------------------------------------------- never overwrite an input

def test_an_output_over_an_input_is_refused_before_any_work(toy_run, tmp_path, capsys, monkeypatch):
    from attnmt.run_dir import RunDir

    loaded = []  # "before any work": no model is loaded (translate and score load it through RunDir.load_model)
    load_model = RunDir.load_model
    monkeypatch.setattr(RunDir, "load_model", lambda self, *a, **k: loaded.append(self.path) or load_model(self, *a, **k))
    text = "Hund katze .\nBaum .\n"
    source = tmp_path / "in.txt"
    source.write_text(text)
    (tmp_path / "link.txt").symlink_to(source)
    os.link(source, tmp_path / "hard.txt")
    for output in (source, Path(f"{tmp_path}/./in.txt"), tmp_path / "link.txt", tmp_path / "hard.txt",
                   tmp_path / "sub" / ".." / "in.txt"):
        assert main(["translate", str(toy_run), "-i", str(source), "-o", str(output)]) == 2, output
        line = one_error_line(capsys.readouterr().err, "translate")
        assert line.startswith(f"attnmt translate: error: {output}: is the input (-i) {source}"), line
        assert source.read_text() == text
    monkeypatch.chdir(tmp_path)  # ./x against x
    assert main(["translate", str(toy_run), "-i", "in.txt", "-o", "./in.txt"]) == 2
    assert "./in.txt: is the input (-i) in.txt" in one_error_line(capsys.readouterr().err, "translate")
    assert main(["score", str(toy_run), "-i", "in.txt", "-r", "in.txt", "-o", "in.txt"]) == 2
    line = one_error_line(capsys.readouterr().err, "score")  # its own message, not the one before
    assert line.startswith("attnmt score: error: in.txt: is the input (-i)"), line
    assert source.read_text() == text
    config_text = (toy_run / "config.json").read_bytes()
    assert main(["translate", str(toy_run), "-i", "in.txt", "-o", str(toy_run / "config.json")]) == 2
    assert "is inside the model folder" in one_error_line(capsys.readouterr().err, "translate")
    assert (toy_run / "config.json").read_bytes() == config_text
    checkpoints = sorted((toy_run / "checkpoints").glob("epoch_*.safetensors"))
    data = checkpoints[-1].read_bytes()
    assert main(["average", str(toy_run), "--last", "2", "-o", str(checkpoints[-1])]) == 2
    assert "writing it would destroy the input" in one_error_line(capsys.readouterr().err, "average")
    assert checkpoints[-1].read_bytes() == data
    assert loaded == []  # refused before any model was loaded
    monkeypatch.undo()
    monkeypatch.setattr(RunDir, "load_model", lambda self, *a, **k: loaded.append(self.path) or load_model(self, *a, **k))
    assert main(["translate", str(toy_run), "-i", str(source), "-o", str(tmp_path / "out.txt")]) == 0
    assert loaded  # the same command with another output loads it: the check above can see a load


def test_export_into_the_run_it_reads_is_refused(tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from support.toy import make_random_run

    run = make_random_run(tmp_path / "run")
    before = sorted(p.name for p in run.rglob("*"))
    for output in (run, run / "ct2", Path(f"{run}/.")):
        assert main(["export", str(run), "-o", str(output), "--force"]) == 2
        assert "is inside the run" in one_error_line(capsys.readouterr().err, "export")
    assert sorted(p.name for p in run.rglob("*")) == before


def test_refuse_overwrite_lets_other_outputs_pass(tmp_path):
    (tmp_path / "a").write_text("a")
    refuse_overwrite(tmp_path / "b", {"input": tmp_path / "a"}, {"run": tmp_path / "run"})
    refuse_overwrite(tmp_path / "run-ct2", {}, {"run": tmp_path / "run"})  # a sibling with the run's name as prefix


# ----------------------------------------------------------------------------- counts not honoured are said

def test_average_of_more_checkpoints_than_there_are_says_so(toy_run, tmp_path, capsys):
    run = tmp_path / "run"
    import shutil

    shutil.copytree(toy_run, run)
    have = len(list((run / "checkpoints").glob("epoch_*.safetensors")))
    assert main(["average", str(run), "--last", "100"]) == 0
    captured = capsys.readouterr()
    assert f"asked for the last 100 checkpoints; {run} has {have}: averaged {have}" in captured.err
    assert captured.out.startswith(f"averaged {have} checkpoints")


def test_n_best_above_the_beam_is_refused_naming_both(toy_run, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("Hund .\n")
    assert main(["translate", str(toy_run), "-i", str(tmp_path / "in.txt"), "--beam", "2", "--n-best", "3"]) == 2
    assert "n_best=3 must be between 1 and beam_size=2" in one_error_line(capsys.readouterr().err, "translate")


def test_a_glossary_target_the_vocabulary_lacks_is_said(toy_run, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("Hund katze .\n")
    (tmp_path / "terms.tsv").write_text("Hund\tDogge\nkatze\tcat\n")
    assert main(["translate", str(toy_run), "-i", str(tmp_path / "in.txt"), "--glossary",
                 str(tmp_path / "terms.tsv"), "--beam", "2"]) == 0
    err = capsys.readouterr().err
    assert "the target 'Dogge' has words the model's vocabulary lacks (Dogge)" in err
    assert "'cat'" not in err

"""Lock files (files.writer_lock; issue 50, group B): never opened through a link or into a file
that is not a lock's own, never kept by a forked child, and taken over, with a warning, when the
process they name has ended though the lock is still held. Every process started here has a
timeout and is killed by its pid at the end."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from support import toy
from attnmt.cli import main
from attnmt.errors import AttnmtError
from attnmt.files import LOCK_FILE, writer_lock

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, flock and /proc as on Linux")


def test_a_symlinked_lock_is_refused_and_its_target_untouched(tmp_path, capsys, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).symlink_to(victim)
    with pytest.raises(AttnmtError, match=rf"{LOCK_FILE}: is a symbolic link \(to {victim}\); .* untouched"):
        with writer_lock(run):
            pass
    (run / "gone").symlink_to(tmp_path / "nothing")  # a dangling link is not created through either
    with pytest.raises(AttnmtError, match="is a symbolic link"):
        with writer_lock(run, name="gone"):
            pass
    assert not (tmp_path / "nothing").exists()
    # the cache's lock, through the CLI: one line, exit 2, the victim as it was
    config = toy.write_config(tmp_path / "toy.yaml")
    monkeypatch.setenv("ATTNMT_CACHE", str(tmp_path / "cache"))
    from attnmt.config import load_config
    from attnmt.data.cache import make_plan

    plan = make_plan(load_config(config).data)
    (plan.root / plan.lock).symlink_to(victim)
    assert main(["prepare", str(config), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"attnmt prepare: error: {plan.root / plan.lock}: is a symbolic link" in err
    assert victim.read_text() == "precious\n"
    assert not list(plan.root.glob("*/manifest.json"))


def test_a_hard_linked_or_oversized_lock_file_is_refused_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    os.link(victim, run / LOCK_FILE)
    with pytest.raises(AttnmtError, match=r"has 2 names \(a hard link to another file\)"):
        with writer_lock(run):
            pass
    assert victim.read_text() == "precious\n"
    (run / LOCK_FILE).unlink()
    (run / LOCK_FILE).write_bytes(b"x" * 100_000)
    with pytest.raises(AttnmtError, match=r"holds 100000 bytes, not a lock of attnmt's"):
        with writer_lock(run):
            pass
    assert (run / LOCK_FILE).stat().st_size == 100_000


def _sleep_forever() -> None:
    time.sleep(60)


def test_a_forked_child_does_not_keep_the_lock(tmp_path):
    """A child forked under the lock (a preparation worker, a user's os.fork) closes its copy at
    the fork: when the holder lets go, the lock is free though the child lives on."""
    run = tmp_path / "run"
    child = None
    try:
        with writer_lock(run):
            child = multiprocessing.get_context("fork").Process(target=_sleep_forever, daemon=True)
            child.start()
        taker = subprocess.run([sys.executable, "-c", "import sys\nfrom attnmt.files import writer_lock\n"
                                "with writer_lock(sys.argv[1]): print('taken')", str(run)],
                               capture_output=True, text=True, timeout=60)
        assert child.is_alive()
        assert taker.returncode == 0 and taker.stdout.strip() == "taken", taker.stderr
    finally:
        if child is not None and child.pid:
            os.kill(child.pid, signal.SIGKILL)
            child.join(30)


# A holder that writes its record, forks a child that inherits the flock (as the workers of an older
# attnmt did), and ends: the lock stays held by the child while the record names a dead process.
ORPHANING_HOLDER = """
import fcntl, json, os, socket, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
started = int(open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19])
os.write(fd, json.dumps({"pid": os.getpid(), "command": ["attnmt", "prepare", "x.yaml"], "host": socket.gethostname(),
                         "started": started}).encode())
child = os.fork()
if child == 0:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1), os.dup2(null, 2)  # the test reads the holder's output to its end
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
os._exit(0)
"""


@pytest.mark.parametrize("wait", [True, False])
def test_a_lock_whose_holder_ended_is_said_and_taken_over(tmp_path, caplog, wait):
    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.run([sys.executable, "-c", ORPHANING_HOLDER, str(run / LOCK_FILE)], capture_output=True,
                            text=True, timeout=60)
    orphan = int(holder.stdout)
    dead = json.loads((run / LOCK_FILE).read_text())["pid"]
    taken = []

    def take() -> None:
        with writer_lock(run, wait=wait):
            taken.append(json.loads((run / LOCK_FILE).read_text())["pid"])

    try:
        with caplog.at_level(logging.WARNING, logger="attnmt.files"):
            taker = threading.Thread(target=take, daemon=True)  # a wait that never ends fails here, not in CI
            taker.start()
            taker.join(20)
        assert taken == [os.getpid()], "the lock was not taken over within 20 s"
        assert f"attnmt prepare x.yaml (pid {dead}) is no longer running, but the lock is still held" in caplog.text
        assert f"pid {orphan}" in caplog.text and "taking it over" in caplog.text
    finally:
        os.kill(orphan, signal.SIGKILL)


def test_a_live_holder_is_never_taken_over(tmp_path):
    """The record of a live holder, or one it has not written yet (a stale one of an ended
    process, for an instant), is waited for: only a record that stays a dead process's counts."""
    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a');"
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(run / LOCK_FILE)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        (run / LOCK_FILE).write_text(json.dumps({"pid": holder.pid, "command": ["attnmt", "train"]}))
        with pytest.raises(AttnmtError, match=rf"another attnmt is writing here: attnmt train \(pid {holder.pid}\)"):
            with writer_lock(run):
                pass
    finally:
        holder.kill()
        holder.wait(timeout=30)

"""`attnmt prepare` killed (issue 50, group C): its worker processes end with it within a second,
hold none of its locks, and a rerun finishes with the same data as an uninterrupted run, whatever
moment the kill (SIGKILL or SIGTERM) came at. Every process started here has a timeout and is
killed by its pid at the end."""

from __future__ import annotations

import json
import os
import random
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import toy
from benchmarks.scale.kill_prepare import children, live  # the /proc helpers the benchmark times kills with
from support.fuzzing import DEEP

PAIRS = 20_000  # with 1,000-line chunks and 2 workers: about 2 s of preparation on one core
SCRIPT = """
import os, sys
from attnmt.data import corpus
corpus.CHUNK_LINES = 1000  # many chunks: the worker processes start
if os.environ.get("TEST_NO_PDEATHSIG"):  # only the fork-time closing of the lock guards it then
    from attnmt.data import encode
    encode.die_with_parent = lambda parent: None
from attnmt.cli import main
sys.exit(main(["prepare", sys.argv[1], "--workers", "2"]))
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; prctl is Linux's")


@pytest.fixture
def corpus_config(tmp_path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    pairs = toy.copy_pairs(PAIRS, 7)
    (folder / "train.de").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (folder / "train.en").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    for split in ("valid", "test"):
        (folder / f"{split}.de").write_text("Hund .\n", encoding="utf-8")
        (folder / f"{split}.en").write_text("Dog .\n", encoding="utf-8")
    config = tmp_path / "big.yaml"
    config.write_text(toy.config_text(folder), encoding="utf-8")
    (tmp_path / "prepare.py").write_text(SCRIPT, encoding="utf-8")
    return config


class Preparation:
    """`attnmt prepare` of the config in another process, its stderr in a file."""

    def __init__(self, config: Path, cache: Path, log: Path, **env: str):
        self.log = log
        with open(log, "w") as err:
            self.process = subprocess.Popen([sys.executable, str(config.parent / "prepare.py"), str(config)],
                                            stdout=subprocess.DEVNULL, stderr=err,
                                            env={**os.environ, "ATTNMT_CACHE": str(cache), **env})
        self.workers: list[int] = []

    def wait_for_workers(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.workers) < 2:
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "the workers did not start"
            self.workers = children(self.process.pid)
            time.sleep(0.02)

    def kill(self, sig: int) -> float:
        """Send `sig` to the main process; the seconds until none of its workers lives (max 5)."""
        self.workers = self.workers or children(self.process.pid)
        self.process.send_signal(sig)
        start = time.monotonic()
        self.process.wait(timeout=30)
        while any(map(live, self.workers)) and time.monotonic() - start < 5:
            time.sleep(0.01)
        return time.monotonic() - start

    def cleanup(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        for pid in self.workers:
            if live(pid):
                os.kill(pid, signal.SIGKILL)


def prepare_whole(config: Path, cache: Path, log: Path) -> dict:
    """Run the preparation to its end (within 120 s); the prepared folder's key and file digests."""
    done = subprocess.run([sys.executable, str(config.parent / "prepare.py"), str(config)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "ATTNMT_CACHE": str(cache)})
    log.write_text(done.stderr)
    assert done.returncode == 0, done.stderr
    return digests(cache)


def digests(cache: Path) -> dict:
    [manifest] = (cache / "prepared").glob("*/manifest.json")
    files = json.loads(manifest.read_text())["files"]
    return {"key": manifest.parent.name, **{name: info["sha256"] for name, info in files.items()}}


def test_a_killed_preparation_leaves_no_process_within_a_second(corpus_config, tmp_path):
    run = Preparation(corpus_config, tmp_path / "cache", tmp_path / "err.txt")
    try:
        run.wait_for_workers()
        time.sleep(0.3)  # the workers are busy with chunks
        gone = run.kill(signal.SIGKILL)
        assert not [pid for pid in run.workers if live(pid)], f"workers still alive {gone:.2f} s after the kill"
        assert gone < 1.0, gone
    finally:
        run.cleanup()


def test_orphaned_workers_hold_no_lock(corpus_config, tmp_path):
    """Without the parent-death signal the workers outlive a SIGKILL of their parent (blocked on its
    pipes, as the sweep found them); they no longer hold the cache's lock: a rerun goes on."""
    cache = tmp_path / "cache"
    run = Preparation(corpus_config, cache, tmp_path / "err.txt", TEST_NO_PDEATHSIG="1")
    try:
        run.wait_for_workers()
        time.sleep(0.3)
        run.kill(signal.SIGKILL)
        orphans = [pid for pid in run.workers if live(pid)]
        assert orphans  # the case this test is about: workers that outlived their parent
        lock = next((cache / "prepared").glob(".*.lock"))
        for pid in orphans:
            held = {os.path.realpath(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            assert str(lock) not in held, f"worker {pid} holds {lock}"
        prepare_whole(corpus_config, cache, tmp_path / "rerun.txt")  # within its timeout: no wait for a lock
        assert "waiting for" not in (tmp_path / "rerun.txt").read_text()
    finally:
        run.cleanup()


def test_kills_at_random_moments_then_a_rerun_gives_the_same_data(corpus_config, tmp_path):
    """SIGKILL and SIGTERM at random moments of a preparation (seeded; more, unseeded, with
    ATTNMT_FUZZ=deep): no process outlives the kill by a second, and a rerun finishes with the key
    and every file's sha256 of an uninterrupted run, saying what it discarded."""
    expected = prepare_whole(corpus_config, tmp_path / "reference", tmp_path / "reference.txt")
    rng = random.Random(None if DEEP else 50)
    cache = tmp_path / "cache"
    rounds = 12 if DEEP else 3
    for round_ in range(rounds):
        sig = (signal.SIGKILL, signal.SIGTERM)[round_ % 2]
        run = Preparation(corpus_config, cache, tmp_path / f"killed{round_}.txt")
        try:
            time.sleep(rng.uniform(0.0, 3.0))  # from start-up through encoding to the rename
            if run.process.poll() is None:
                run.workers = children(run.process.pid)
                gone = run.kill(sig)
                assert not [pid for pid in run.workers if live(pid)] and gone < 1.0, (sig, gone)
        finally:
            run.cleanup()
        partial = list((cache / "prepared").glob(".*.partial")) if (cache / "prepared").is_dir() else []
        assert prepare_whole(corpus_config, cache, tmp_path / f"rerun{round_}.txt") == expected, round_
        said = (tmp_path / f"rerun{round_}.txt").read_text()
        for folder in partial:
            assert f"discarding {folder}: a preparation left unfinished" in said
        assert not list((cache / "prepared").glob(".*.partial"))
        for manifest in (cache / "prepared").glob("*/manifest.json"):  # prepare afresh next round
            shutil.rmtree(manifest.parent)

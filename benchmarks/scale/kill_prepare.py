"""How long the workers of a killed `attnmt prepare` outlive it (docs/reliability.md, issue 50 C).

    PYTHONPATH=src python -m benchmarks.scale.kill_prepare --kills 10

Writes a corpus of --pairs random word pairs in a temporary folder, then --kills times per
signal (SIGKILL, SIGTERM): starts `attnmt prepare` with 2 workers and 2,000-line chunks, sends
the signal 0.3 s after both workers started, and times until no worker is alive (a zombie counts
as gone; 5 s = still alive, then killed by its pid). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = """
import sys
from attnmt.data import corpus
corpus.CHUNK_LINES = 2000
from attnmt.cli import main
sys.exit(main(["prepare", sys.argv[1], "--workers", "2"]))
"""
WORDS = "hund katze haus baum auto mann frau kind ball wasser rot blau".split()


def live(pid: int) -> bool:
    """A process that exists and is not a zombie (a dead child its parent has not reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc; Linux only)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def write_corpus(folder: Path, pairs: int) -> Path:
    rng = random.Random(1)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))) for _ in range(pairs)]
    for lang in ("de", "en"):
        (folder / f"train.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        (folder / f"valid.{lang}").write_text("hund\n", encoding="utf-8")
    config = folder / "kill.yaml"
    config.write_text(f"data:\n  corpus: files\n  train: {folder}/train\n  valid: {folder}/valid\n", encoding="utf-8")
    (folder / "prepare.py").write_text(SCRIPT, encoding="utf-8")
    return config


def time_one_kill(config: Path, cache: Path, sig: int) -> float:
    subprocess.run(["rm", "-rf", str(cache)], check=True)
    process = subprocess.Popen([sys.executable, str(config.parent / "prepare.py"), str(config)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "ATTNMT_CACHE": str(cache)})
    workers: list[int] = []
    while len(workers) < 2 and process.poll() is None:
        workers = children(process.pid)
        time.sleep(0.01)
    time.sleep(0.3)
    process.send_signal(sig)
    start = time.monotonic()
    process.wait(timeout=30)
    while any(map(live, workers)) and time.monotonic() - start < 5:
        time.sleep(0.005)
    seconds = time.monotonic() - start
    for pid in workers:
        if live(pid):
            os.kill(pid, signal.SIGKILL)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=40_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="attnmt-kill-") as tmp:
        config = write_corpus(Path(tmp), args.pairs)
        for sig in (signal.SIGKILL, signal.SIGTERM):
            times = sorted(time_one_kill(config, Path(tmp) / "cache", sig) for _ in range(args.kills))
            print(f"{sig.name}: workers gone after median {times[len(times) // 2]:.3f} s, max {times[-1]:.3f} s "
                  f"over {args.kills} kills" + (" (some still alive after 5 s)" if times[-1] >= 5 else ""))


if __name__ == "__main__":
    main()

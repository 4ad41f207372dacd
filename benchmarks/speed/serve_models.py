#!/usr/bin/env python3
"""Resident memory and start-up time of `attnmt serve` with one model, then with two
(docs/serving.md, "Several models"): each server is started, timed until /health answers, its
RSS read from /proc, and stopped.

    benchmarks/speed/serve_models.py RUN_A RUN_B [--json serve_models.json]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import command, environment, make_report, write_report

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def measure(runs: list[str], timeout_s: float = 300) -> dict:
    """Start `attnmt serve RUNS...`, wait for /health, read its RSS, stop it."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), PYTHONUNBUFFERED="1")
    start = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-m", "attnmt", "serve", *runs, "--port", str(port), "--device", "cpu"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"attnmt serve {' '.join(runs)} exited with {server.returncode}")
            if time.perf_counter() - start > timeout_s:
                raise RuntimeError(f"attnmt serve {' '.join(runs)} not ready within {timeout_s} s")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        ready_s = time.perf_counter() - start
        return {"kind": "serve", "models": len(runs), "runs": runs, "ready_s": round(ready_s, 2),
                "rss_mib": round(rss_mib(server.pid), 1)}
    finally:
        server.terminate()
        server.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="serve_models", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs=2, metavar="RUN", help="two runs (or exports) of different language pairs")
    p.add_argument("--json", default="serve_models.json", metavar="PATH")
    args = p.parse_args(argv)
    rows = [measure(args.runs[:1]), measure(args.runs)]
    for row in rows:
        print(f"{row['models']} model(s): ready in {row['ready_s']:.1f} s, RSS {row['rss_mib']:.0f} MiB")
    write_report(args.json, make_report("serve_models", command=command(__file__, argv), environment=environment(),
                                        settings={"runs": args.runs}, results=rows, notes=[]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

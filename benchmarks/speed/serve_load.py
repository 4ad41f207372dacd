#!/usr/bin/env python3
"""Load test for `attnmt serve`: single-sentence LibreTranslate requests at several client counts,
with micro-batching on and off; reports requests/s, sentences/s, latency percentiles, errors and
requests that got no answer.

    benchmarks/speed/serve_load.py runs/demo --requests 2000 --clients 1 8 32 --beam 5

For each mode the script starts its own server on 127.0.0.1 (micro-batching on: the defaults;
off: --max-batch-sentences 1 --max-wait-ms 0), sends the first N source sentences of a Multi30k
split (cycled when N is larger), one sentence per request, from C concurrent clients, and stops
the server. The load is bounded: N requests per cell, a per-request timeout and a per-cell time
limit (requests not sent by then are reported as unsent, not as lost). The clients run on the
same machine as the server and take some of its CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx

from benchmarks.common import command, environment, make_report, write_report

MODES = {"batched": [], "single": ["--max-batch-sentences", "1", "--max-wait-ms", "0"]}


def read_sentences(data_dir: Path, split: str, lang: str, n: int) -> list[str]:
    path = data_dir / f"{split}.{lang}.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return [lines[i % len(lines)] for i in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(run_dir: str, beam: int, extra: list[str], threads: int | None = None,
                 timeout: float = 300) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "attnmt", "serve", run_dir, "--port", str(port), "--beam", str(beam), *extra]
    env = dict(os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {}))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}: {' '.join(cmd)}")
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the server did not start in {timeout} s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()


async def run_cell(url: str, sentences: list[str], clients: int, source: str, target: str,
                   timeout: float, max_seconds: float) -> dict:
    """Send each sentence as one request from `clients` concurrent clients."""
    latencies: list[float] = []
    errors = lost = 0
    next_index = 0
    start = time.perf_counter()

    async def client(http: httpx.AsyncClient):
        nonlocal next_index, errors, lost
        while next_index < len(sentences) and time.perf_counter() - start < max_seconds:
            sentence = sentences[next_index]
            next_index += 1
            t0 = time.perf_counter()
            try:
                r = await http.post(url + "/translate", json={"q": sentence, "source": source, "target": target})
            except httpx.HTTPError:
                lost += 1
                continue
            latencies.append(time.perf_counter() - t0)
            body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            if r.status_code != 200 or not isinstance(body.get("translatedText"), str) \
                    or (sentence.strip() and not body["translatedText"]):
                errors += 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    seconds = time.perf_counter() - start
    answered = len(latencies)
    ok = answered - errors
    latencies.sort()

    def pct(p: float) -> float | None:
        return round(latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))], 3) if latencies else None

    return {"clients": clients, "sent": next_index, "unsent": len(sentences) - next_index, "answered": answered,
            "errors": errors, "lost": lost, "seconds": round(seconds, 2),
            "requests_per_s": round(answered / seconds, 2), "sentences_per_s": round(ok / seconds, 2),
            "p50_s": pct(50), "p95_s": pct(95), "p99_s": pct(99)}


def run_mode(args: argparse.Namespace, mode: str, sentences: list[str]) -> list[dict]:
    """One "serve" row per client count, against a server of its own in this mode."""
    proc, url = start_server(args.run_dir, args.beam, MODES[mode], args.server_threads)
    rows = []
    try:
        asyncio.run(run_cell(url, sentences[: args.warmup], min(4, max(args.clients)), args.source, args.target,
                             args.timeout, args.max_seconds))
        for clients in args.clients:
            cell = asyncio.run(run_cell(url, sentences, clients, args.source, args.target, args.timeout,
                                        args.max_seconds))
            health = httpx.get(url + "/health", timeout=30).json()
            rows.append({"kind": "serve", "mode": mode, **cell, "largest_batch": health["largest_batch"]})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        stop_server(proc)
    return rows


def print_table(rows: list[dict], clients: list[int]) -> list[str]:
    """The Markdown table, and the micro-batching speed-up per client count (returned as notes)."""
    print("\n| mode | clients | requests | req/s | sentences/s | p50 s | p95 s | p99 s | errors | lost | unsent |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in rows:
        print(f"| {c['mode']} | {c['clients']} | {c['answered']} | {c['requests_per_s']} | {c['sentences_per_s']} | "
              f"{c['p50_s']} | {c['p95_s']} | {c['p99_s']} | {c['errors']} | {c['lost']} | {c['unsent']} |")
    by = {(c["mode"], c["clients"]): c for c in rows}
    notes = []
    for n in clients:
        on, off = by.get(("batched", n)), by.get(("single", n))
        if on and off and off["sentences_per_s"]:
            notes.append(f"{n} clients: micro-batching gives {on['sentences_per_s'] / off['sentences_per_s']:.2f}x "
                         "the sentences/s of one-at-a-time serving")
            print(notes[-1])
    return notes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--requests", type=int, default=2000, help="requests (sentences) per cell")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--source", default="de")
    p.add_argument("--target", default="en")
    p.add_argument("--data", default=os.environ.get("ATTNMT_DATA", "../shared/data/multi30k"),
                   help="folder with <split>.<lang>.gz (default: $ATTNMT_DATA)")
    p.add_argument("--timeout", type=float, default=120, help="per-request timeout, seconds")
    p.add_argument("--max-seconds", type=float, default=600, help="stop sending after this long per cell")
    p.add_argument("--warmup", type=int, default=20, help="requests sent (and not counted) before each mode")
    p.add_argument("--server-threads", type=int, default=None,
                   help="torch threads in the server (OMP_NUM_THREADS; default: torch's, one per core)")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)

    sentences = read_sentences(Path(args.data), args.split, args.source, args.requests)
    env = environment("cpu")
    print(f"# {env['date']} · {env['cpu_count']} cores, {env['cpu']}, torch {env['torch']}, Python {env['python']}"
          f"\n# {' '.join(command(__file__, argv))}", flush=True)
    rows = [row for mode in args.modes for row in run_mode(args, mode, sentences)]
    notes = print_table(rows, args.clients)
    settings = {"run_dir": args.run_dir, "beam": args.beam, "requests": args.requests, "split": args.split,
                "server_threads": args.server_threads, "timeout": args.timeout, "max_seconds": args.max_seconds}
    if args.json:
        write_report(args.json, make_report("serve_load", command=command(__file__, argv), environment=env,
                                            settings=settings, results=rows, notes=notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

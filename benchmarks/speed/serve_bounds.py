#!/usr/bin/env python3
"""What one large request costs `attnmt serve` (issue 66 group A): for requests of N sentences in
one text, the served process's peak memory over the request and its time, and meanwhile the
latency of one-sentence requests sent one after another (what every other client sees).

    benchmarks/speed/serve_bounds.py runs/demo --sentences 250 500 1000 --routes translate v1

The script starts its own server on 127.0.0.1 (--max-sentences the largest N, so the largest
request is the largest allowed), and per (route, N): resets the server's peak resident memory
(/proc/PID/clear_refs, then VmHWM is the peak since), sends `"Ein Hund läuft. " * N` (route
`translate`: LibreTranslate's /translate; `v1`: /v1/translate with attention), and probes with
"Ein Hund ." until it is answered. Peak memory is VmHWM - VmRSS before the request (Linux; the
server must be this user's). The clients run on the same machine and take some of its CPU.
Figures, never assertions: tests/server/test_request_bounds.py checks the bounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx

from benchmarks.common import command, environment, make_report, run_main
from benchmarks.speed.serve_load import start_server, stop_server

SENTENCE = "Ein Hund läuft."
PROBE = "Ein Hund ."
ROUTES = ("translate", "v1")


def memory_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def body(route: str, n: int, source: str, target: str) -> tuple[str, dict]:
    text = " ".join([SENTENCE] * n)
    if route == "translate":
        return "/translate", {"q": text, "source": source, "target": target}
    return "/v1/translate", {"texts": [text], "attention": True, "beam_size": 1}


def measure(url: str, pid: int, route: str, n: int, args) -> dict:
    """One large request of `n` sentences, probed meanwhile."""
    with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")  # VmHWM := VmRSS: the peak from now on
    before = memory_kb(pid, "VmRSS")
    path, payload = body(route, n, args.source, args.target)
    probes: list[float] = []
    with httpx.Client(timeout=args.timeout) as client, ThreadPoolExecutor(max_workers=1) as pool:
        began = time.perf_counter()
        large = pool.submit(client.post, url + path, json=payload)
        while not large.done():
            start = time.perf_counter()
            probe = client.post(url + "/translate", json={"q": PROBE, "source": args.source, "target": args.target})
            if not large.done():
                probes.append(time.perf_counter() - start if probe.status_code == 200 else float("inf"))
            time.sleep(args.probe_gap)
        answer = large.result()
        seconds = time.perf_counter() - began
    peak_mb = (memory_kb(pid, "VmHWM") - before) / 1024
    return {"kind": "serve_bounds", "route": route, "sentences": n, "status": answer.status_code,
            "seconds": round(seconds, 2), "peak_mb": round(peak_mb, 1), "answer_kb": round(len(answer.content) / 1024, 1),
            "probes": len(probes), "probe_p50_s": round(statistics.median(probes), 3) if probes else None,
            "probe_max_s": round(max(probes), 3) if probes else None}


def run_bench(args, argv) -> dict:
    largest = max(args.sentences)
    flags = ["--max-sentences", str(largest), "--max-batch-sentences", str(args.batch)]
    proc, url = start_server(args.run_dir, args.beam, flags, threads=args.server_threads)
    try:
        results = [measure(url, proc.pid, route, n, args) for route in args.routes for n in args.sentences]
    finally:
        stop_server(proc)
    settings = {"run_dir": args.run_dir, "sentences": args.sentences, "routes": args.routes, "beam": args.beam,
                "max_batch_sentences": args.batch, "sentence": SENTENCE, "probe": PROBE}
    return make_report("serve_bounds", command=command(__file__, argv), environment=environment(), settings=settings,
                       results=results, notes=["peak_mb: VmHWM over the request minus VmRSS before it",
                                               "probe: one-sentence /translate requests sent one after another "
                                               "while the large request ran"])


def format_table(report: dict) -> str:
    env = report["environment"]
    lines = [f"serve_bounds on {env.get('cpu')} ({env.get('date')}); batches of "
             f"{report['settings']['max_batch_sentences']} sentences, beam {report['settings']['beam']}",
             f"{'route':<10} {'sentences':>9} {'status':>6} {'seconds':>8} {'peak MB':>8} {'answer kB':>10} "
             f"{'probes':>6} {'probe p50 s':>11} {'probe max s':>11}"]
    for row in report["results"]:
        lines.append(f"{row['route']:<10} {row['sentences']:>9} {row['status']:>6} {row['seconds']:>8} "
                     f"{row['peak_mb']:>8} {row['answer_kb']:>10} {row['probes']:>6} "
                     f"{row['probe_p50_s'] if row['probe_p50_s'] is not None else '-':>11} "
                     f"{row['probe_max_s'] if row['probe_max_s'] is not None else '-':>11}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--sentences", type=int, nargs="+", default=[250, 500, 1000])
    parser.add_argument("--routes", nargs="+", choices=ROUTES, default=list(ROUTES))
    parser.add_argument("--source", default="de")
    parser.add_argument("--target", default="en")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32, help="--max-batch-sentences of the server")
    parser.add_argument("--probe-gap", type=float, default=0.1, help="seconds between two probes")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--server-threads", type=int, default=None)
    parser.add_argument("--json", default="", help="write the report here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if min(args.sentences) < 1:
        parser.error("--sentences: each at least 1")
    return run_main("serve_bounds", args, argv, run_bench, format_table)


if __name__ == "__main__":
    sys.exit(main())

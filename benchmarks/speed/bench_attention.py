#!/usr/bin/env python3
"""Time attention: a per-example Python loop vs the batched bmm path vs SDPA.

Shapes: batch, src_len, tgt_len, hidden as in attnmt.attention. Two settings:
    multi30k: batch 128, src_len 30, tgt_len 30, hidden 512
    long:     batch 128, src_len 512, tgt_len 30, hidden 512
Additive attention is timed for one decoder step (query (batch, hidden)); scaled dot-product and
multi-head attention (8 heads) for all tgt_len queries at once. Source lengths are drawn between
half and all of src_len, so the batched paths carry padding and a mask while the loop does not.

    benchmarks/speed/bench_attention.py [--device cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from attnmt.attention import (
    AdditiveAttention,
    MultiHeadAttention,
    scaled_dot_product,
    lengths_to_mask,
)
from benchmarks.common import command, environment, make_report, median_time, torch_threads, write_report

SETTINGS = {
    "multi30k": dict(batch=128, src_len=30, tgt_len=30, hidden=512),
    "long": dict(batch=128, src_len=512, tgt_len=30, hidden=512),
}


def cpu_busy_seconds() -> float | None:
    """CPU seconds all processes spent busy so far (Linux /proc/stat), to spot a shared machine."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def cases(setting: str, device: torch.device):
    """Yield (attention, path, fn, is_loop) for one shape setting."""
    s = SETTINGS[setting]
    batch, src_len, tgt_len, hidden = s["batch"], s["src_len"], s["tgt_len"], s["hidden"]
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(src_len // 2, src_len + 1, (batch,), generator=gen)
    lengths[0] = src_len
    keys = torch.randn(batch, src_len, hidden, generator=gen).to(device)  # (batch, src_len, hidden)
    step_query = torch.randn(batch, hidden, generator=gen).to(device)  # (batch, hidden)
    queries = torch.randn(batch, tgt_len, hidden, generator=gen).to(device)
    # queries: (batch, tgt_len, hidden)
    mask = lengths_to_mask(lengths.to(device), src_len)  # (batch, src_len)
    n = lengths.tolist()

    additive = AdditiveAttention(hidden, hidden, hidden).to(device).eval()
    proj = additive.project_keys(keys)  # (batch, src_len, hidden), once per batch
    name = "additive (1 step)"
    yield name, "loop", lambda: [
        additive(step_query[b : b + 1], keys[b : b + 1, : n[b]], projected_keys=proj[b : b + 1, : n[b]])
        for b in range(batch)
    ], True
    yield name, "batched", lambda: additive(step_query, keys, mask=mask, projected_keys=proj), False
    yield name, "batched, keys re-projected", lambda: additive(step_query, keys, mask=mask), False

    rows_mask = mask[:, None, :]  # (batch, 1, src_len): every query row sees the same padding
    yield "scaled dot-product", "loop", lambda: [
        scaled_dot_product(queries[b : b + 1], keys[b : b + 1, : n[b]], keys[b : b + 1, : n[b]], None, fast=False)
        for b in range(batch)
    ], True
    yield "scaled dot-product", "batched", lambda: scaled_dot_product(queries, keys, keys, rows_mask, fast=False), False
    yield "scaled dot-product", "sdpa", lambda: scaled_dot_product(queries, keys, keys, rows_mask, fast=True), False

    mha = MultiHeadAttention(hidden, 8).to(device).eval()
    yield "multi-head (8)", "loop", lambda: [
        mha(queries[b : b + 1], keys[b : b + 1, : n[b]]) for b in range(batch)
    ], True
    yield "multi-head (8)", "batched", lambda: mha(queries, keys, mask=mask), False
    yield "multi-head (8)", "sdpa", lambda: mha(queries, keys, mask=mask, need_weights=False), False


def measure(args: argparse.Namespace, device: torch.device) -> list[dict]:
    """One "attention" row per setting, attention and path, with its speed-up over the loop and
    over the batched path."""
    rows = []
    with torch.inference_mode():
        for setting in args.settings:
            loop_time = batched_time = None
            for attention, path, fn, is_loop in cases(setting, device):
                repeats = args.loop_repeats if is_loop else args.repeats
                seconds = median_time(fn, repeats=repeats, warmup=min(args.warmup, repeats), device=device).median
                if path == "loop":
                    loop_time, batched_time = seconds, None
                elif path == "batched":
                    batched_time = seconds
                rows.append(dict(kind="attention", setting=setting, **SETTINGS[setting], attention=attention,
                                 path=path, ms_per_call=seconds * 1e3, repeats=repeats,
                                 loop_over_this=loop_time / seconds,
                                 batched_over_this=None if batched_time is None else batched_time / seconds))
                print(f"  {setting:9s} {attention:20s} {path:27s} {seconds * 1e3:10.3f} ms", file=sys.stderr)
    return rows


def other_load(busy_start: float | None, own_start: os.times_result, wall_start: float) -> float | None:
    """Share of the machine's CPU time that other processes used since the starts (0 = quiet)."""
    if busy_start is None:
        return None
    own_end, wall = os.times(), time.perf_counter() - wall_start
    own = (own_end.user + own_end.system) - (own_start.user + own_start.system)
    other = cpu_busy_seconds() - busy_start - own
    return max(0.0, other / (wall * (os.cpu_count() or 1)))


def print_table(report: dict) -> None:
    print("| setting | attention | path | ms / call | loop / this | batched / this |")
    print("|---|---|---|---:|---:|---:|")
    for r in report["results"]:
        speedup = "" if r["batched_over_this"] is None else f"{r['batched_over_this']:.2f}x"
        print(f"| {r['setting']} | {r['attention']} | {r['path']} | {r['ms_per_call']:.3f} | "
              f"{r['loop_over_this']:.1f}x | {speedup} |")
    env = report["environment"]
    share = env["other_processes_cpu_share"]
    print(f"\n{env['device']}, torch {env['torch']}, {env['cpu']}, {env['threads']} threads"
          + ("" if share is None else f"; other processes used {share:.0%} of the CPUs"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10, help="repeats for the batched paths")
    parser.add_argument("--loop-repeats", type=int, default=3, help="repeats for the slow loop")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available")
    if min(args.repeats, args.loop_repeats) < 1 or args.warmup < 0:
        parser.error("--repeats and --loop-repeats must be >= 1, --warmup >= 0")
    with torch_threads(args.threads):
        busy_start, own_start, wall_start = cpu_busy_seconds(), os.times(), time.perf_counter()
        rows = measure(args, device)
        env = environment(str(device))
        env["other_processes_cpu_share"] = other_load(busy_start, own_start, wall_start)
    settings = {"shapes": {name: SETTINGS[name] for name in args.settings}, "warmup": args.warmup,
                "repeats": args.repeats, "loop_repeats": args.loop_repeats}
    report = make_report("bench_attention", command=command(__file__, argv), environment=env, settings=settings,
                         results=rows)
    print_table(report)
    if args.json:
        write_report(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

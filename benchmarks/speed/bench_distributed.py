#!/usr/bin/env python3
"""Training throughput on one machine: N torchrun ranks x 1 thread against 1 process x N threads
(and 1 process x 1 thread, the baseline).

Both train the same updates: the process accumulates N batches per update (train.accum_steps=N),
and each of the N ranks takes one of them, so the figures compare like with like. Each run trains
a small Transformer on the first pairs of Multi30k (read through ATTNMT_DATA) for --minutes, then
this prints the median training tokens/s that rank 0 logged (the first record, warm-up, left out).

    ATTNMT_DATA=/path/to/multi30k benchmarks/speed/bench_distributed.py --minutes 1 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import REPO, command, environment, make_report, write_report

MODEL = ["model.arch=transformer", "model.d_model=32", "model.heads=4", "model.ff_dim=64", "model.enc_layers=2",
         "model.dec_layers=2", "model.dropout=0.1", "train.batch_by=tokens", "train.batch_size=800",
         "train.optimizer=adamw", "train.schedule=inverse_sqrt", "train.warmup_steps=100", "train.lr=1e-3",
         "data.train_subset=6000", "train.log_every=2", "train.eval_max_sentences=20", "train.epochs=1",
         "train.save_every_steps=null"]
DEFAULT_CONFIG = REPO / "configs" / "multi30k_transformer.yaml"


def read_rates(label: str, run_dir: Path) -> dict:
    """The median training tokens/s rank 0 logged in run_dir/metrics.jsonl, first record left out."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in records if r["event"] == "train"][1:]
    if not rates:
        sys.exit(f"{label}: {len(records)} records, none for training after the first; give it more --minutes")
    return {"tokens_per_s": statistics.median(rates), "records": len(rates),
            "updates": max(r["step"] for r in records if "step" in r)}


def run(label: str, cmd: list[str], run_dir: Path, env: dict, *, processes: int, threads: int) -> dict:
    """Train with `cmd`; one "train" row."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{label} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return {"kind": "train", "label": label, "processes": processes, "threads": threads,
            **read_rates(label, run_dir), "wall_s": round(time.perf_counter() - start)}


def measure(args: argparse.Namespace, tmp: Path) -> list[dict]:
    """The ranks first, then one process: a machine whose load drifts shows it in the baseline
    (1 process x 1 thread) run last."""
    n, env = args.ranks, dict(os.environ)
    overrides = [*MODEL, f"train.max_minutes={args.minutes}", *args.overrides]
    train = ["-m", "attnmt", "train", str(args.config), *[arg for item in overrides for arg in ("--set", item)]]
    rows = [run(f"{n} processes x 1 thread (torchrun, gloo)",
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), *train,
                 "--run-dir", str(tmp / "ranks"), "--set", "train.num_threads=1"],
                tmp / "ranks", dict(env, OMP_NUM_THREADS="1"), processes=n, threads=1)]
    for threads in (n, 1):
        rows.append(run(f"1 process x {threads} thread(s) (accum_steps={n})",
                        [sys.executable, *train, "--run-dir", str(tmp / f"one{threads}"),
                         "--set", f"train.num_threads={threads}", "--set", f"train.accum_steps={n}"],
                        tmp / f"one{threads}", env, processes=1, threads=threads))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--minutes", type=float, default=1.0, help="training time per configuration")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="default: multi30k_transformer.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a further override, after the small model's (repeatable)")
    parser.add_argument("--json", default=None, help="also write the report here")
    args = parser.parse_args(argv)
    if args.ranks < 2 or args.minutes <= 0:
        parser.error(f"--ranks={args.ranks} must be >= 2 and --minutes={args.minutes} positive")
    if args.config == DEFAULT_CONFIG and not os.environ.get("ATTNMT_DATA"):
        sys.exit("set ATTNMT_DATA to the folder holding Multi30k's files")
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(args, Path(tmp))
    env = environment("cpu")
    report = make_report("bench_distributed", command=command(__file__, argv), environment=env,
                         settings={"ranks": args.ranks, "minutes": args.minutes, "config": str(args.config),
                                   "overrides": [*MODEL, *args.overrides]}, results=rows)
    print(f"# {env['cpu']}, {env['cpu_count']} cores, torch {env['torch']}, load average "
          f"{env['load_average'][0]:.1f} at the end, {env['date']}")
    for row in rows:
        print(f"{row['label']:<40} {row['tokens_per_s']:>8,.0f} target tokens/s "
              f"(median of {row['records']} windows, {row['updates']} updates, {row['wall_s']} s wall)")
    ranks, threaded, single = (row["tokens_per_s"] for row in rows)
    print(f"ratio {args.ranks} ranks / 1 process x {args.ranks} threads: {ranks / threaded:.2f}; "
          f"over 1 thread: {ranks / single:.2f} and {threaded / single:.2f}")
    if args.json:
        write_report(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

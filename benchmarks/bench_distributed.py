#!/usr/bin/env python
"""Training throughput on one machine: N torchrun ranks x 1 thread against 1 process x N threads
(and 1 process x 1 thread, the baseline).

Both train the same updates: the process accumulates N batches per update (train.accum_steps=N),
and each of the N ranks takes one of them, so the figures compare like with like. Each run trains
a small Transformer on the first pairs of Multi30k (read through ATTNMT_DATA) for --minutes, then
this prints the median training tokens/s that rank 0 logged (the first record, warm-up, left out).

    ATTNMT_DATA=/path/to/multi30k python benchmarks/bench_distributed.py --minutes 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = ["model.arch=transformer", "model.d_model=32", "model.heads=4", "model.ff_dim=64", "model.enc_layers=2",
         "model.dec_layers=2", "model.dropout=0.1", "train.batch_by=tokens", "train.batch_size=800",
         "train.optimizer=adamw", "train.schedule=inverse_sqrt", "train.warmup_steps=100", "train.lr=1e-3",
         "data.train_subset=6000", "train.log_every=2", "train.eval_max_sentences=20", "train.epochs=1",
         "train.save_every_steps=null"]


def run(label: str, cmd: list[str], run_dir: Path, env: dict) -> dict:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{label} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in rows if r["event"] == "train"][1:]
    if not rates:
        sys.exit(f"{label}: {len(rows)} records, none for training after the first; give it more --minutes")
    return {"label": label, "tokens_per_s": statistics.median(rates), "records": len(rates),
            "updates": max(r["step"] for r in rows if "step" in r), "wall_s": round(time.perf_counter() - start)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--minutes", type=float, default=1.0, help="training time per configuration")
    args = parser.parse_args()
    if not os.environ.get("ATTNMT_DATA"):
        sys.exit("set ATTNMT_DATA to the folder holding Multi30k's files")
    n = args.ranks
    config = Path(__file__).resolve().parents[1] / "configs" / "multi30k_transformer.yaml"
    common = [arg for item in [*MODEL, f"train.max_minutes={args.minutes}"] for arg in ("--set", item)]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)

        def one_process(threads: int) -> dict:
            return run(f"1 process x {threads} thread(s) (accum_steps={n})",
                       [sys.executable, "-m", "attnmt", "train", str(config), "--run-dir", f"{tmp}/one{threads}",
                        *common, "--set", f"train.num_threads={threads}", "--set", f"train.accum_steps={n}"],
                       Path(tmp) / f"one{threads}", env)

        # The ranks run first, then one process: a machine whose load drifts shows it in the
        # baseline (1 process x 1 thread) run last.
        ranks = run(f"{n} processes x 1 thread (torchrun, gloo)",
                    [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
                     "-m", "attnmt", "train", str(config), "--run-dir", f"{tmp}/ranks", *common,
                     "--set", "train.num_threads=1"],
                    Path(tmp) / "ranks", dict(env, OMP_NUM_THREADS="1"))
        threaded = one_process(n)
        single = one_process(1)
    import torch

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.1f} at the end, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for result in (ranks, threaded, single):
        print(f"{result['label']:<40} {result['tokens_per_s']:>8,.0f} target tokens/s "
              f"(median of {result['records']} windows, {result['updates']} updates, {result['wall_s']} s wall)")
    print(f"ratio {n} ranks / 1 process x {n} threads: {ranks['tokens_per_s'] / threaded['tokens_per_s']:.2f}; "
          f"over 1 thread: {ranks['tokens_per_s'] / single['tokens_per_s']:.2f} and "
          f"{threaded['tokens_per_s'] / single['tokens_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

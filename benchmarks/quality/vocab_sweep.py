#!/usr/bin/env python3
"""The joint vocabulary's size, measured: one config trained at several sentencepiece sizes with
the same time each, then scored on val (beam search) and, once, compared on the test set
(docs/results.md, "The teacher's vocabulary").

The runs train side by side, one process each, all started together and all stopped by the same
`train.max_minutes`: on a machine with fewer cores than runs they share the cores equally, and
whatever else the machine does slows them all alike. Each run's CPU seconds (its process's, from
the operating system when it ends) are reported, so "the same time" can be checked. Early
stopping is off (`train.early_stopping_patience` above the epochs): every run uses its time.

Then, per run: its epochs, updates and greedy val BLEU per epoch (metrics.jsonl), `attnmt evaluate
RUN --split VAL --beam K` (the best checkpoint by val), and one `attnmt compare` on the test split
with the baseline first (the config's own size when it is swept, else the first size): BLEU,
chrF and paired significance of each size against it.

    benchmarks/quality/vocab_sweep.py --out runs/vocab [--config multi30k_transformer]
        [--sizes 1000,2000,4000,8000] [--minutes 120] [--threads 1] [--set KEY=VALUE ...]
        [--beam 5] [--val-split val] [--test-split test_2016_flickr] [--no-train] [--json PATH]

`--no-train` scores runs already in --out (a sweep whose evaluation was cut off).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import command, environment, make_report, run_main  # noqa: E402

ATTNMT = [sys.executable, "-m", "attnmt"]


def sizes_arg(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes are whole numbers joined by commas, e.g. 1000,2000")
    if not sizes or min(sizes) < 20 or len(set(sizes)) != len(sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: sizes must be different and each at least 20")
    return sizes


def run_dir(out: Path, size: int) -> Path:
    return out / f"vocab-{size}"


def train_all(args) -> dict[int, dict]:
    """Start one `attnmt train` per size, all at once; wait for all. Per size: exit code, wall and
    CPU seconds. Each run's log is RUN.log beside it. A run folder that holds a run, or a log
    already there, is refused before any training starts (use --no-train to score them)."""
    from attnmt.errors import AttnmtError
    from attnmt.run_dir import RunDir

    for run in (run_dir(args.out, size) for size in args.sizes):
        RunDir(run).check_new(resume=False, overwrite=False)
        log = run.with_suffix(".log")
        if log.exists():
            raise AttnmtError(f"{log} already exists: a sweep's log is not overwritten (another --out, or --no-train)")
    args.out.mkdir(parents=True, exist_ok=True)
    started = {}
    for size in args.sizes:
        run = run_dir(args.out, size)
        sets = [f"data.spm_vocab_size={size}", "train.epochs=10000", f"train.max_minutes={args.minutes}",
                "train.early_stopping_patience=10000", f"train.num_threads={args.threads}", *args.overrides]
        argv = [*ATTNMT, "train", args.config, "--run-dir", str(run), *[x for s in sets for x in ("--set", s)]]
        with open(run.with_suffix(".log"), "x", encoding="utf-8") as log:
            started[size] = (subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), time.perf_counter())
    trained = {}
    for size, (process, start) in started.items():
        _, status, usage = os.wait4(process.pid, 0)  # the child's own CPU time, which Popen.wait cannot give
        process.returncode = os.waitstatus_to_exitcode(status)
        trained[size] = {"exit": process.returncode, "wall_s": round(time.perf_counter() - start, 1),
                         "cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}
    return trained


def training_record(run: Path) -> dict:
    """The run's time limit and threads (its config.json); its parameters, epochs (a fraction for
    the one the time limit cut short), updates and greedy val BLEU of each epoch (its metrics.jsonl,
    the cut epoch's validation last); the best checkpoint's epoch and greedy val BLEU (best.json)."""
    from attnmt.run_dir import RunDir

    folder = RunDir(run)
    train = folder.config().train
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line]
    start = next(e for e in events if e["event"] == "start")
    curve = [e for e in events if e["event"] in ("epoch", "stop")]  # a stop: the cut epoch's validation
    done = sum(e["event"] == "epoch" for e in curve)
    cut = curve[-1] if curve and curve[-1]["event"] == "stop" else None
    best = folder.pointer("best") or {}
    return {"minutes": train.max_minutes, "threads": train.num_threads, "params": start["params"],
            "epochs": round(done + (cut["update_in_epoch"] / cut["updates_in_epoch"] if cut else 0), 2),
            "updates": max((e.get("step", 0) for e in events), default=0),
            "val_greedy": [e["val_bleu"] for e in curve],
            "best_epoch": best.get("epoch"), "best_complete": best.get("complete", True),
            "best_val_greedy": best.get("val_bleu")}


def attnmt_json(argv: list[str]) -> dict:
    """Run an attnmt command that prints JSON; its output, parsed."""
    done = subprocess.run([*ATTNMT, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        from attnmt.errors import AttnmtError

        raise AttnmtError(f"attnmt {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def short(metric: str) -> str:
    """A metric's key in the rows: BLEU -> bleu, chrF2 (sacreBLEU's name for chrF) -> chrf."""
    return "chrf" if metric.lower().startswith("chrf") else metric.lower()


def run_bench(args, argv) -> dict:
    trained = {} if args.no_train else train_all(args)
    runs = {size: run_dir(args.out, size) for size in args.sizes}
    missing = [str(run) for run in runs.values() if not (run / "metrics.jsonl").is_file()]
    if missing:
        from attnmt.errors import AttnmtError

        raise AttnmtError(f"no training in {', '.join(missing)} (see {missing[0]}.log)")
    rows = []
    for size, run in runs.items():
        val = attnmt_json(["evaluate", str(run), "--split", args.val_split, "--beam", str(args.beam)])
        rows.append({"kind": "vocab", "size": size, "run": str(run), **trained.get(size, {}),
                     **training_record(run), "val_bleu": val["bleu"], "val_chrf": val["chrf"]})
    from attnmt.config import find_config, load_config

    own = load_config(find_config(args.config), args.overrides).data.spm_vocab_size
    order = sorted(args.sizes, key=lambda size: size != own)  # the config's own size first: the baseline
    test = attnmt_json(["compare", *(str(runs[size]) for size in order), "--split", args.test_split,
                        "--beam", str(args.beam), "--json"])
    for row in rows:
        i = order.index(row["size"])
        row.update({f"test_{short(metric)}": scores[i] for metric, scores in test["scores"].items()})
        for metric, paired in (test["paired"][i - 1].items() if i else ()):
            row[f"test_{short(metric)}_vs_baseline"] = {key: paired[key] for key in
                                                         ("difference", "ci_low", "ci_high", "p_bootstrap",
                                                          "p_randomization")}
    return make_report("vocab_sweep", command=command(__file__, argv), environment=environment(),
                       settings={"config": args.config, "sizes": args.sizes, "minutes": args.minutes,
                                 "threads": args.threads, "overrides": args.overrides, "beam": args.beam,
                                 "val_split": args.val_split, "test_split": args.test_split,
                                 "baseline": order[0], "trained_here": not args.no_train},
                       results=rows, notes=[f"test signatures: {test['signatures']}"])


def format_table(report: dict) -> str:
    s = report["settings"]
    minutes = ", ".join(sorted({f"{r['minutes']:g}" if r["minutes"] else "no limit" for r in report["results"]}))
    threads = ", ".join(sorted({str(r["threads"] or "default") for r in report["results"]}))
    lines = [f"{s['config']}, {minutes} minutes each, {threads} thread(s); val and "
             f"{s['test_split']} at beam {s['beam']}; baseline {s['baseline']}",
             "| pieces | params | CPU s | epochs | updates | best epoch | its val greedy | val | test BLEU | "
             "test chrF | BLEU vs baseline [95%], p (ar) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in report["results"]:
        paired = r.get("test_bleu_vs_baseline")
        versus = (f"{paired['difference']:+.2f} [{paired['ci_low']:+.2f}, {paired['ci_high']:+.2f}], "
                  f"{paired['p_randomization']:.4f}" if paired else "baseline")
        best = f"{r['best_epoch']}{'' if r['best_complete'] else ' (cut)'}"
        lines.append(f"| {r['size']:,} | {r['params'] / 1e6:.2f}M | {r.get('cpu_s', '-')} | {r['epochs']} | "
                     f"{r['updates']:,} | {best} | {r['best_val_greedy']} | "
                     f"{r['val_bleu']:.2f} | {r['test_bleu']:.2f} | {r['test_chrf']:.2f} | {versus} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="vocab_sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="the folder of the runs (vocab-SIZE each)")
    p.add_argument("--config", default="multi30k_transformer", help="config file or packaged config name")
    p.add_argument("--sizes", type=sizes_arg, default=[1000, 2000, 4000, 8000], help="joint sentencepiece sizes")
    p.add_argument("--minutes", type=float, default=120.0, help="train.max_minutes of every run (default 120)")
    p.add_argument("--threads", type=int, default=1, help="train.num_threads of every run (default 1)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="another config override for every run (after the sweep's own)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--val-split", default="val")
    p.add_argument("--test-split", default="test_2016_flickr")
    p.add_argument("--no-train", action="store_true", help="score the runs already in --out")
    p.add_argument("--json", default="vocab_sweep.json", metavar="PATH", help="the report ('': none)")
    p.add_argument("--quiet", action="store_true", help="no table, warnings only")
    args = p.parse_args(argv)
    if args.minutes <= 0 or args.threads < 1 or args.beam < 1 or len(args.sizes) < 2:
        print("vocab_sweep: error: --minutes must be > 0, --threads and --beam >= 1, and --sizes two or more",
              file=sys.stderr)
        return 2
    return run_main("vocab_sweep", args, argv, run_bench, format_table)


if __name__ == "__main__":
    raise SystemExit(main())

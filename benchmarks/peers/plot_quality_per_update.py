#!/usr/bin/env python3
"""Training-loss curves per update, attnmt runs against OpenNMT-py (benchmarks/peers/onmt_compare.py).

    benchmarks/peers/plot_quality_per_update.py -o docs/quality_per_update.png \\
        --attnmt "attnmt pre-norm=runs/q_pre" --attnmt "attnmt post-norm=runs/q_post" \\
        --onmt runs/onmt/summary.json --epoch-updates 227

attnmt logs, every `train.log_every` updates, the mean loss per target token over the epoch so far;
OpenNMT-py logs the mean over its last `report_every` updates with the window's target tokens. The
OpenNMT-py windows are turned into the same running mean over the epoch (restarting every
--epoch-updates updates), so both curves measure the same thing. Prints the values every 50 updates
as a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import read_report, rows


def attnmt_curve(run_dir: Path) -> dict[int, float]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["step"]: r["loss"] for r in rows if r.get("event") == "train"}


def onmt_running_mean(windows: list[dict], epoch_updates: int) -> dict[int, float]:
    """Running mean per target token since the start of the epoch, from per-window means.

    A window belongs to the epoch of its first update; with windows of 10 updates and epochs of 227,
    the window 221-230 closes epoch 1 and the running mean restarts at 231 (3 updates late).
    """
    curve, loss_sum, tokens, previous, epoch = {}, 0.0, 0, 0, 0
    for w in windows:
        if previous // epoch_updates != epoch:  # first update of this window is `previous + 1`
            epoch, loss_sum, tokens = previous // epoch_updates, 0.0, 0
        loss_sum += w["loss"] * w["tgt_tokens"]
        tokens += w["tgt_tokens"]
        curve[w["step"]] = loss_sum / tokens
        previous = w["step"]
    return curve


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, required=True, help="PNG to write")
    ap.add_argument("--attnmt", action="append", default=[], metavar="LABEL=RUN_DIR")
    ap.add_argument("--onmt", type=Path, help="summary.json from benchmarks/peers/onmt_compare.py")
    ap.add_argument("--epoch-updates", type=int, default=227)
    args = ap.parse_args(argv)
    curves: dict[str, dict[int, float]] = {}
    for item in args.attnmt:
        label, sep, run_dir = item.partition("=")
        if not sep or not (Path(run_dir) / "metrics.jsonl").exists():
            ap.error(f"--attnmt {item!r}: expected LABEL=RUN_DIR with a metrics.jsonl")
        curves[label] = attnmt_curve(Path(run_dir))
    if args.onmt:
        curves["OpenNMT-py 3.5.1"] = onmt_running_mean(rows(read_report(args.onmt, "onmt_compare"), "loss"),
                                                       args.epoch_updates)
    if not curves:
        ap.error("nothing to plot: give --attnmt and/or --onmt")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, curve in curves.items():
        steps = sorted(curve)
        ax.plot(steps, [curve[s] for s in steps], label=label)
    ax.axvline(args.epoch_updates, color="grey", lw=0.5)
    ax.set_xlabel("update (128 sentences)")
    ax.set_ylabel("training loss per target token\n(mean over the epoch so far)")
    ax.set_ylim(top=7.5)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    print(f"wrote {args.output}")

    marks = sorted(set.intersection(*(set(c) for c in curves.values())))
    marks = [s for s in marks if s % 50 == 0 or s % args.epoch_updates == 0]
    print("| update | " + " | ".join(curves) + " |")
    print("|---:|" + "---:|" * len(curves))
    for s in marks:
        print(f"| {s} | " + " | ".join(f"{c[s]:.3f}" for c in curves.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Native decoding before / after a change, in one process: the same weights, the same sentences.

The package as of git revision BEFORE is copied out of the repository (``git archive``) under
the name ``attnmt_before`` and loaded next to the working tree's ``attnmt``; both translate the
same sentences of a run through ``Translator.translate`` (tokenizing included, loading
excluded), alternating before/after (ABBA...) to spread the host's speed drift, after one
untimed round. It prints, per beam size, the median sentences/s and output tokens/s of each,
their ratio, and how many translations are token-for-token identical. On a shared host the
ratio of process CPU seconds (``cpu_speedup``, best with --threads 1) is steadier than the
wall-clock one, which other processes' load inflates.

    benchmarks/compare_decode.py RUN_DIR --before afeb373 [--beams 1 5] [--sentences 300] \\
        [--threads 2] [--repeats 2] [--batch-size 64] [--json compare.json]
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch

from attnmt.data.corpus import corpus_spec, load_corpus
from attnmt.translator import Translator

REPO = Path(__file__).resolve().parents[1]


def load_before(revision: str, folder: Path):
    """Extract src/attnmt at `revision` as the package attnmt_before; returns its Translator class."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "src/attnmt"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    package = folder / "attnmt_before"
    (folder / "src" / "attnmt").rename(package)
    for path in package.rglob("*.py"):  # absolute imports point at the copy
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"\battnmt(?=[.\s])", "attnmt_before", text), encoding="utf-8")
    sys.path.insert(0, str(folder))
    return importlib.import_module("attnmt_before.translator").Translator


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compare_decode", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--before", required=True, help="git revision of the 'before' package")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--sentences", type=int, default=None, help="the first N sentences (default: all)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2, help="timed runs of each side per beam size")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="attnmt-before-") as scratch:
        before_cls = load_before(args.before, Path(scratch))
        sides = {"before": before_cls.load(args.run_dir, device="cpu"), "after": Translator.load(args.run_dir, device="cpu")}
        sentences = list(load_corpus(corpus_spec(sides["after"].cfg.data), args.split).src)[: args.sentences]
        report = {"run_dir": args.run_dir, "before": args.before, "sentences": len(sentences), "threads": args.threads,
                  "batch_size": args.batch_size, "torch": torch.__version__,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "beams": {}}
        for beam in args.beams:
            seconds: dict[str, list[float]] = {"before": [], "after": []}
            cpu_seconds: dict[str, list[float]] = {"before": [], "after": []}
            outputs = {}
            for round_ in range(args.repeats + 1):  # round 0 is untimed
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                for side in order:
                    start, cpu_start = time.perf_counter(), time.process_time()
                    outputs[side] = sides[side].translate(sentences, beam_size=beam, batch_size=args.batch_size)
                    if round_:
                        seconds[side].append(time.perf_counter() - start)
                        cpu_seconds[side].append(time.process_time() - cpu_start)
            row = {"identical": sum(a.tokens == b.tokens for a, b in zip(outputs["before"], outputs["after"])),
                   "max_score_diff": max((abs(a.score - b.score) for a, b in zip(outputs["before"], outputs["after"])),
                                         default=0.0)}
            for side in sides:
                sec = statistics.median(seconds[side])
                tokens = sum(len(r.tokens) for r in outputs[side])
                row[side] = {"seconds": [round(s, 3) for s in seconds[side]],
                             "cpu_seconds": [round(s, 3) for s in cpu_seconds[side]], "sent_per_s": round(len(sentences) / sec, 2),
                             "tgt_tok_per_s": round(tokens / sec, 1), "mean_output_len": round(tokens / len(sentences), 2)}
            row["speedup"] = round(row["after"]["sent_per_s"] / row["before"]["sent_per_s"], 3)
            row["cpu_speedup"] = round(statistics.median(cpu_seconds["before"]) / statistics.median(cpu_seconds["after"]), 3)
            report["beams"][beam] = row
            print(f"beam {beam}: {len(sentences)} sentences; before {row['before']['sent_per_s']:.1f} sent/s "
                  f"{row['before']['tgt_tok_per_s']:,.0f} tok/s; after {row['after']['sent_per_s']:.1f} sent/s "
                  f"{row['after']['tgt_tok_per_s']:,.0f} tok/s; {row['speedup']:.2f}x (CPU time: {row['cpu_speedup']:.2f}x); identical {row['identical']}/"
                  f"{len(sentences)} (max score diff {row['max_score_diff']:.1e}); mean length "
                  f"{row['after']['mean_output_len']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

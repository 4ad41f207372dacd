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

    benchmarks/speed/compare_decode.py RUN_DIR --before afeb373 [--beams 1 5] [--sentences 300] \\
        [--threads 2] [--repeats 2] [--batch-size 64] [--json compare.json]
"""

from __future__ import annotations

import argparse
import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt import Translator
from attnmt.data.corpus import corpus_spec, load_corpus
from benchmarks.common import REPO, Timing, command, environment, make_report, rate, timed, torch_threads, write_report


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


def compare_beam(sides: dict, sentences: list[str], *, beam: int, repeats: int, batch_size: int) -> dict:
    """One "decode" row: both sides ABBA..., round 0 untimed; figures of each and their ratios."""
    timings = {side: Timing() for side in sides}
    for round_ in range(repeats + 1):
        for side in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
            run = timed(lambda: sides[side].translate(sentences, beam_size=beam, batch_size=batch_size))
            if round_:
                timings[side].add(run)
            else:
                timings[side].result = run.result
    before, after = timings["before"].result, timings["after"].result
    row = {"kind": "decode", "beam": beam, "sentences": len(sentences),
           "identical": sum(a.tokens == b.tokens for a, b in zip(before, after)),
           "max_score_diff": max((abs(a.score - b.score) for a, b in zip(before, after)), default=0.0)}
    for side, timing in timings.items():
        tokens = sum(len(r.tokens) for r in timing.result)
        row[side] = {"seconds": [round(s, 3) for s in timing.seconds],
                     "cpu_seconds": [round(s, 3) for s in timing.cpu_seconds],
                     "sent_per_s": rate(len(sentences), timing.median, 2), "tgt_tok_per_s": rate(tokens, timing.median),
                     "mean_output_len": round(tokens / max(len(sentences), 1), 2)}
    row["speedup"] = round(row["after"]["sent_per_s"] / row["before"]["sent_per_s"], 3)
    row["cpu_speedup"] = round(timings["before"].median_cpu / timings["after"].median_cpu, 3)
    return row


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
    with torch_threads(args.threads), tempfile.TemporaryDirectory(prefix="attnmt-before-") as scratch:
        before_cls = load_before(args.before, Path(scratch))
        sides = {"before": before_cls.load(args.run_dir, device="cpu"),
                 "after": Translator.load(args.run_dir, device="cpu")}
        sentences = list(load_corpus(corpus_spec(sides["after"].cfg.data), args.split).src)[: args.sentences]
        rows = []
        for beam in args.beams:
            row = compare_beam(sides, sentences, beam=beam, repeats=args.repeats, batch_size=args.batch_size)
            rows.append(row)
            b, a = row["before"], row["after"]
            print(f"beam {beam}: {len(sentences)} sentences; before {b['sent_per_s']:.1f} sent/s "
                  f"{b['tgt_tok_per_s']:,.0f} tok/s; after {a['sent_per_s']:.1f} sent/s {a['tgt_tok_per_s']:,.0f} "
                  f"tok/s; {row['speedup']:.2f}x (CPU time: {row['cpu_speedup']:.2f}x); identical "
                  f"{row['identical']}/{len(sentences)} (max score diff {row['max_score_diff']:.1e}); mean length "
                  f"{a['mean_output_len']}", flush=True)
        env = environment("cpu")
    settings = {"run_dir": args.run_dir, "before": args.before, "split": args.split, "sentences": len(sentences),
                "batch_size": args.batch_size, "repeats": args.repeats}
    if args.json:
        write_report(args.json, make_report("compare_decode", command=command(__file__, argv), environment=env,
                                            settings=settings, results=rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

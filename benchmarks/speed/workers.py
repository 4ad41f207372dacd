#!/usr/bin/env python3
"""Native decoding: several worker processes or intra-op threads? (attnmt translate --workers)

Each configuration WxT decodes the same sentences of a split (test_2016_flickr by default) with W
processes of T torch threads each: 1xT is one Translator in this process with T threads (what
`--workers 1 --threads T` does), Wx T with W > 1 a workers.WorkerPool (`--workers W --threads T`).
Every configuration is loaded first, then the rounds alternate between them (round r times each
configuration once, per beam), so that a neighbour's load on a shared machine falls on all of them
alike; each row reports the median of --rounds, sentences/s, and the ratio to the baseline (1x2
when it is among --configs, else the first), with the share of sentences whose tokens equal the
baseline's. Tokenizing and detokenizing are included; loading and one warm-up call are not.

    benchmarks/speed/workers.py RUN_DIR [--sentences N] [--beams 1 5] [--configs 1x2 2x1] \\
        [--rounds 5] [--batch-size 64] [--json workers.json]

Shapes: none; everything goes through the translator's text interface.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt import Translator
from attnmt.config import load_saved_config
from attnmt.data.corpus import corpus_spec, load_corpus
from attnmt.workers import WorkerPool
from benchmarks.common import command, environment, make_report, rate, run_main, timed, torch_threads

log = logging.getLogger("attnmt.bench_workers")

WARMUP_SENTENCES = 16
BASELINE = "1x2"


def config(text: str) -> tuple[int, int]:
    """'WxT' (workers x threads each), both 1 or more."""
    try:
        workers, threads = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected WORKERSxTHREADS, e.g. 2x1") from None
    if workers < 1 or threads < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: workers and threads must be >= 1")
    return workers, threads


def name(setup: tuple[int, int]) -> str:
    return f"{setup[0]}x{setup[1]}"


def baseline_of(setups: list[tuple[int, int]]) -> str:
    """The configuration the others are compared with: 1x2 when measured, else the first."""
    return BASELINE if BASELINE in map(name, setups) else name(setups[0])


def open_decoders(stack: ExitStack, run_dir: Path, setups: list[tuple[int, int]]) -> dict:
    """Each configuration's `translate`: in this process for 1xT (under T threads at call time),
    else a worker pool kept open on `stack`."""
    decoders = {}
    for workers, threads in setups:
        if workers == 1:
            translator = Translator.load(run_dir, device="cpu")

            def in_process(sentences, _threads=threads, _translator=translator, **options):
                with torch_threads(_threads):
                    return _translator.translate(sentences, **options)
            decoders[name((workers, threads))] = in_process
        else:
            pool = stack.enter_context(WorkerPool(run_dir, workers=workers, threads=threads, device="cpu"))
            decoders[name((workers, threads))] = pool.translate
    return decoders


def time_rounds(decoders: dict, sentences: list[str], *, beams: list[int], rounds: int,
                batch_size: int) -> dict:
    """{(config, beam): (seconds of each round, the last round's output tokens)}, rounds alternating."""
    found: dict = {}
    for beam in beams:
        for decode in decoders.values():  # warm-up, untimed
            decode(sentences[:WARMUP_SENTENCES], beam_size=beam, batch_size=batch_size)
        for round_ in range(rounds):
            for key, decode in decoders.items():
                timing = timed(lambda: decode(sentences, beam_size=beam, batch_size=batch_size))
                seconds, _ = found.get((key, beam), ([], None))
                found[(key, beam)] = (seconds + timing.seconds, [r.tokens for r in timing.result])
                log.info("round %d/%d, beam %d, %s: %.2f s", round_ + 1, rounds, beam, key, timing.seconds[0])
    return found


def make_rows(found: dict, setups: list[tuple[int, int]], beams: list[int], sentences: int) -> list[dict]:
    """One "workers" row per configuration and beam, with its ratio to the baseline's sentences/s."""
    baseline = baseline_of(setups)
    rows = []
    for beam in beams:
        base_seconds, base_tokens = found[(baseline, beam)]
        for setup in setups:
            seconds, tokens = found[(name(setup), beam)]
            median = statistics.median(seconds)
            same = sum(a == b for a, b in zip(tokens, base_tokens))
            rows.append({"kind": "workers", "config": name(setup), "workers": setup[0], "threads": setup[1],
                         "beam": beam, "sentences": sentences, "outputs": len(tokens),
                         "seconds": round(median, 4), "all_seconds": [round(s, 4) for s in seconds],
                         "sent_per_s": rate(sentences, median, 2),
                         "ratio_to_baseline": round(statistics.median(base_seconds) / median, 3),
                         "same_tokens_as_baseline": round(same / max(len(tokens), 1), 4)})
    return rows


def run_bench(args: argparse.Namespace, argv: list[str] | None = None) -> dict:
    """Every row of one invocation; returns the report (benchmarks/common.py's schema)."""
    run_dir = Path(args.run_dir)
    cfg = load_saved_config(run_dir / "config.json")
    sentences = list(load_corpus(corpus_spec(cfg.data), args.split).src)[: args.sentences or None]
    setups = list(dict.fromkeys(args.configs))  # each configuration once
    env = environment("cpu")
    with ExitStack() as stack:
        decoders = open_decoders(stack, run_dir, setups)
        found = time_rounds(decoders, sentences, beams=args.beams, rounds=args.rounds, batch_size=args.batch_size)
    settings = {"run_dir": str(run_dir), "arch": cfg.model.arch, "split": args.split, "sentences": len(sentences),
                "batch_size": args.batch_size, "rounds": args.rounds, "configs": [name(s) for s in setups],
                "baseline": baseline_of(setups)}
    notes = ["config WxT: W worker processes of T torch threads each; 1xT decodes in the benchmark's process"]
    return make_report("bench_workers", command=command(__file__, argv), environment=env, settings=settings,
                       results=make_rows(found, setups, args.beams, len(sentences)), notes=notes)


def format_table(report: dict) -> str:
    env, s = report["environment"], report["settings"]
    lines = [f"attnmt bench_workers: {s['run_dir']} ({s['arch']}), {s['split']}, {s['sentences']} sentences, "
             f"batch {s['batch_size']}, median of {s['rounds']} alternating rounds",
             f"{env['cpu']}, {env['cpu_count']} CPUs, load {env['load_average']}, torch {env['torch']}, {env['date']}",
             "", f"{'config':8}{'beam':>5}{'sent/s':>10}{'seconds':>9}{'vs ' + s['baseline']:>9}{'= base':>9}"]
    for row in report["results"]:
        lines.append(f"{row['config']:8}{row['beam']:>5}{row['sent_per_s']:>10,.1f}{row['seconds']:>9.2f}"
                     f"{row['ratio_to_baseline']:>9.2f}{100 * row['same_tokens_as_baseline']:>8.1f}%")
    return "\n".join(lines + report["notes"])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench_workers", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="a training run (written by attnmt train)")
    p.add_argument("--configs", type=config, nargs="+", default=[(1, 2), (2, 1)], metavar="WxT",
                   help="worker processes x torch threads each (default: 1x2 2x1)")
    p.add_argument("--beams", type=int, nargs="+", default=[1, 5], help="beam sizes (1 = greedy)")
    p.add_argument("--split", default="test_2016_flickr", help="the split to translate (own data: test)")
    p.add_argument("--sentences", type=int, default=None, help="only the first N sentences (smoke runs)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch, as in Translator.translate")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per configuration; the median is reported")
    p.add_argument("--json", default="bench_workers.json", metavar="PATH", help="where the JSON report goes")
    p.add_argument("-q", "--quiet", action="store_true", help="no table")
    return p


def main(argv: list[str] | None = None) -> int:
    """`benchmarks/speed/workers.py RUN_DIR ...`; returns the exit code."""
    args = build_parser().parse_args(argv)
    if min(args.beams + [args.rounds, args.batch_size, args.sentences or 1]) < 1:
        print("bench_workers: error: --beams, --rounds, --batch-size and --sentences must be >= 1", file=sys.stderr)
        return 2
    return run_main("bench_workers", args, argv, run_bench, format_table)


if __name__ == "__main__":
    raise SystemExit(main())

"""The data layer at scale: for synthetic corpora of N pairs (make_corpus.py), how long
`attnmt prepare` takes and how much memory, then how long `attnmt train` takes to its first
update, its memory and tokens/s at a fixed model, the same after `--resume`, and on 2 torchrun
ranks. Every figure is measured on real processes of the real commands.

    python benchmarks/scale/bench_scale.py --pairs 100000 1000000 10000000 --work /tmp/scale --json scale.json

Memory is sampled every 0.1 s over the command's whole process tree (/proc): `rss` is what `ps`
shows, `private` is the anonymous (private) part, which grows with what a process holds; the
rest is files mapped into memory (libraries, and the prepared data's memory maps, which the
operating system's page cache holds once for every process that maps them).

The first update is the first `train` record in metrics.jsonl (train.log_every=1), timed from
the start of the command; tokens/s is the median of the records from update `--warmup` on.

Shapes: none.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import yaml

from benchmarks.common import command, environment, make_report, run_main
from benchmarks.scale.make_corpus import write_corpus

MODEL = dict(arch="transformer", d_model=256, heads=8, ff_dim=1024, enc_layers=3, dec_layers=3, dropout=0.1,
             share_embeddings=True, tie_embeddings=True)


# ----------------------------------------------------------------------------- memory of a process tree

def _tree(root: int) -> list[int]:
    """`root` and its descendants (Linux: /proc/PID/task/TID/children)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return found


def _status_kb(pid: int) -> dict[str, int]:
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                values[key] = int(rest.split()[0])
    except (OSError, ValueError):
        pass
    return values


class TreeMemory:
    """Peak memory of a process tree, sampled on a thread: the sum over its processes of RSS and
    of private (anonymous) memory, and the largest private memory of one process."""

    def __init__(self, proc: subprocess.Popen, interval: float = 0.1):
        self.proc, self.interval = proc, interval
        self.rss_mb = self.private_mb = self.largest_private_mb = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.proc.poll() is None:
            stats = [_status_kb(pid) for pid in _tree(self.proc.pid)]
            self.rss_mb = max(self.rss_mb, sum(s.get("VmRSS", 0) for s in stats) / 1024)
            private = [s.get("RssAnon", 0) / 1024 for s in stats]
            self.private_mb = max(self.private_mb, sum(private))
            self.largest_private_mb = max([self.largest_private_mb, *private])
            time.sleep(self.interval)

    def figures(self) -> dict:
        self.thread.join()
        return {"peak_rss_mb": round(self.rss_mb), "peak_private_mb": round(self.private_mb),
                "peak_private_one_process_mb": round(self.largest_private_mb)}


# ----------------------------------------------------------------------------- running the commands

def _env(cache: Path) -> dict:
    return dict(os.environ, ATTNMT_CACHE=str(cache), PYTHONUNBUFFERED="1")


def run_prepare(config: Path, cache: Path, log: Path) -> dict:
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "attnmt", "prepare", str(config)], env=_env(cache),
                                stdout=out, stderr=subprocess.STDOUT)
        memory = TreeMemory(proc)
        code = proc.wait()
    seconds = time.perf_counter() - start
    if code:
        raise RuntimeError(f"attnmt prepare failed ({code}): see {log}")
    manifest = json.loads(next(cache.glob("prepared/*/manifest.json")).read_text())
    data_bytes = sum(info["bytes"] for info in manifest["files"].values())
    return {"kind": "prepare", "seconds": round(seconds, 1), "pairs_per_s": round(manifest["counts"]["read"] / seconds),
            "pairs": manifest["counts"]["kept"], "prepared_mb": round(data_bytes / 2**20),
            "workers": manifest["prepared"]["workers"], **memory.figures()}


def run_train(argv: list[str], run_dir: Path, cache: Path, log: Path, *, warmup: int, launcher: list[str] | None = None,
              after_step: int = 0) -> dict:
    """One training command; its first update's time, tokens/s and memory."""
    metrics = run_dir / "metrics.jsonl"
    base = [sys.executable, "-m", "attnmt"] if launcher is None else launcher
    start = time.perf_counter()
    first = None
    with open(log, "w") as out:
        proc = subprocess.Popen([*base, "train", *argv], env=_env(cache), stdout=out, stderr=subprocess.STDOUT)
        memory = TreeMemory(proc)
        while proc.poll() is None:
            if first is None and _train_records(metrics, after_step):
                first = time.perf_counter() - start
            time.sleep(0.05)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"attnmt train failed ({proc.returncode}): see {log}")
    records = _train_records(metrics, after_step)
    rates = [r["tokens_per_s"] for r in records if r["step"] >= after_step + warmup]
    waits = [r.get("data_wait", 0.0) for r in records if r["step"] >= after_step + warmup]
    return {"seconds": round(seconds, 1), "first_update_s": None if first is None else round(first, 1),
            "updates": len(records), "tokens_per_s": round(statistics.median(rates)) if rates else None,
            "data_wait_share": round(statistics.mean(waits), 4) if waits else None, **memory.figures()}


def _train_records(metrics: Path, after_step: int) -> list[dict]:
    if not metrics.is_file():
        return []
    rows = []
    for line in metrics.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # a line being written
            continue
        if row.get("event") == "train" and row["step"] > after_step:
            rows.append(row)
    return rows


def bench_size(pairs: int, args: argparse.Namespace) -> list[dict]:
    """Every measurement at one corpus size."""
    work = Path(args.work)
    corpus = work / f"corpus-{pairs}"
    if not (corpus / "train.en").is_file():
        start = time.perf_counter()
        write_corpus(corpus, pairs)
        print(f"[{pairs:,}] corpus written in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    cache, runs = work / f"cache-{pairs}", work / f"runs-{pairs}"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    config = runs / "scale.yaml"
    config.write_text(yaml.safe_dump({
        "data": dict(corpus="files", src_lang="de", tgt_lang="en", train=str(corpus / "train"),
                     valid=str(corpus / "valid"), test=str(corpus / "test"), tokenizer="sentencepiece",
                     spm_vocab_size=8000, spm_joint=True, max_len=100),
        "model": MODEL,
        "train": dict(batch_size=2048, batch_by="tokens", optimizer="adamw", lr=1e-3, betas=[0.9, 0.98],
                      schedule="inverse_sqrt", warmup_steps=800, label_smoothing=0.1, log_every=1,
                      eval_max_sentences=20, save_every_steps=None, num_threads=args.threads, epochs=100,
                      max_updates=args.updates),
    }))
    rows = [{**run_prepare(config, cache, runs / "prepare.log"), "pairs_asked": pairs}]
    print(f"[{pairs:,}] prepare: {rows[-1]}", file=sys.stderr)
    single = runs / "single"
    rows.append({"kind": "train", "pairs_asked": pairs, "ranks": 1,
                 **run_train([str(config), "--run-dir", str(single)], single, cache, runs / "train.log",
                             warmup=args.warmup)})
    print(f"[{pairs:,}] train: {rows[-1]}", file=sys.stderr)
    rows.append({"kind": "resume", "pairs_asked": pairs, "ranks": 1,
                 **run_train(["--resume", str(single), "--set", f"train.max_updates={args.updates + args.resume_updates}"],
                             single, cache, runs / "resume.log", warmup=args.warmup, after_step=args.updates)})
    print(f"[{pairs:,}] resume: {rows[-1]}", file=sys.stderr)
    if args.ranks > 1:
        ranks = runs / "ranks"
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                    str(args.ranks), "-m", "attnmt"]
        rows.append({"kind": "train", "pairs_asked": pairs, "ranks": args.ranks,
                     **run_train([str(config), "--run-dir", str(ranks), "--set",
                                  f"train.num_threads={max(1, args.threads // args.ranks)}"],
                                 ranks, cache, runs / "ranks.log", warmup=args.warmup, launcher=launcher)})
        print(f"[{pairs:,}] {args.ranks} ranks: {rows[-1]}", file=sys.stderr)
    if not args.keep:
        shutil.rmtree(cache, ignore_errors=True)
    return rows


def run_bench(args: argparse.Namespace, argv) -> dict:
    results = []
    for pairs in args.pairs:
        results += bench_size(pairs, args)
    return make_report("bench_scale", command=command(__file__, argv), environment=environment(),
                       settings={"pairs": args.pairs, "updates": args.updates, "resume_updates": args.resume_updates,
                                 "warmup": args.warmup, "threads": args.threads, "ranks": args.ranks,
                                 "model": MODEL, "batch_tokens": 2048},
                       results=results, notes=[__doc__.split("\n\n")[2].replace("\n", " ")])


def format_table(report: dict) -> str:
    lines = ["kind     pairs        ranks  seconds  first_update_s  pairs/s   tokens/s  wait   rss_mb  private_mb"]
    for r in report["results"]:
        lines.append(f"{r['kind']:<8} {r['pairs_asked']:>12,} {r.get('ranks', ''):>5} {r['seconds']:>8} "
                     f"{str(r.get('first_update_s', '')):>15} {str(r.get('pairs_per_s', '')):>8} "
                     f"{str(r.get('tokens_per_s', '')):>9} {str(r.get('data_wait_share', '')):>6} "
                     f"{r['peak_rss_mb']:>7} {r['peak_private_mb']:>10}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench_scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    p.add_argument("--work", required=True, help="folder for the corpora (kept: they take time to write), caches, runs")
    p.add_argument("--updates", type=int, default=40, help="updates of each training command")
    p.add_argument("--resume-updates", type=int, default=20, help="updates of the resumed command")
    p.add_argument("--warmup", type=int, default=5, help="updates left out of tokens/s")
    p.add_argument("--threads", type=int, default=2, help="torch threads (shared among the ranks)")
    p.add_argument("--ranks", type=int, default=2, help="torchrun ranks of the last command (1: none)")
    p.add_argument("--keep", action="store_true", help="keep the prepared data")
    p.add_argument("--json", default="", help="write the JSON report here")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_main("bench_scale", args, argv, run_bench, format_table)


if __name__ == "__main__":
    sys.exit(main())

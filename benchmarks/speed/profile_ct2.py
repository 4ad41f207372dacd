#!/usr/bin/env python3
"""Where CTranslate2's decoding time goes: Linux `perf` samples of the translation call alone.

CTranslate2's PyPI wheels have no profiler of their own, so this samples the process from the
outside. For each export a child process loads ``Translator.load(EXPORT, engine="ctranslate2")``,
translates a few sentences to warm up and waits; ``perf record -p`` then attaches to it, the child
translates the split once (timed) and ``perf`` stops. The samples (all threads: CTranslate2's
workers and Python's) are grouped by the function they fell in: int8 and float32 matrix products
(MKL's kernels inside CTranslate2), quantizing and dequantizing around the int8 products, softmax,
top-k and the rest of the beam search, memory copies, other CTranslate2 code, Python (attnmt's
tokenizing and the call itself), the kernel, and the rest.

    benchmarks/speed/profile_ct2.py EXPORT [EXPORT ...] [--beam 5] [--threads 2] [--sentences N] \\
        [--split test_2016_flickr] [--frequency 999] [--json profile_ct2.json]

Needs `perf` (Debian: linux-perf) and /proc/sys/kernel/perf_event_paranoid <= 2.

Shapes: none; everything goes through the translator's text interface.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt.errors import AttnmtError
from benchmarks.common import REPO, command, environment, make_report, run_main

WARMUP_SENTENCES = 16
# (group, words any of which in "dso symbol" puts a sample there), first match wins
SYMBOL_GROUPS = (
    ("int8 matrix products", ("gemm_s8u8s32", "s8s8s32", "u8s8s32")),
    ("quantize / dequantize", ("quantize",)),
    ("float32 matrix products", ("sgemm", "sgemv", "xsgemv")),
    ("softmax", ("softmax",)),
    ("top-k and beam search", ("TopK", "BeamSearch", "topk", "beam_search")),
    ("memory copies", ("memmove", "memcpy", "memset")),
    ("other CTranslate2", ("ctranslate2",)),
    ("Python (tokenizing, the call)", ("libpython", "python3")),
    ("kernel", ("[kernel",)),
)
OTHER = "other"


def group_of(dso: str, symbol: str) -> str:
    text = f"{dso} {symbol}"
    for name, words in SYMBOL_GROUPS:
        if any(word in text for word in words):
            return name
    return OTHER


def parse_report(text: str) -> dict[str, float]:
    """`perf report --sort dso,sym --field-separator=@` lines -> percent per group."""
    shares = {name: 0.0 for name, _ in SYMBOL_GROUPS} | {OTHER: 0.0}
    for line in text.splitlines():
        if line.startswith("#") or "@" not in line:
            continue
        percent, dso, symbol = (part.strip() for part in line.split("@", 2))
        if percent.endswith("%"):
            shares[group_of(dso, symbol)] += float(percent[:-1])
    return shares


def _child(args: argparse.Namespace) -> int:
    """Load, warm up, say "ready", wait for a line, translate once, say "done SECONDS TOKENS"."""
    from attnmt import Translator
    from attnmt.data.corpus import corpus_spec, load_corpus

    translator = Translator.load(args.exports[0], device="cpu", engine="ctranslate2", inter_threads=args.threads,
                                 intra_threads=1)
    sentences = list(load_corpus(corpus_spec(translator.cfg.data), args.split).src)[: args.sentences or None]
    translator.translate(sentences[:WARMUP_SENTENCES], beam_size=args.beam)
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.perf_counter()
    results = translator.translate(sentences, beam_size=args.beam)
    seconds = time.perf_counter() - start
    print(f"done {seconds:.4f} {sum(len(r.tokens) for r in results)} {len(sentences)}", flush=True)
    return 0


def _expect(child: subprocess.Popen, word: str) -> str:
    line = child.stdout.readline()
    if not line.startswith(word):
        child.kill()
        raise AttnmtError(f"the profiled child process failed before '{word}': {child.stderr.read()[-2000:]}")
    return line


def profile_export(export: str, args: argparse.Namespace, folder: Path) -> dict:
    """One export: the child under `perf record -p`, the samples grouped."""
    argv = [sys.executable, str(Path(__file__).resolve()), export, "--child", "--beam", str(args.beam), "--threads",
            str(args.threads), "--split", args.split] + (["--sentences", str(args.sentences)] if args.sentences else [])
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=REPO)
    data = folder / f"{Path(export).name}.perf"
    perf = None
    try:
        _expect(child, "ready")
        perf = subprocess.Popen(["perf", "record", "-F", str(args.frequency), "-p", str(child.pid), "-o", str(data)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)  # perf attaches
        child.stdin.write("go\n")
        child.stdin.flush()
        _, seconds, tokens, sentences = _expect(child, "done").split()
    finally:
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=60)
        child.kill()
        child.wait()
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso,sym",
                             "-g", "none", "--field-separator=@"], capture_output=True, text=True, check=False)
    shares = parse_report(report.stdout)
    if not any(shares.values()):
        raise AttnmtError(f"perf recorded no samples of {export}: {perf.stderr.read()[-1000:]}")
    return {"kind": "profile", "export": export, "beam": args.beam, "sentences": int(sentences),
            "tgt_tokens": int(tokens), "seconds": float(seconds),
            "sent_per_s": round(int(sentences) / float(seconds), 1),
            "groups": {name: round(value, 2) for name, value in shares.items()}}


def profile_ct2(args: argparse.Namespace, argv: list[str] | None = None) -> dict:
    if shutil.which("perf") is None:
        raise AttnmtError("perf is not installed (Debian: apt-get install linux-perf)")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [profile_export(export, args, Path(tmp)) for export in args.exports]
    settings = {"exports": args.exports, "beam": args.beam, "threads": args.threads, "split": args.split,
                "frequency": args.frequency}
    return make_report("profile_ct2", command=command(__file__, argv), environment=environment("cpu"),
                       settings=settings, results=rows,
                       notes=["shares are perf samples of the translation call, all threads; CTranslate2 runs "
                              f"inter_threads={args.threads}, intra_threads=1"])


def format_table(report: dict) -> str:
    rows = report["results"]
    s = report["settings"]
    lines = [f"profile_ct2: beam {s['beam']}, {s['threads']} threads, {s['split']}",
             f"{'':34}" + "".join(f"{Path(r['export']).name[-18:]:>20}" for r in rows),
             f"{'sentences/s':34}" + "".join(f"{r['sent_per_s']:>20}" for r in rows)]
    for name in rows[0]["groups"]:
        lines.append(f"{name:34}" + "".join(f"{r['groups'][name]:>19.1f}%" for r in rows))
    lines += [f"note: {n}" for n in report["notes"]]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="profile_ct2", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("exports", nargs="+", help="CTranslate2 folders written by attnmt export")
    p.add_argument("--beam", type=int, default=5, help="beam size (1 = greedy)")
    p.add_argument("--threads", type=int, default=2, help="CTranslate2 inter_threads (intra_threads is 1)")
    p.add_argument("--split", default="test_2016_flickr", help="the split to translate")
    p.add_argument("--sentences", type=int, default=None, help="only the first N sentences")
    p.add_argument("--frequency", type=int, default=999, help="perf samples per second")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no table")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    """`benchmarks/speed/profile_ct2.py EXPORT ...`; returns the exit code."""
    args = build_parser().parse_args(argv)
    if min(args.beam, args.threads, args.frequency) < 1 or (args.sentences is not None and args.sentences < 1):
        print("profile_ct2: error: --beam, --threads, --frequency and --sentences must be >= 1", file=sys.stderr)
        return 2
    if args.child:
        return _child(args)
    return run_main("profile_ct2", args, argv, profile_ct2, format_table)


if __name__ == "__main__":
    raise SystemExit(main())

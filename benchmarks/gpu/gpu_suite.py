#!/usr/bin/env python3
"""Every GPU figure in one command: the gpu-marked tests, speed, and quality (docs/gpu.md).

    benchmarks/gpu/gpu_suite.sh OUT_DIR [--dry-run] [--budget-s 540] [--only tests,quality,speed]
        [--quality-minutes 4] [--rnn-quality]

Stages, each a subprocess with its own time limit, inside one overall budget (9 minutes on one
H100 by default); a stage that does not fit is recorded as skipped, one that overruns as timeout:

1. tests: ``pytest -m gpu`` (tests/test_gpu.py); reported figures (bf16 beam-search batch
   invariance rate, SDPA backends) come back through ATTNMT_GPU_REPORT.
2. quality: configs/multi30k_transformer.yaml trained for ``--quality-minutes`` of wall clock,
   evaluated on test_2016_flickr with beam 5 (BLEU, chrF, epochs, sacreBLEU signature); the RNN
   config too with ``--rnn-quality``.
3. speed: benchmarks/speed/bench.py for both default configs at 128 and 512 sentences a batch, with
   each train.compile mode (none, cudagraphs where it applies, then default), and greedy / beam-5
   decoding of test_2016_flickr in runs of their own (the Transformer decodes the quality stage's
   trained run).
   bench.py measures its reference in the same process, so every figure has its ratio.

OUT_DIR gets summary.json (benchmarks/common.py's report schema, one "stage" row per stage) and
one log per stage. Without CUDA the
suite prints one line and exits 0; ``--dry-run`` runs every stage on the CPU with tiny sizes,
to check the plumbing anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import REPO as ROOT
from benchmarks.common import command, environment, make_report, rows, write_report

BENCH = ROOT / "benchmarks" / "speed" / "bench.py"
STAGES = ("tests", "quality", "speed")
NO_CUDA = "gpu_suite: no CUDA device here (torch.cuda.is_available() is False): nothing to run"

# Tiny settings that make a CPU dry run of every stage take seconds, not minutes.
DRY_MODEL = {
    "transformer": ["model.d_model=16", "model.heads=2", "model.ff_dim=16", "model.enc_layers=1",
                    "model.dec_layers=1", "data.spm_vocab_size=500"],
    "rnn": ["model.emb_dim=8", "model.enc_hidden=8", "model.dec_hidden=8", "model.attn_dim=8"],
}
# Sentences of test_2016_flickr each decoding run takes on the GPU (both sides, the same sentences):
# the reference's beam search goes one sentence at a time, 43 s for the RNN's 1,000 on an H100.
GPU_DECODE_SENTENCES = 200
CONFIGS = {"transformer": "configs/multi30k_transformer.yaml", "rnn": "configs/multi30k_rnn.yaml"}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu_suite", description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir", help="where summary.json and the logs go (created)")
    p.add_argument("--dry-run", action="store_true", help="every stage on the CPU with tiny sizes")
    p.add_argument("--budget-s", type=float, default=540.0, help="overall wall-clock budget (default 9 min)")
    p.add_argument("--only", default=",".join(STAGES), help=f"comma-separated stages out of {','.join(STAGES)}")
    p.add_argument("--quality-minutes", type=float, default=4.0, help="training budget of the quality runs")
    p.add_argument("--rnn-quality", action="store_true", help="also train and score the RNN (past 9 minutes)")
    p.add_argument("--python", default=sys.executable, help=argparse.SUPPRESS)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    stages = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        parser.error(f"--only: unknown stage(s) {', '.join(unknown) or '(none given)'}; choose from "
                     f"{', '.join(STAGES)}")
    if args.budget_s <= 0 or args.quality_minutes <= 0:
        parser.error(f"--budget-s={args.budget_s} and --quality-minutes={args.quality_minutes} must be positive")
    args.stages = stages
    return args


# ----------------------------------------------------------------------------- running stages

class Budget:
    """The overall deadline; each stage gets at most its cap and what is left. A dry run on a
    (possibly shared, slow) CPU has no caps, only the overall budget."""

    def __init__(self, seconds: float, *, caps: bool = True):
        self.start, self.seconds, self.caps = time.monotonic(), seconds, caps

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.start)

    def cap(self, seconds: float) -> float:
        """The time limit of a stage or run: its cap, or less when the budget has less left."""
        return min(seconds, self.left()) if self.caps else self.left()

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def run_logged(cmd: list[str], log_path: Path, *, timeout: float, env: dict | None = None) -> dict:
    """Run a command with its output appended to log_path; returns status, rc, seconds, stdout."""
    start = time.monotonic()
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                                  timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired as err:
            out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
            log.write(out + f"\n[timeout after {timeout:.0f} s]\n")
            return {"status": "timeout", "rc": None, "seconds": round(time.monotonic() - start, 1), "stdout": out}
        log.write(proc.stdout)
    status = "ok" if proc.returncode == 0 else "failed"
    return {"status": status, "rc": proc.returncode, "seconds": round(time.monotonic() - start, 1),
            "stdout": proc.stdout}


def child_env(extra: dict | None = None) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def junit_counts(path: Path) -> dict:
    """passed / failed / errors / skipped from a pytest --junitxml file (with the failed names)."""
    if not path.exists():
        return {}
    root = ET.parse(path).getroot()
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failures": []}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None:
            counts["failed"] += 1
            counts["failures"].append(name)
        elif case.find("error") is not None:
            counts["errors"] += 1
            counts["failures"].append(name)
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts


def read_report_lines(path: Path) -> dict:
    merged: dict = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                merged.update(json.loads(line))
    return merged


def stage_tests(args, out: Path, budget: Budget) -> dict:
    report = out / "gpu_report.jsonl"
    report.unlink(missing_ok=True)
    junit = out / "pytest.xml"
    cmd = [args.python, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", f"--junitxml={junit}",
           "tests/test_gpu.py"]
    result = run_logged(cmd, out / "tests.log", timeout=budget.cap(150.0),
                        env=child_env({"ATTNMT_GPU_REPORT": str(report)}))
    result.pop("stdout")
    if result["status"] == "failed" and result["rc"] == 5:  # pytest: no tests collected/run
        result["status"] = "ok"
    result.update(junit_counts(junit))
    result["reported"] = read_report_lines(report)
    return result


def quality_run(args, out: Path, budget: Budget, arch: str, cap: float) -> dict:
    run_dir = out / "runs" / arch
    overrides = [f"train.max_minutes={args.quality_minutes}"]
    device = "cpu" if args.dry_run else "cuda"
    overrides.append(f"train.device={device}")
    if args.dry_run:
        overrides += DRY_MODEL[arch] + ["data.train_subset=300", "train.epochs=1", "train.eval_max_sentences=4"]
    train_cmd = [args.python, "-m", "attnmt", "train", CONFIGS[arch], "--run-dir", str(run_dir)]
    for item in overrides:
        train_cmd += ["--set", item]
    log = out / f"quality_{arch}.log"
    trained = run_logged(train_cmd, log, timeout=budget.cap(cap), env=child_env())
    result = {"config": CONFIGS[arch], "overrides": overrides, "run_dir": str(run_dir),
              "train_status": trained["status"], "train_seconds": trained["seconds"]}
    try:
        summary = json.loads(trained["stdout"][trained["stdout"].index("{"):])
        result["epochs"] = summary.get("epochs")
        result["train_wall_s"] = summary.get("seconds")
    except ValueError:
        result["epochs"] = None
    if trained["status"] != "ok":
        result["status"] = trained["status"]
        return result
    eval_cmd = [args.python, "-m", "attnmt", "evaluate", str(run_dir), "--beam", "5", "--device", device]
    evaluated = run_logged(eval_cmd, log, timeout=max(budget.cap(120.0), 1.0), env=child_env())
    result["status"] = evaluated["status"]
    result["eval_seconds"] = evaluated["seconds"]
    if evaluated["status"] == "ok":
        scores = json.loads(evaluated["stdout"][evaluated["stdout"].index("{"):])
        for key in ("split", "sentences", "beam", "bleu", "chrf", "bleu_lc", "bleu_lc_tok", "ppl", "signature",
                    "chrf_signature"):
            result[key] = scores.get(key)
    return result


def stage_quality(args, out: Path, budget: Budget) -> dict:
    cap = 60 * args.quality_minutes + 60  # training budget + data, validation and checkpoint time
    result = {"transformer": quality_run(args, out, budget, "transformer", cap)}
    if args.rnn_quality:
        if budget.left() > cap or args.dry_run:
            result["rnn"] = quality_run(args, out, budget, "rnn", cap)
        else:
            result["rnn"] = {"status": "skipped", "why": f"{budget.left():.0f} s left of the budget"}
    statuses = {r.get("status") for r in result.values()}
    result["status"] = "ok" if statuses <= {"ok", "skipped"} else "failed"
    return result


def speed_plan(args, out: Path) -> list[tuple[str, list[str]]]:
    """(name, speed/bench.py arguments) in the order they run, the most informative first in case
    the budget runs out: eager and CUDA-graph training steps, then decoding (a run of its own, with
    --no-train: on the first H100 run, training and decoding in one run overran its 2 minutes and
    left no figure), then torch.compile's training steps, whose compile time is the longest."""
    trained = out / "runs" / "transformer"
    batches = (8,) if args.dry_run else (128, 512)

    def base(arch: str, batch: int, mode: str) -> list[str]:
        cmd = ["--config", CONFIGS[arch], "-q", "--set", "train.batch_by=sentences",
               "--set", f"train.batch_size={batch}", "--set", f"train.compile={mode}"]
        if args.dry_run:
            cmd += ["--device", "cpu", "--train-subset", "200", "--steps", "2", "--warmup-steps", "1",
                    "--decode-sentences", "4", "--threads", "1"]
            for item in DRY_MODEL[arch]:
                cmd += ["--set", item]
        else:
            cmd += ["--device", "cuda", "--train-subset", "6000", "--steps", "30", "--warmup-steps", "10"]
        return cmd

    def training(modes: tuple[str, ...]) -> list[tuple[str, list[str]]]:
        runs = []
        for mode in modes:
            for arch in ("transformer", "rnn"):
                if mode == "cudagraphs" and arch == "rnn":
                    continue  # the RNN packs sequences on the host: not capturable (graphs.py)
                for batch in batches:
                    name = f"{arch}_b{batch}_{mode}"
                    runs.append((name, base(arch, batch, mode) + ["--json", str(out / f"bench_{name}.json"),
                                                                  "--no-decode"]))
        return runs

    plan = training(("none",) if args.dry_run else ("none", "cudagraphs"))
    for arch in ("transformer", "rnn"):  # greedy and beam-5 decoding, eager, once per config
        name = f"{arch}_decode"
        cmd = base(arch, batches[0], "none") + ["--json", str(out / f"bench_{name}.json"), "--no-train"]
        if not args.dry_run:
            cmd += ["--decode-sentences", str(GPU_DECODE_SENTENCES)]
            if arch == "transformer" and (trained / "best.json").exists():
                cmd += ["--decode-checkpoint", str(trained)]
        plan.append((name, cmd))
    if not args.dry_run:
        plan += training(("default",))
    return plan


def bench_figures(report: dict) -> dict:
    """The figures of one speed/bench.py report that the summary keeps, each with its ratio."""
    figures: dict = {"batch_size": report["settings"]["batch_size"], "overrides": report["settings"]["overrides"]}
    for row in rows(report, "train") + rows(report, "decode"):
        if row["side"] != "attnmt":
            continue
        name = "train" if row["kind"] == "train" else row["name"]
        keys = (("tgt_tok_per_s", "step_ms", "epoch_s_estimate", "amp") if row["kind"] == "train" else
                ("sentences", "sent_per_s", "seconds", "tgt_tok_per_s", "search_seconds"))
        figures[name] = {key: row.get(key) for key in keys}
        rate = "tgt_tok_per_s" if row["kind"] == "train" else "sent_per_s"
        figures[name][f"ratio_{rate}"] = row.get("ratio", {}).get(rate)
    figures["notes"] = report["notes"]
    return figures


def stage_speed(args, out: Path, budget: Budget) -> dict:
    result: dict = {"runs": {}}
    for name, bench_args in speed_plan(args, out):
        if budget.left() < 20:
            result["runs"][name] = {"status": "skipped", "why": "overall budget spent"}
            continue
        cmd = [args.python, str(BENCH), *bench_args]
        run = run_logged(cmd, out / "speed.log", timeout=budget.cap(120.0), env=child_env())
        run.pop("stdout")
        path = out / f"bench_{name}.json"
        if run["status"] == "ok" and path.exists():
            run.update(bench_figures(json.loads(path.read_text(encoding="utf-8"))))
        result["runs"][name] = run
    statuses = {r["status"] for r in result["runs"].values()}
    result["status"] = "ok" if statuses <= {"ok"} else ("partial" if "ok" in statuses else "failed")
    return result


# ----------------------------------------------------------------------------- summary

def cuda_available(python: str) -> bool:
    if Path(python).resolve() == Path(sys.executable).resolve():  # this interpreter: ask in-process
        import torch

        return torch.cuda.is_available()
    probe = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.dry_run and not cuda_available(args.python):
        print(NO_CUDA)
        return 0
    out = Path(args.out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget_s, caps=not args.dry_run)
    settings = {"dry_run": args.dry_run, "budget_s": args.budget_s, "stages": args.stages,
                "quality_minutes": args.quality_minutes, "rnn_quality": args.rnn_quality, "python": args.python}
    summary = make_report("gpu_suite", command=command(ROOT / "benchmarks" / "gpu" / "gpu_suite.sh", argv),
                          environment=environment("cpu" if args.dry_run else "cuda"), settings=settings, results=[])
    runners = {"tests": stage_tests, "quality": stage_quality, "speed": stage_speed}
    for stage in [name for name in STAGES if name in args.stages]:
        if budget.left() <= 5:
            result = {"status": "skipped", "why": "overall budget spent"}
        else:
            print(f"gpu_suite: {stage} ({budget.left():.0f} s left)", flush=True)
            result = runners[stage](args, out, budget)
        summary["results"].append({"kind": "stage", "stage": stage, **result, "elapsed_s": round(budget.elapsed(), 1)})
        write_report(out / "summary.json", summary)  # after every stage: a killed suite keeps what it measured
    failed = [row["stage"] for row in summary["results"] if row.get("status") not in ("ok", "skipped")]
    print(f"gpu_suite: {out / 'summary.json'} in {budget.elapsed():.0f} s"
          + (f"; not ok: {', '.join(failed)}" if failed else "; all stages ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

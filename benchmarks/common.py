"""What every benchmark shares: the environment it ran in, timing, torch threads, and the report.

One JSON report schema serves every script that writes one::

    {"schema": "attnmt-benchmark/1", "benchmark": "bench", "command": ["benchmarks/speed/bench.py", ...],
     "environment": {"date": ..., "machine": ..., "cpu": ..., "threads": ..., "torch": ..., ...},
     "settings": {...what was asked: config, sizes, split...},
     "results": [{"kind": "train", ...figures...}, ...],
     "notes": ["..."]}

`results` is a list of flat-ish rows; each row's "kind" says what it measures (train, decode,
attention, serve, stage, score, loss, ...), so one file may hold rows of several kinds.

Shapes: none (no tensors here).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

SCHEMA = "attnmt-benchmark/1"
REPORT_KEYS = ("schema", "benchmark", "command", "environment", "settings", "results", "notes")
REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- environment

def cpu_name() -> str:
    """The processor's model name (Linux /proc/cpuinfo), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except ImportError:
        return None


def environment(device: str = "cpu") -> dict:
    """Where and when a benchmark ran: host, CPU, threads, versions, date and load average.

    Call it while the benchmark's torch threads are set (inside `torch_threads`).
    """
    import torch

    env = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": platform.node(),
           "platform": platform.platform(), "python": platform.python_version(), "cpu": cpu_name(),
           "cpu_count": os.cpu_count(), "threads": torch.get_num_threads(), "torch": torch.__version__,
           "ctranslate2": _version("ctranslate2"), "device": str(device),
           "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None}
    if str(device).startswith("cuda") and torch.cuda.is_available():
        env["device_name"] = torch.cuda.get_device_name(torch.device(device))
        env["cuda"] = torch.version.cuda
    else:
        env["device_name"] = env["cpu"]
    return env


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run with `threads` torch CPU threads (None or 0: leave them), then restore the caller's."""
    import torch

    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


# ----------------------------------------------------------------------------- timing

def _synchronize(device: Any) -> None:
    if device is not None and str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(torch.device(device))


@dataclass
class Timing:
    """The timed calls of one measurement: wall and process CPU seconds of each, and what the
    last call returned."""

    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    result: Any = None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu_seconds)

    def add(self, other: Timing) -> None:
        self.seconds += other.seconds
        self.cpu_seconds += other.cpu_seconds
        self.result = other.result


def timed(fn: Callable[[], Any], device: Any = None) -> Timing:
    """Run `fn` once; its wall and CPU seconds (waiting for queued CUDA work at both ends) and result."""
    _synchronize(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    result = fn()
    _synchronize(device)
    return Timing([time.perf_counter() - start], [time.process_time() - cpu_start], result)


def median_time(fn: Callable[[], Any], *, repeats: int = 1, warmup: int = 0, device: Any = None) -> Timing:
    """Call `fn` `warmup` times untimed, then `repeats` times timed; `.median` is the figure to report."""
    for _ in range(warmup):
        fn()
    timing = Timing()
    for _ in range(repeats):
        timing.add(timed(fn, device))
    return timing


def rate(count: float, seconds: float, digits: int = 1) -> float:
    """count / seconds, rounded; 0 when nothing was timed."""
    return round(count / seconds, digits) if seconds > 0 else 0.0


# ----------------------------------------------------------------------------- the report

def command(script: str | Path, argv: Sequence[str] | None) -> list[str]:
    """The command line of a run: the script's path in the repository, then its arguments."""
    path = Path(script).resolve()
    shown = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    return [shown, *(sys.argv[1:] if argv is None else argv)]


def make_report(benchmark: str, *, command: list[str], environment: dict, settings: dict, results: list[dict],
                notes: Sequence[str] = ()) -> dict:
    """A report in the one schema (see the module docstring)."""
    return {"schema": SCHEMA, "benchmark": benchmark, "command": list(command), "environment": environment,
            "settings": settings, "results": list(results), "notes": list(notes)}


def write_report(path: str | Path, report: dict) -> Path:
    """Write a report as JSON through a temporary file and a rename (a reader never sees half a file)."""
    missing = [key for key in REPORT_KEYS if key not in report]
    if missing or report["schema"] != SCHEMA:
        raise ValueError(f"not a {SCHEMA} report: missing {missing}, schema {report.get('schema')!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_report(path: str | Path, benchmark: str | None = None) -> dict:
    """A report written by `write_report`.

    Raises:
        ValueError: another schema, or another benchmark's report than `benchmark`.
    """
    report = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a {SCHEMA} report")
    if benchmark is not None and report.get("benchmark") != benchmark:
        raise ValueError(f"{path}: a report of {report.get('benchmark')!r}, expected {benchmark!r}")
    return report


def rows(report: dict, kind: str) -> list[dict]:
    """The result rows of one kind."""
    return [row for row in report["results"] if row.get("kind") == kind]


def setup_logging(quiet: bool) -> None:
    """INFO (WARNING with `quiet`) to stderr, unless the caller configured logging already."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING if quiet else logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")


def run_main(name: str, args: Any, argv: Sequence[str] | None, run_bench: Callable[[Any, Any], dict],
             format_table: Callable[[dict], str]) -> int:
    """A benchmark's `main` after its own argument checks: logging, the run, the table (unless
    `args.quiet`), the JSON report at `args.json` (none when it is empty). An AttnmtError is one
    line on stderr and exit 2."""
    from attnmt.errors import AttnmtError

    setup_logging(args.quiet)
    try:
        report = run_bench(args, argv)
    except AttnmtError as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(format_table(report))
    if args.json:
        write_report(args.json, report)
    return 0

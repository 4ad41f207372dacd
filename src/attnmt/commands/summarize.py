"""`attnmt summarize RUN_DIR [RUN_DIR ...] [--split S] [--beam K] [--json]`: test BLEU and chrF of
each run (e.g. the seeds `attnmt train CONFIG --seeds 1,2,3` wrote), then their mean and sample
standard deviation. A run's kept report (eval_SPLIT_beamK.json, from `attnmt evaluate`) is used
when there is one; otherwise the run is evaluated now and its report kept."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from attnmt.commands.arguments import beam_size, positive_int
from attnmt.commands.evaluate import keep_report
from attnmt.errors import AttnmtError

if TYPE_CHECKING:
    from attnmt.significance import Spread

HELP = "mean and standard deviation of test BLEU / chrF over runs (seeds)"

KEYS = ("bleu", "chrf")


def _report(path: str, args) -> tuple[dict, str]:
    """The run's report of the split at the beam, and where it came from."""
    from attnmt.run_dir import RunDir
    from attnmt.translator import Translator

    run = RunDir(path)
    run.require_run()
    beam = args.beam if args.beam is not None else run.config().search.beam_size  # the model's, as it decodes
    report = run.eval_report(args.split, beam)
    if report is not None:
        return report, run.eval_report_path(args.split, beam).name
    translator = Translator.load(path, device=args.device)
    report = translator.evaluate(args.split, beam_size=beam, batch_size=args.batch_size)
    report["checkpoint"] = "best"
    keep_report(report, run.eval_report_path(args.split, beam), run.path, run.weights("best"))
    return report, "evaluated now"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="runs of one config, e.g. runs/x-seed*")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--beam", type=beam_size, default=None,
                        help="the beam of the scores (1 = greedy; default: each run's search.beam_size)")
    parser.add_argument("--batch-size", type=positive_int, default=128)
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args) -> int:
    from attnmt.significance import seed_spread

    found = [(path, *_report(path, args)) for path in args.runs]
    try:
        spread = seed_spread([report for _, report, _ in found], KEYS)
    except ValueError as err:
        raise AttnmtError(f"{args.split} beam {_beam(args)}: {err} (runs in the order given)") from None
    if args.json:
        summary = {"split": args.split, "beam": args.beam,
                   "runs": [{"run": path, "source": source, **{k: report[k] for k in KEYS}}
                            for path, report, source in found],
                   **{k: vars(s) for k, s in spread.items()}}
        print(json.dumps(summary, indent=2))
        return 0
    width = max(len("run"), *(len(path) for path in args.runs))
    print(f"{'run':<{width}}  {'BLEU':>6}  {'chrF':>6}  source")
    for path, report, source in found:
        print(f"{path:<{width}}  {report['bleu']:>6.2f}  {report['chrf']:>6.2f}  {source}")
    print(f"{'mean ± sd':<{width}}  " + "  ".join(_format(spread[k]) for k in KEYS)
          + f"  over {len(found)} runs, {args.split}, beam {_beam(args)}")
    return 0


def _beam(args) -> str:
    return str(args.beam) if args.beam is not None else "of each run's config"


def _format(spread: Spread) -> str:
    return f"{spread.mean:.2f} ± {spread.sd:.2f}" if spread.sd is not None else f"{spread.mean:.2f} (one run)"

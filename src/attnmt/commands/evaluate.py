"""`attnmt evaluate RUN_DIR [RUN_DIR ...] [--split S] [--beam K]`: print BLEU, chrF and perplexity as
JSON, and keep the report in the run directory (eval_SPLIT_beamK[...].json). Several run
directories are evaluated as one ensemble, whose report is printed only."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from attnmt.files import write_json
from attnmt.run_dir import RunDir
from attnmt.translator import Translator

log = logging.getLogger(__name__)


def keep_report(report: dict, path: Path) -> None:
    """Write an evaluation report; a read-only run directory only gets a warning."""
    try:
        write_json(path, report)
    except OSError as err:
        log.warning("could not write %s: %s", path, err)


def run(args) -> int:
    runs = args.run_dir  # one run, or the members of an ensemble
    translator = Translator.load(runs if len(runs) > 1 else runs[0], checkpoint=args.checkpoint,
                                 device=args.device, engine=args.engine)
    start = time.perf_counter()
    report = translator.evaluate(args.split, beam_size=args.beam, length_penalty=args.length_penalty,
                                 batch_size=args.batch_size)
    report["seconds"] = round(time.perf_counter() - start, 2)
    report["checkpoint"] = args.checkpoint
    if len(runs) > 1:
        report["ensemble"] = list(runs)
    print(json.dumps(report, indent=2, ensure_ascii=False))
    if len(runs) > 1:
        log.info("the report of an ensemble is not written into a member's run directory")
        return 0
    suffix = "" if args.checkpoint == "best" else "_" + Path(args.checkpoint).stem
    if args.length_penalty is not None:
        suffix += f"_lp{args.length_penalty:g}"
    keep_report(report, RunDir(runs[0]).eval_report_path(args.split, args.beam, suffix))
    return 0

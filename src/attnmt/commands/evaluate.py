"""`attnmt evaluate RUN_DIR [RUN_DIR ...] [--split S] [--beam K]`: print BLEU, chrF and perplexity as
JSON, and keep the report in the run directory (eval_SPLIT_beamK[...].json). Several run
directories are evaluated as one ensemble, whose report is printed only. --workers N decodes the
split in N processes (workers.py); the report is the same."""

from __future__ import annotations

import json
import logging
import time
from contextlib import nullcontext
from pathlib import Path

from attnmt.commands import sharded
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
    sharded.check_workers(args.workers, args.engine)
    translator = Translator.load(runs if len(runs) > 1 else runs[0], checkpoint=args.checkpoint,
                                 device=args.device, engine=args.engine)  # perplexity; the decoding without --workers
    with sharded.open_translator(runs, checkpoint=args.checkpoint, device=args.device, engine=args.engine,
                                 workers=args.workers) if args.workers > 1 else nullcontext(translator) as decoder:
        start = time.perf_counter()
        report = translator.evaluate(args.split, beam_size=args.beam, length_penalty=args.length_penalty,
                                     batch_size=args.batch_size, translate=decoder.translate)
    report["seconds"] = round(time.perf_counter() - start, 2)
    report["checkpoint"] = args.checkpoint
    report["workers"] = args.workers
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

"""`attnmt evaluate RUN_DIR [--split S] [--beam K]`: print BLEU, chrF and perplexity as JSON, and
keep the report in the run directory (eval_SPLIT_beamK[...].json)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from attnmt.files import write_json
from attnmt.translator import Translator

log = logging.getLogger(__name__)


def run(args) -> int:
    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device, engine=args.engine)
    start = time.perf_counter()
    report = translator.evaluate(args.split, beam_size=args.beam, length_penalty=args.length_penalty,
                                 batch_size=args.batch_size)
    report["seconds"] = round(time.perf_counter() - start, 2)
    report["checkpoint"] = args.checkpoint
    print(json.dumps(report, indent=2, ensure_ascii=False))
    suffix = "" if args.checkpoint == "best" else "_" + Path(args.checkpoint).stem
    if args.length_penalty is not None:
        suffix += f"_lp{args.length_penalty:g}"
    out = Path(args.run_dir) / f"eval_{args.split}_beam{args.beam}{suffix}.json"
    try:
        write_json(out, report)
    except OSError as err:  # a read-only run directory still gets its scores printed
        log.warning("could not write %s: %s", out, err)
    return 0

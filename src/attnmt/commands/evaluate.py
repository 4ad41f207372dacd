"""`attnmt evaluate RUN_DIR [RUN_DIR ...] [--split S] [--beam K] [--pair SRC-TGT|all]`: print BLEU, chrF
and perplexity as JSON, and keep the report in the run directory (eval_SPLIT_beamK[...].json). Several
run directories are evaluated as one ensemble, whose report is printed only. --workers N decodes
the split in N processes (workers.py); the report is the same. A multilingual model is evaluated
on the direction --pair names, or on all of them (one report each, and their means)."""

from __future__ import annotations

import argparse
import json
import logging
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from attnmt.commands.arguments import (add_decoding_args, add_engine_arg, add_workers_arg, decoding_options,
                                       direction_or_all)
from attnmt.direction import Direction, language_args
from attnmt.errors import AttnmtError
from attnmt.files import refuse_overwrite, write_json

if TYPE_CHECKING:
    from attnmt.translator import Translator

HELP = "score a trained run on a split"

log = logging.getLogger(__name__)


def keep_report(report: dict, path: Path, run: Path, checkpoint: Path | None = None) -> None:
    """Write an evaluation report into the run `run`; a read-only run directory only gets a
    warning, and so does a report that would land anywhere but directly in the run (a --split
    holding '/' or '..') or on the weights it scored (files.refuse_overwrite)."""
    try:
        if path.resolve().parent != run.resolve():
            raise AttnmtError(f"{path}: not directly inside the run {run}")
        refuse_overwrite(path, {"checkpoint": checkpoint} if checkpoint is not None else {})
        write_json(path, report)
    except (OSError, AttnmtError) as err:
        log.warning("the report was not kept: %s", err)


def _pairs(translator: Translator, pair: Direction | str | None) -> list[Direction | None]:
    """The directions to evaluate: [None] for a one-direction model (its own); --pair's otherwise.

    Raises:
        AttnmtError: a multilingual model without --pair, or a direction the model lacks.
    """
    directions = translator.directions
    if translator.pipeline.languages is None:
        if pair not in (None, "all", directions[0]):
            raise AttnmtError(f"--pair {pair}: this model translates {directions[0]} only")
        return [None]
    if pair is None:
        raise AttnmtError(f"a multilingual model: say which direction with --pair SRC-TGT, or --pair all "
                          f"({translator.pipeline.languages.names()})")
    if pair == "all":
        return list(directions)
    translator.target_language(*pair)  # a LanguageError naming the directions
    return [pair]


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", nargs="+", metavar="RUN_DIR", help="a run; several runs are decoded as one ensemble (native engine)")
    parser.add_argument("--split", default="test_2016_flickr")
    add_decoding_args(parser, batch_size=128)
    parser.add_argument("--checkpoint", default="best", help="'best', 'last', 'average' (after attnmt average) or a checkpoint file")
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--pair", type=direction_or_all, default=None, metavar="SRC-TGT",
                        help="a multilingual model's direction to evaluate, or 'all' (one report per direction)")
    add_engine_arg(parser)
    add_workers_arg(parser)


def run(args) -> int:
    from attnmt.commands import file_jobs
    from attnmt.run_dir import RunDir
    from attnmt.translator import Translator

    runs = args.run_dir  # one run, or the members of an ensemble
    file_jobs.check_workers(args.workers, args.engine)
    translator = Translator.load(runs if len(runs) > 1 else runs[0], checkpoint=args.checkpoint,
                                 device=args.device, engine=args.engine)  # perplexity; the decoding without --workers
    reports = {}
    with file_jobs.open_translator(runs, checkpoint=args.checkpoint, device=args.device, engine=args.engine,
                                   workers=args.workers) if args.workers > 1 else nullcontext(translator) as decoder:
        for direction in _pairs(translator, args.pair):
            start = time.perf_counter()
            report = translator.evaluate(args.split, decoding_options(args, **language_args(direction)),
                                         translate=decoder.translate)
            report["seconds"] = round(time.perf_counter() - start, 2)
            report["checkpoint"] = args.checkpoint
            report["workers"] = args.workers
            if len(runs) > 1:
                report["ensemble"] = list(runs)
            reports[direction] = report
    if len(reports) == 1:
        print(json.dumps(next(iter(reports.values())), indent=2, ensure_ascii=False))
    else:
        means = {key: round(sum(r[key] for r in reports.values()) / len(reports), 2) for key in ("bleu", "chrf")}
        print(json.dumps({"split": args.split, "pairs": {r["pair"]: r for r in reports.values()}, "mean": means},
                         indent=2, ensure_ascii=False))
    if len(runs) > 1:
        log.info("the report of an ensemble is not written into a member's run directory")
        return 0
    suffix = "" if args.checkpoint == "best" else "_" + Path(args.checkpoint).stem
    if args.length_penalty is not None:
        suffix += f"_lp{args.length_penalty:g}"
    for direction, report in reports.items():
        pair = "" if direction is None else f"_{direction}"
        run = RunDir(runs[0])
        keep_report(report, run.eval_report_path(args.split, report["beam"], suffix + pair), run.path,
                    None if run.is_export else run.weights(args.checkpoint))
    return 0

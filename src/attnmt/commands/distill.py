"""`attnmt distill TEACHER --student CONFIG -o DIR [--set k=v ...] [options]` and `attnmt distill
--resume DIR [--max-minutes M] [--redo STAGE]`: a teacher's translations of the student config's
training sources -> a student trained on them -> its int8 CTranslate2 export with a vocabulary
map -> teacher and student side by side (attnmt.distillation). TEACHER is a run, runs joined by
'+' (an ensemble) or a CTranslate2 export (an OPUS-MT model: `attnmt import` it first). Each
stage is resumable; the directory DIR holds every stage's output and the state file."""

from __future__ import annotations

import argparse
from pathlib import Path

from attnmt.bounds import BEAM, DECODING_WORKERS, MINUTES, SHARD_LINES, WEIGHT
from attnmt.commands.arguments import bounded, ensemble_paths, non_negative_int, positive_int
from attnmt.errors import AttnmtError

HELP = "distill a teacher (run, ensemble or export) into a small student, export it (int8 + vmap) and compare"

STAGE_NAMES = ("teacher", "filter", "corpus", "student", "export", "evaluate")
FILTER_NAMES = ("cross-entropy", "confidence")  # distillation.state.FILTERS, without importing it at start-up


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (0.0 <= value < 1.0):
        raise argparse.ArgumentTypeError(f"{value} must be in [0, 1) (the share of pairs dropped)")
    return value


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("teacher", nargs="?", default=None, metavar="TEACHER",
                        help="a run, runs joined by '+' (an ensemble: runs/a+runs/b) or a CTranslate2 export")
    parser.add_argument("--student", default="student_tiny", metavar="CONFIG",
                        help="the student's config: a file or a packaged config (default student_tiny); its data "
                             "section names the corpus the teacher translates and the test set")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the student config (repeatable), e.g. data.train=corpus/train")
    parser.add_argument("-o", "--output", default=None, metavar="DIR", help="the distillation directory (new or empty)")
    parser.add_argument("--resume", default=None, metavar="DIR", help="continue the distillation in DIR")
    parser.add_argument("--redo", choices=STAGE_NAMES, default=None,
                        help="with --resume: make this stage (and the later ones) again")
    parser.add_argument("--max-minutes", type=bounded(MINUTES), default=None, metavar="M",
                        help="bound this call; the student's training gets what the other stages leave")
    parser.add_argument("--beam", type=bounded(BEAM), default=5, help="the teacher's beam (default 5)")
    parser.add_argument("--filter-share", type=_share, default=0.0, metavar="S",
                        help="drop this share of each corpus's pairs, the worst by --filter-by "
                             "(forced decoding; default 0: no filter)")
    parser.add_argument("--filter-by", choices=FILTER_NAMES, default="cross-entropy",
                        help="what ranks the teacher's pairs: its cross-entropy per token (default), or its "
                             "confidence in its own output (a teacher calibrated by attnmt calibrate)")
    parser.add_argument("--original-weight", type=bounded(WEIGHT), default=0.0, metavar="W",
                        help="also train on the original targets with this weight (data.train weight; default 0: not)")
    parser.add_argument("--student-beam", type=bounded(BEAM), default=1,
                        help="the student's beam in the evaluation (default 1: greedy)")
    parser.add_argument("--quantization", default="int8", choices=["int8", "int8_float32", "int16", "float16", "float32"])
    parser.add_argument("--vocab-map-top-k", type=positive_int, default=50, metavar="K",
                        help="the student export's vocabulary map: target tokens per source token (default 50)")
    parser.add_argument("--vocab-map-frequent", type=non_negative_int, default=100, metavar="N",
                        help="... and the N most frequent target tokens, always allowed (default 100)")
    parser.add_argument("--shard-lines", type=bounded(SHARD_LINES), default=10_000, metavar="N",
                        help="the teacher translates and scores in resumable shards of N lines (default 10000)")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--checkpoint", default="best", help="the teacher's weights (best, last, average or a file)")
    parser.add_argument("--workers", type=bounded(DECODING_WORKERS), default=1, metavar="N",
                        help="the teacher decodes in N processes (native engine, CPU; workers.py)")
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")


def run(args) -> int:
    from attnmt.config import load_config
    from attnmt.distillation import Budget, DistillSettings, Runtime, resume, start
    from attnmt.distillation.report import format_report
    from attnmt.run_dir import RunDir

    runtime = Runtime(budget=Budget(args.max_minutes), workers=args.workers, device=args.device)
    if args.resume:
        given = [name for name, value in (("TEACHER", args.teacher), ("-o", args.output),
                                          ("--set", args.overrides or None)) if value]
        if given:
            raise AttnmtError(f"--resume DIR goes on with the settings DIR was started with: drop {', '.join(given)}")
        report = resume(args.resume, runtime, redo=args.redo)
    else:
        if args.teacher is None or args.output is None:
            raise AttnmtError("distill needs a TEACHER and -o DIR (or --resume DIR)")
        if args.redo:
            raise AttnmtError("--redo works with --resume DIR")
        paths = ensemble_paths(args.teacher)
        engine = RunDir(paths[0]).engine
        if engine == "ctranslate2" and len(paths) > 1:
            raise AttnmtError(f"{args.teacher}: an ensemble is of runs (native engine), not of exports")
        if engine == "ctranslate2" and args.workers > 1:
            raise AttnmtError("--workers is the native engine's: a CTranslate2 teacher decodes batches side by side "
                              "itself (ATTNMT_CT2_INTER_THREADS)")
        settings = DistillSettings(teacher=tuple(str(Path(p).resolve()) for p in paths), teacher_engine=engine,
                                   beam=args.beam, filter_share=args.filter_share, filter_by=args.filter_by,
                                   original_weight=args.original_weight, student_beam=args.student_beam,
                                   quantization=args.quantization, vocab_top_k=args.vocab_map_top_k,
                                   vocab_frequent=args.vocab_map_frequent, shard_lines=args.shard_lines,
                                   batch_size=args.batch_size, checkpoint=args.checkpoint)
        report = start(args.output, settings, load_config(args.student, args.overrides), runtime)
    print(format_report(report))
    return 0

"""`attnmt calibrate MODEL [--split val | --src FILE --ref FILE]`: fit the model's confidence on
held-out data (its validation set by default; an imported model, which has none, names files)
and keep the map with the model (calibration.json, its sha256 recorded); print the
cross-validated report (calibration.py) as JSON. Without a calibration a model still gives a
confidence: the mean token probability, said to be uncalibrated."""

from __future__ import annotations

import argparse
import json

from attnmt.commands.arguments import add_decoding_args, decoding_options, direction
from attnmt.errors import AttnmtError

HELP = "fit a model's translation confidence on held-out data and keep it with the model"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="RUN_OR_EXPORT", help="a run (attnmt train or import) or an export")
    parser.add_argument("--split", default="val", help="the model's own held-out split (default val)")
    parser.add_argument("--src", default=None, metavar="FILE", help="held-out sources instead, one per line")
    parser.add_argument("--ref", default=None, metavar="FILE", help="their reference translations")
    parser.add_argument("--pair", type=direction, default=None, metavar="SRC-TGT",
                        help="a multilingual model: one direction (default: every direction's split, pooled)")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--engine", choices=["native", "ctranslate2"], default=None,
                        help="default: the folder's (ctranslate2 for an export)")
    add_decoding_args(parser)


def run(args) -> int:
    from attnmt.calibration import calibrate
    from attnmt.commands.text_io import read_file
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.decoding.confidence import CALIBRATION_FILE
    from attnmt.direction import language_args
    from attnmt.files import writer_lock
    from attnmt.run_dir import RunDir

    from attnmt.translator import Translator

    if (args.src is None) != (args.ref is None):
        raise AttnmtError("give both --src and --ref (held-out sources and their references), or neither")
    run_dir = RunDir(args.model)
    translator = Translator.load(args.model, checkpoint=args.checkpoint, engine=args.engine or run_dir.engine)
    groups = []
    if args.src is not None:
        sources, references = read_file(args.src), read_file(args.ref)
        if len(sources) != len(references):
            raise AttnmtError(f"{args.src} has {len(sources)} lines, {args.ref} has {len(references)}")
        groups.append((sources, references, decoding_options(args, **language_args(args.pair))))
    elif translator.cfg.data.corpus == "none":
        raise AttnmtError(f"{args.model} names no corpus (an imported model): give held-out --src and --ref files")
    else:
        directions = ([args.pair] if args.pair else translator.directions) if translator.pipeline.languages else [None]
        for pair in directions:
            corpus = load_corpus(corpus_spec(translator.cfg.data), args.split, pair)
            groups.append((corpus.src, corpus.tgt, decoding_options(args, **language_args(pair))))
    try:
        calibration, report = calibrate(translator, groups)
    except ValueError as err:
        raise AttnmtError(str(err)) from None
    with writer_lock(run_dir.path):
        calibration.save(run_dir.path)
        run_dir.record_checksums([CALIBRATION_FILE])
    print(json.dumps({"model": str(args.model), "engine": translator.engine.name,
                      "held_out": args.src or args.split, **report}, indent=2))
    return 0

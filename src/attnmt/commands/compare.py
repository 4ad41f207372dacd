"""`attnmt compare SYSTEM SYSTEM ... [--hyp FILE ...] [--split S | --ref FILE] [--beam K] [--json]`:
BLEU and chrF of each system on one test set, and each system against the first: the difference
with its 95% paired-bootstrap interval, and the p-values of paired bootstrap resampling and
approximate randomization (sacreBLEU's own; attnmt.significance).

A SYSTEM is a run directory, an export (with --engine ctranslate2), or run directories joined by
'+' (an ensemble: runs/a-seed1+runs/a-seed2); each translates the source side of --split of the
first run's data. `--hyp FILE` adds a system given by its translations, after the SYSTEMs. The
references are --ref FILE, else the target side of --split (the first run's data; with --hyp
files only, Multi30k de-en). `--pair SRC-TGT` compares on one direction: its test files, each
system translating that direction (a multilingual model needs it; a one-direction model must be
of that direction).
"""

from __future__ import annotations

import argparse
import json
import logging

from attnmt.commands.arguments import (add_decoding_args, add_engine_arg, decoding_options, direction, ensemble_paths,
                                       positive_int)
from attnmt.commands.text_io import read_file
from attnmt.config import DataConfig
from attnmt.data.corpus import ParallelCorpus, corpus_spec, load_corpus
from attnmt.direction import Direction, language_args
from attnmt.direction import names as direction_names
from attnmt.errors import AttnmtError

HELP = ("BLEU / chrF of several systems and paired significance tests (bootstrap, approximate randomization) "
        "against the first")

log = logging.getLogger(__name__)


def _test_set(systems: list[str], split: str, pair: Direction | None) -> ParallelCorpus:
    """The split the systems translate, from the first system's data config (Multi30k without
    one), of --pair's direction when given.

    Raises:
        AttnmtError: a multilingual first system without --pair.
    """
    from attnmt.run_dir import RunDir

    data = RunDir(ensemble_paths(systems[0])[0]).config().data if systems else DataConfig()
    if data.multilingual and pair is None:
        raise AttnmtError(f"{systems[0]} is multilingual: name the direction to compare with --pair SRC-TGT "
                          f"({direction_names(data.directions())})")
    return load_corpus(corpus_spec(data), split, pair)


def _translate(system: str, sources: list[str], args) -> list[str]:
    from attnmt.translator import Translator

    translator = Translator.load(ensemble_paths(system), checkpoint=args.checkpoint, device=args.device,
                                 engine=args.engine)
    options = translator.decoding_options(decoding_options(args, **language_args(args.pair)))
    log.info("translating %d sentences with %s (beam %d)", len(sources), system, options.beam_size)
    results = translator.translate(sources, options)
    return [r.text for r in results]


def _read_lines_of(path: str, expected: int, refs_name: str) -> list[str]:
    lines = read_file(path)
    if len(lines) != expected:
        raise AttnmtError(f"{path} has {len(lines)} lines, the references ({refs_name}) {expected}")
    return lines


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("systems", nargs="*", metavar="SYSTEM", help="a run directory, an export (with --engine "
                        "ctranslate2) or runs joined by '+' (an ensemble); the first system is the baseline")
    parser.add_argument("--hyp", action="append", default=[], metavar="FILE",
                        help="a system given by its translations, one per line (repeatable; after the SYSTEMs)")
    parser.add_argument("--ref", default=None, metavar="FILE", help="references (default: the target side of --split)")
    parser.add_argument("--split", default="test_2016_flickr", help="the split the systems translate and are "
                        "scored on (the first system's data; Multi30k de-en with --hyp files only)")
    add_decoding_args(parser, batch_size=128)
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--pair", type=direction, default=None, metavar="SRC-TGT",
                        help="compare on one direction (a multilingual system needs it): its test files, each "
                             "system translating it")
    add_engine_arg(parser)
    parser.add_argument("--paired-bs-n", type=positive_int, default=1000, metavar="N", help="bootstrap resamples")
    parser.add_argument("--paired-ar-n", type=positive_int, default=10000, metavar="N",
                        help="approximate randomization trials")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args) -> int:
    from attnmt.significance import compare_systems

    hyp_files = args.hyp or []
    if len(args.systems) + len(hyp_files) < 2:
        raise AttnmtError("compare needs at least two systems: run directories (or exports, or RUN+RUN ensembles) "
                          "and --hyp translation files, the baseline first")
    split = args.split
    corpus = _test_set(args.systems, split, args.pair) if args.systems or args.ref is None else None
    refs = read_file(args.ref) if args.ref is not None else corpus.tgt
    refs_name = args.ref or f"{split} of {corpus.name}"
    if corpus is not None and len(corpus.src) != len(refs):
        raise AttnmtError(f"{args.ref} has {len(refs)} lines, the sources of {split} {len(corpus.src)}")
    systems = [(system, _translate(system, corpus.src, args)) for system in args.systems]
    systems += [(path, _read_lines_of(path, len(refs), refs_name)) for path in hyp_files]
    logging.getLogger("sacrebleu").setLevel(logging.WARNING)  # its per-step progress lines
    comparison = compare_systems(systems, refs, bootstrap_samples=args.paired_bs_n,
                                 randomization_trials=args.paired_ar_n)
    report = {"references": refs_name, "beam": args.beam if args.systems else None,
              **({"pair": str(args.pair)} if args.pair else {}), **comparison.to_dict()}
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_table(comparison))
    return 0


def format_table(comparison) -> str:
    """The comparison as a text table: scores, then each metric's difference from the first system
    with its 95% interval and both p-values; the sacreBLEU signatures below."""
    metrics = list(comparison.scores)
    width = max(len("system"), *(len(name) for name in comparison.systems))
    head = f"{'system':<{width}}" + "".join(f"{m:>8}" for m in metrics)
    head += "".join(f"  {'d' + m:>8} {'95% CI':>16} {'p(bs)':>7} {'p(ar)':>7}" for m in metrics)
    lines = [head, "-" * len(head)]
    for i, name in enumerate(comparison.systems):
        row = f"{name:<{width}}" + "".join(f"{comparison.scores[m][i]:>8.2f}" for m in metrics)
        for m in metrics:
            if i == 0:
                row += f"  {'baseline':>8} {'':>16} {'':>7} {'':>7}"
                continue
            r = comparison.paired[i - 1][m]
            interval = f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}]"
            row += f"  {r.difference:>+8.2f} {interval:>16} {r.p_bootstrap:>7.4f} {r.p_randomization:>7.4f}"
        lines.append(row)
    lines.append(f"{comparison.sentences} sentences; d = system - {comparison.systems[0]}; p: paired bootstrap "
                 f"(bs) and approximate randomization (ar), two-sided")
    for m in metrics:
        signatures = comparison.signatures[m]
        lines.append(f"{m}: {signatures['bootstrap']}")
        lines.append(f"{m}: {signatures['randomization']}")
    return "\n".join(lines)

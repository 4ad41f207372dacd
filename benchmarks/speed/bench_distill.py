#!/usr/bin/env python3
"""Teacher against distilled student on a CPU: the speed columns of issue 51, with BLEU beside.

Each system translates every sentence of the test split (test_2016_flickr by default: all 1,000;
or --src/--ref files), tokenizing and detokenizing included, loading and one warm-up call not;
--rounds alternate between the systems (round r times each once) and the median is reported:

    teacher         the teacher at --teacher-beam (5): a CTranslate2 export (int8 for the issue's
                    figure), a run or an ensemble of runs (runs/a+runs/b; native engine, weights
                    from --teacher-checkpoint)
    student         the student's CTranslate2 export at --student-beam (1: greedy), no vocabulary map
    student + vmap  the same export decoding with its vmap.txt (attnmt export --vocab-map)

Columns: sentences/s, output tokens/s, the ratio to the teacher, and cased detokenized sacreBLEU
BLEU / chrF of the last round's translations.

    benchmarks/speed/bench_distill.py --teacher exports/teacher-int8 --student DIST/student-ct2-int8 \\
        [--split test_2016_flickr | --src test.de --ref test.en] [--pair de-en] [--rounds 3] [--json bench_distill.json]

A multilingual teacher or student needs --pair SRC-TGT: the direction both translate (its test
files; each system is told the source and target language).

Shapes: none; everything goes through the translator's text interface.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import command, environment, make_report, rate, run_main, timed

log = logging.getLogger("attnmt.bench_distill")

COLUMNS = ("system", "engine", "beam", "vmap", "sentences", "median_s", "sent/s", "tok/s", "x teacher", "BLEU", "chrF")


def _read(path: str) -> list[str]:
    from attnmt.errors import AttnmtError

    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise AttnmtError(f"{path}: cannot read ({err})") from None


def load_systems(args) -> list[tuple[str, object, int]]:
    """(name, translator, beam) of the teacher, the student and the student with its vocabulary map."""
    from attnmt import Translator
    from attnmt.commands.arguments import ensemble_paths
    from attnmt.errors import AttnmtError
    from attnmt.run_dir import RunDir

    members = ensemble_paths(args.teacher)  # one folder, or runs/a+runs/b: an ensemble (native engine only)
    teacher = Translator.load(members, engine=RunDir(members[0]).engine, checkpoint=args.teacher_checkpoint)
    if not RunDir(args.student).is_export:
        raise AttnmtError(f"{args.student}: the student must be a CTranslate2 export (attnmt export --vocab-map)")
    if not (Path(args.student) / "vmap.txt").is_file():
        raise AttnmtError(f"{args.student}: has no vmap.txt: export the student with --vocab-map")
    plain = Translator.load(args.student, engine="ctranslate2")
    plain.engine.use_vmap = False
    with_map = Translator.load(args.student, engine="ctranslate2")
    with_map.engine.use_vmap = True
    return [("teacher", teacher, args.teacher_beam), ("student", plain, args.student_beam),
            ("student + vmap", with_map, args.student_beam)]


def test_set(args, translator) -> tuple[list[str], list[str], str]:
    """The sources, the references and the target language (--pair's, else the student's only one).

    Raises:
        AttnmtError: a multilingual student without --pair; --src without --ref.
    """
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.direction import names
    from attnmt.errors import AttnmtError

    if args.pair is None and len(translator.directions) > 1:
        raise AttnmtError(f"{args.student} is multilingual: name the direction to time with --pair SRC-TGT "
                          f"({names(translator.directions)})")

    if args.src or args.ref:
        if not (args.src and args.ref):
            raise AttnmtError("--src and --ref go together")
        src, ref = _read(args.src), _read(args.ref)
        if len(src) != len(ref):
            raise AttnmtError(f"{args.src} has {len(src)} lines, {args.ref} has {len(ref)}")
    else:
        corpus = load_corpus(corpus_spec(translator.cfg.data), args.split, args.pair)
        src, ref = corpus.src, corpus.tgt
    if args.sentences:
        src, ref = src[:args.sentences], ref[:args.sentences]
    return src, ref, (args.pair or translator.directions[0]).target


def run_bench(args: argparse.Namespace, argv: list[str] | None = None) -> dict:
    from attnmt.direction import language_args
    from attnmt.evaluation import score_translations

    systems = load_systems(args)
    sources, refs, tgt_lang = test_set(args, systems[1][1])
    languages = language_args(args.pair)
    timings: dict[str, list[float]] = {name: [] for name, _, _ in systems}
    outputs: dict[str, list] = {}
    for name, translator, beam in systems:  # warm-up
        translator.translate(sources[:8], beam_size=beam, **languages)
    for r in range(args.rounds):
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        for name, translator, beam in order:
            timing = timed(lambda: translator.translate(sources, beam_size=beam, batch_size=args.batch_size,
                                                        **languages))
            timings[name].append(timing.seconds[0])
            outputs[name] = timing.result
            log.info("round %d: %s %.2f s", r + 1, name, timing.seconds[0])
    results = []
    teacher_s = statistics.median(timings["teacher"])
    for name, translator, beam in systems:
        seconds = statistics.median(timings[name])
        texts = [result.text for result in outputs[name]]
        tokens = sum(len(result.tokens) for result in outputs[name])
        scores = score_translations(texts, refs, tgt_lang=tgt_lang)
        results.append({"kind": "decode", "system": name, "engine": translator.engine.name, "beam": beam,
                        "vmap": bool(getattr(translator.engine, "use_vmap", False)), "sentences": len(sources),
                        "median_s": round(seconds, 3), "sentences_per_s": rate(len(sources), seconds),
                        "tokens_per_s": rate(tokens, seconds), "vs_teacher": round(teacher_s / seconds, 2),
                        "bleu": round(scores["bleu"], 2), "chrf": round(scores["chrf"], 2),
                        "rounds": timings[name]})
    settings = {"teacher": args.teacher, "teacher_checkpoint": args.teacher_checkpoint, "student": args.student,
                "split": None if args.src else args.split, "src": args.src, "ref": args.ref,
                "pair": None if args.pair is None else str(args.pair),
                "sentences": len(sources), "rounds": args.rounds,
                "teacher_beam": args.teacher_beam, "student_beam": args.student_beam, "batch_size": args.batch_size}
    return make_report("bench_distill", command=command(__file__, argv), environment=environment(), settings=settings,
                       results=results, notes=["tokenizing and detokenizing included; loading and a warm-up not"])


def format_table(report: dict) -> str:
    cells = [[row["system"], row["engine"], str(row["beam"]), "yes" if row["vmap"] else "no", str(row["sentences"]),
              f"{row['median_s']:.3f}", f"{row['sentences_per_s']:.1f}", f"{row['tokens_per_s']:.1f}",
              f"{row['vs_teacher']:.2f}", f"{row['bleu']:.2f}", f"{row['chrf']:.2f}"] for row in report["results"]]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(COLUMNS)]
    lines = ["  ".join(h.rjust(w) if i > 0 else h.ljust(w) for i, (h, w) in enumerate(zip(COLUMNS, widths)))]
    lines.append("-" * len(lines[0]))
    lines += ["  ".join(c.rjust(w) if i > 0 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in cells]
    env = report["environment"]
    lines.append(f"{env.get('cpu')}, {env.get('threads')} threads, {env.get('date')}; median of "
                 f"{report['settings']['rounds']} round(s); tokenizing included")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from attnmt.commands.arguments import direction

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--teacher", required=True,
                   help="the teacher: a CTranslate2 export, a run or runs joined by '+' (an ensemble)")
    p.add_argument("--teacher-checkpoint", default="best",
                   help="a run teacher's weights: best, last, average or a file (default best)")
    p.add_argument("--student", required=True, help="the student's CTranslate2 export, with vmap.txt")
    p.add_argument("--split", default="test_2016_flickr", help="the student's test split (own data: test)")
    p.add_argument("--src", default=None, help="source sentences instead of --split (with --ref)")
    p.add_argument("--ref", default=None, help="their references")
    p.add_argument("--pair", type=direction, default=None, metavar="SRC-TGT",
                   help="the direction to time (a multilingual teacher or student needs it)")
    p.add_argument("--sentences", type=int, default=None, help="only the first N sentences (smoke runs)")
    p.add_argument("--teacher-beam", type=int, default=5)
    p.add_argument("--student-beam", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per system; the median is reported")
    p.add_argument("--json", default="bench_distill.json", metavar="PATH", help="where the JSON report goes ('' for none)")
    p.add_argument("-q", "--quiet", action="store_true", help="no table")
    args = p.parse_args(argv)
    for name in ("sentences", "teacher_beam", "student_beam", "batch_size", "rounds"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be 1 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_main("bench_distill", args, argv, run_bench, format_table)


if __name__ == "__main__":
    sys.exit(main())

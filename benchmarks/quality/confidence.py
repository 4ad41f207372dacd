#!/usr/bin/env python3
"""How well a model's confidence tells good translations from bad ones on a set it never saw (docs/
results.md, "Confidence"): fitted on the validation set (attnmt calibrate's map, calibration.py),
measured on test_2016_flickr against each sentence's chrF; each feature alone beside it (its
Pearson and Spearman with chrF, sign as it comes), the reliability diagram, the share of the least
confident tenth in the worst quarter, and what the features cost beside decoding.

    benchmarks/quality/confidence.py RUN_OR_EXPORT [--beam 5] [--limit N] [--json report.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import command, environment, make_report, write_report  # noqa: E402

TARGETS = {"pearson": 0.65, "ece": 0.05, "least_tenth_in_worst_quarter": 0.80}


def run(args) -> dict:
    import numpy as np

    from attnmt.calibration import calibrate, quality_of, sentence_chrfs
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.decoding.confidence import FEATURES
    from attnmt.decoding.options import DecodingOptions
    from attnmt.run_dir import RunDir
    from attnmt.translator import Translator

    engine = args.engine or RunDir(args.run).engine
    translator = Translator.load(args.run, engine=engine)
    options = DecodingOptions(beam_size=args.beam)
    val = load_corpus(corpus_spec(translator.cfg.data), "val")
    calibration, fitted = calibrate(translator, [(val.src[:args.limit], val.tgt[:args.limit], options)])
    translator.calibration = calibration
    test = load_corpus(corpus_spec(translator.cfg.data), args.split)
    sources, refs = test.src[:args.limit], test.tgt[:args.limit]
    translator.translate(sources[:16], options)  # warm up
    start = time.perf_counter()
    results = translator.translate(sources, options)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    rows = [translator.confidence_features(r) for r in results]
    feature_seconds = time.perf_counter() - start
    chrfs = sentence_chrfs([r.text for r in results], refs)
    confidence = [r.confidence for r in results]
    quality = quality_of(confidence, chrfs, calibration.threshold)
    out = [{"kind": "confidence", "split": args.split, "sentences": len(sources), **quality,
            "targets": TARGETS, "decode_seconds": round(seconds, 2), "feature_seconds": round(feature_seconds, 3),
            "feature_share": round(feature_seconds / seconds, 4), "val": fitted}]
    print(f"{args.split}: {len(sources)} sentences, beam {args.beam}, engine {engine}; fitted on val "
          f"(threshold chrF {calibration.threshold:.1f}; cross-validated Pearson {fitted['cross_validated']['pearson']})")
    print(f"  confidence: Pearson {quality['pearson']:.3f} (target {TARGETS['pearson']}), Spearman "
          f"{quality['spearman']:.3f}, ECE {quality['ece']:.3f} (target {TARGETS['ece']}), least tenth in the "
          f"worst quarter {quality['least_tenth_in_worst_quarter']:.1%} (target 80%)")
    print(f"  features: {feature_seconds:.3f} s beside {seconds:.1f} s of decoding ({feature_seconds / seconds:.1%})")
    for name in FEATURES:
        values = np.array([row[name] for row in rows])
        alone = quality_of(values, chrfs, calibration.threshold) if values.std() > 0 else {"pearson": 0, "spearman": 0}
        out.append({"kind": "feature", "feature": name, "pearson": alone["pearson"], "spearman": alone["spearman"],
                    "weight": fitted["weights"].get(name)})
        print(f"  {name:<18} Pearson {alone['pearson']:+.3f}  Spearman {alone['spearman']:+.3f}  "
              f"weight {fitted['weights'].get(name)}")
    print("  reliability (predicted -> observed, sentences):",
          ", ".join(f"{b['predicted']:.2f}->{b['observed']:.2f} ({b['sentences']})" for b in quality["reliability"]))
    return make_report("confidence", command=command(__file__, args.argv), environment=environment(),
                       settings={"run": args.run, "engine": engine, "beam": args.beam, "split": args.split},
                       results=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run or an export")
    parser.add_argument("--engine", default=None, help="native or ctranslate2 (default: by the folder)")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences of each set (default: all)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    report = run(args)
    if args.json:
        write_report(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

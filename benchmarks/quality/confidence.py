#!/usr/bin/env python3
"""How well a model's confidence tells good translations from bad ones on a set it never saw (docs/
results.md, "Confidence"): fitted on the validation set (attnmt calibrate's map, calibration.py),
measured on test_2016_flickr against each sentence's chrF; each feature alone beside it (its
Pearson and Spearman with chrF, sign as it comes), the reliability diagram, the share of the least
confident tenth in the worst quarter, and what the features cost beside decoding.

    benchmarks/quality/confidence.py RUN_OR_EXPORT [--beam 5] [--limit N] [--json report.json]
    benchmarks/quality/confidence.py RUN_OR_EXPORT --rerank [--splits val test_2016_flickr]
    benchmarks/quality/confidence.py RUN_OR_EXPORT --reverse REVERSE_RUN_OR_EXPORT

--rerank asks whether the confidence picks better translations than the beam does: each sentence's
n-best list (n = the beam) ranked by the chrF the map predicts for each hypothesis instead of by its
length-normalized score, BLEU and chrF of both with sacreBLEU's paired tests (significance.py), and
the oracle (the hypothesis closest to the reference) as the ceiling. The map is fitted on val, so
val's figures are in-sample; test_2016_flickr's are not.

--reverse asks what a model of the other direction adds (dual conditional cross-entropy,
Junczys-Dowmunt 2018): each translation scored back into its source by REVERSE (forced decoding,
the source's log-probability per token given the translation), the map fitted on val with and
without that feature, both measured on --split, and the reverse scoring's time beside decoding.
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


def calibrated(args):
    """The model of `args.run` with a map fitted on (the first --limit sentences of) its val set at
    --beam: (translator, engine, options, val, calibration, the fit's report)."""
    from attnmt.calibration import calibrate
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.decoding.options import DecodingOptions
    from attnmt.run_dir import RunDir
    from attnmt.translator import Translator

    engine = args.engine or RunDir(args.run).engine
    translator = Translator.load(args.run, engine=engine)
    options = DecodingOptions(beam_size=args.beam)
    val = load_corpus(corpus_spec(translator.cfg.data), "val")
    calibration, fitted = calibrate(translator, [(val.src[:args.limit], val.tgt[:args.limit], options)])
    translator.calibration = calibration
    return translator, engine, options, val, calibration, fitted


def run(args) -> dict:
    import numpy as np

    from attnmt.calibration import quality_of, sentence_chrfs
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.decoding.confidence import FEATURES

    translator, engine, options, val, calibration, fitted = calibrated(args)
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


def rerank(args) -> dict:
    from sacrebleu.metrics import CHRF

    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.decoding.options import DecodingOptions
    from attnmt.significance import compare_systems

    translator, engine, _, val, calibration, _ = calibrated(args)
    chrf = CHRF()
    out = []
    for split in args.splits:
        data = val if split == "val" else load_corpus(corpus_spec(translator.cfg.data), split)
        sources, refs = data.src[:args.limit], data.tgt[:args.limit]
        results = translator.translate(sources, DecodingOptions(beam_size=args.beam, n_best=args.beam))
        picked, oracle, moved = [], [], 0
        for result, ref in zip(results, refs):
            predicted = [calibration.predicted_chrf(translator.confidence_features(result, rank))
                         for rank in range(len(result.alternatives))]
            best = max(range(len(predicted)), key=lambda k: (predicted[k], -k))  # a tie keeps the beam's order
            moved += best != 0
            picked.append(result.alternatives[best].text)
            oracle.append(max((a.text for a in result.alternatives),
                              key=lambda text: chrf.sentence_score(text, [ref]).score))
        found = compare_systems([("beam", [r.text for r in results]), ("confidence", picked), ("oracle", oracle)],
                                refs)
        row = {"kind": "rerank", "split": split, "sentences": len(sources), "moved": moved,
               "bleu": dict(zip(found.systems, found.scores["BLEU"])),
               "chrf": dict(zip(found.systems, found.scores["chrF2"])),
               "confidence_vs_beam": {name: vars(found.paired[0][name]) for name in ("BLEU", "chrF2")}}
        out.append(row)
        bleu, p = row["bleu"], found.paired[0]["BLEU"].p_bootstrap
        print(f"{split}: {len(sources)} sentences, beam {args.beam}; reranked by confidence: {moved} moved; BLEU "
              f"beam {bleu['beam']:.2f}, confidence {bleu['confidence']:.2f} (p = {p:.3f}), oracle "
              f"{bleu['oracle']:.2f}; chrF {row['chrf']['beam']:.2f} -> {row['chrf']['confidence']:.2f}")
    return make_report("confidence_rerank", command=command(__file__, args.argv), environment=environment(),
                       settings={"run": args.run, "engine": engine, "beam": args.beam, "splits": args.splits},
                       results=out)


def reverse_scores(back, translations, sources) -> list[float]:
    """Each source's log-probability per token (<eos> included) given its translation, by `back`
    (a Translator of the other direction); an empty translation or source: the least of the others."""
    scored = back.score(translations, sources)
    values = [s.normalized if s.num_tokens > 0 and s.log_prob == s.log_prob else None for s in scored]
    floor = min((v for v in values if v is not None), default=0.0)
    return [floor if v is None else v for v in values]


def with_reverse(args) -> dict:
    from attnmt.calibration import quality_of, sentence_chrfs, translate_with_features
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.decoding.confidence import FEATURES, Calibration
    from attnmt.decoding.options import DecodingOptions
    from attnmt.run_dir import RunDir
    from attnmt.translator import Translator

    engine = args.engine or RunDir(args.run).engine
    translator = Translator.load(args.run, engine=engine)
    back = Translator.load(args.reverse, engine=RunDir(args.reverse).engine)
    options = DecodingOptions(beam_size=args.beam)
    found = {}
    for split in ("val", args.split):
        data = load_corpus(corpus_spec(translator.cfg.data), split)
        sources, refs = data.src[:args.limit], data.tgt[:args.limit]
        start = time.perf_counter()
        texts, rows = translate_with_features(translator, sources, options)
        decoding = time.perf_counter() - start
        start = time.perf_counter()
        for row, value in zip(rows, reverse_scores(back, texts, sources)):
            row["reverse_logprob"] = value
        found[split] = (rows, sentence_chrfs(texts, refs), decoding, time.perf_counter() - start)
    (val_rows, val_chrfs, _, _), (rows, chrfs, decoding, scoring) = found["val"], found[args.split]
    print(f"{args.split}: {len(rows)} sentences, beam {args.beam}, engine {engine}; reverse {args.reverse}: "
          f"{scoring:.1f} s beside {decoding:.1f} s of decoding ({scoring / decoding:.1%})")
    out = []
    for name, features in (("without", FEATURES), ("with reverse_logprob", FEATURES + ("reverse_logprob",))):
        calibration = Calibration.fit(val_rows, val_chrfs, features=features)
        quality = quality_of([calibration.confidence(r) for r in rows], chrfs, calibration.threshold)
        ranked = quality_of([calibration.predicted_chrf(r) for r in rows], chrfs, calibration.threshold)
        out.append({"kind": "map", "map": name, **quality, "predicted_chrf_pearson": ranked["pearson"],
                    "predicted_chrf_least_tenth": ranked["least_tenth_in_worst_quarter"],
                    "weights": dict(zip(features, calibration.weights.round(4).tolist()))})
        print(f"  {name:<22} Pearson {quality['pearson']:.3f} (its predicted chrF {ranked['pearson']:.3f}), "
              f"ECE {quality['ece']:.3f}, least tenth in the worst quarter {quality['least_tenth_in_worst_quarter']:.1%}")
    alone = quality_of([r["reverse_logprob"] for r in rows], chrfs, 0.0)
    print(f"  reverse_logprob alone: Pearson {alone['pearson']:+.3f}, Spearman {alone['spearman']:+.3f}")
    out.append({"kind": "feature", "feature": "reverse_logprob", "pearson": alone["pearson"],
                "spearman": alone["spearman"], "decode_seconds": round(decoding, 2), "reverse_seconds": round(scoring, 2)})
    return make_report("confidence_reverse", command=command(__file__, args.argv), environment=environment(),
                       settings={"run": args.run, "reverse": args.reverse, "engine": engine, "beam": args.beam,
                                 "split": args.split}, results=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run or an export")
    parser.add_argument("--engine", default=None, help="native or ctranslate2 (default: by the folder)")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences of each set (default: all)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--rerank", action="store_true", help="n-best reranked by confidence against the beam")
    parser.add_argument("--splits", nargs="+", default=["val", "test_2016_flickr"], help="with --rerank")
    parser.add_argument("--reverse", default=None, metavar="RUN_OR_EXPORT",
                        help="a model of the other direction: what its score of the source adds to the map")
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    report = rerank(args) if args.rerank else with_reverse(args) if args.reverse else run(args)
    if args.json:
        write_report(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

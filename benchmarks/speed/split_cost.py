#!/usr/bin/env python3
"""What sentence splitting costs plain-text translation: test_2016_flickr's sentences (one per
line, as a line-aligned file) translated with split_sentences off and on, the two alternated
within one run so that both see the same machine load (docs/performance.md, "Sentence splitting");
and the time that what every translation adds takes, split or not: measuring each result's
coverage (decoding/coverage.py) and its confidence (decoding/confidence.py: the features and the
model's map, calibrated or not; docs/results.md, "Confidence").

    benchmarks/speed/split_cost.py RUN_OR_EXPORT [--engine ctranslate2] [--beam 5] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.common import cpu_name


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run")
    parser.add_argument("--engine", default=None)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--split", default="test_2016_flickr")
    args = parser.parse_args(argv)

    import os

    import torch

    from attnmt import Translator
    from attnmt.data.corpus import load_multi30k
    from attnmt.data.sentences import split_sentences
    from attnmt.decoding.options import DecodingOptions
    from attnmt.decoding.paragraphs import join_sentences
    from attnmt.run_dir import RunDir

    torch.set_num_threads(args.threads)
    engine = args.engine or RunDir(args.run).engine
    translator = Translator.load(args.run, engine=engine, device="cpu")
    src_lang, tgt_lang = translator.directions[0]
    sentences = load_multi30k(args.split, src_lang, tgt_lang).src
    print(f"{cpu_name()}, {args.threads} threads, load {os.getloadavg()}, engine {engine}, beam {args.beam}, "
          f"{len(sentences)} sentences of {args.split}")
    translator.translate(sentences[:64], beam_size=args.beam)  # warm up
    times = {False: [], True: []}
    for repeat in range(args.repeats):
        for split in ((False, True) if repeat % 2 == 0 else (True, False)):  # each first as often: no order bias
            start = time.perf_counter()
            results = translator.translate(sentences, beam_size=args.beam, split_sentences=split)
            times[split].append(time.perf_counter() - start)
            if split:
                outputs_split = [r.text for r in results]
            else:
                outputs_plain = [r.text for r in results]
    start = time.perf_counter()
    for sentence in sentences:
        split_sentences(sentence, src_lang)
    segmenting = time.perf_counter() - start
    plain = translator.translate(sentences, beam_size=args.beam)
    start = time.perf_counter()
    for sentence, result in zip(sentences, plain):  # what every translation now adds, split or not
        translator._measure(sentence, result, DecodingOptions(beam_size=args.beam))
    measuring = time.perf_counter() - start
    start = time.perf_counter()
    for result in plain:
        translator._confide(result)
    confiding = time.perf_counter() - start
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"  split off: {len(sentences) / off:8.1f} sentences/s (median of {args.repeats}: {off:.2f} s)")
    print(f"  split on:  {len(sentences) / on:8.1f} sentences/s (median of {args.repeats}: {on:.2f} s)")
    ratios = [b / a for a, b in zip(times[False], times[True])]  # each pair ran back to back
    spans = [split_sentences(sentence, src_lang) for sentence in sentences]
    start = time.perf_counter()
    for sentence, found, result in zip(sentences, spans, plain):
        join_sentences(sentence, found, [result], subword=translator.subword)
    joining = time.perf_counter() - start
    print(f"  cost, A/B: {100 * (statistics.median(ratios) - 1):+.1f}% time (median of the {args.repeats} pairs' "
          f"ratios; pairs from {100 * (min(ratios) - 1):+.1f}% to {100 * (max(ratios) - 1):+.1f}%)")
    print(f"  cost, by parts: split_sentences {1e3 * segmenting:.1f} ms + join_sentences {1e3 * joining:.1f} ms = "
          f"{100 * (segmenting + joining) / off:.1f}% of the translation")
    print(f"  coverage measured after every translation (both runs): {1e3 * measuring:.1f} ms "
          f"({100 * measuring / off:.1f}% of the translation)")
    calibrated = "calibrated" if translator.calibration is not None else "uncalibrated"
    print(f"  confidence of every translation ({calibrated}): {1e3 * confiding:.1f} ms "
          f"({100 * confiding / off:.1f}% of the translation)")
    differ = sum(a != b for a, b in zip(outputs_plain, outputs_split))
    print(f"  outputs that differ (lines that split into several sentences): {differ}/{len(sentences)}")
    print(f"  load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

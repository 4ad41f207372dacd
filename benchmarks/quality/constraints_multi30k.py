#!/usr/bin/env python3
"""Terminology constraints on test_2016_flickr: BLEU, chrF, constraint coverage and speed of
lexically constrained beam search against unconstrained decoding, with constraints drawn from the
reference (docs/results.md).

Each sentence gets up to `--per-sentence` reference words (at least 4 letters, drawn with a fixed
seed) as target-phrase constraints, as in Post & Vilar (2018) and Hu et al. (2019). Coverage is
the share of those words found in the output (whole words, case as in the reference), for the
unconstrained output too (how many it gets anyway).

    benchmarks/quality/constraints_multi30k.py RUN_DIR [--beam 5] [--per-sentence 2] [--sentences N]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt import Translator
from attnmt.data.corpus import corpus_spec, load_corpus
from attnmt.evaluation import score_translations
from benchmarks.common import command, environment, make_report, torch_threads, write_report

WORD = re.compile(r"\w+")


def draw_constraints(references: list[str], per_sentence: int, seed: int) -> list[list[str]]:
    """Up to `per_sentence` distinct reference words of at least 4 letters per sentence."""
    rng = random.Random(seed)
    drawn = []
    for reference in references:
        words = list(dict.fromkeys(w for w in WORD.findall(reference) if len(w) >= 4))
        drawn.append(rng.sample(words, min(per_sentence, len(words))))
    return drawn


def coverage(outputs: list[str], constraints: list[list[str]]) -> float:
    wanted = sum(len(c) for c in constraints)
    found = sum(word in set(WORD.findall(text)) for text, words in zip(outputs, constraints) for word in words)
    return found / max(wanted, 1)


def decode(translator: Translator, sources: list[str], beam: int, constraints,
           length_penalty: float | None = None) -> tuple[list[str], float]:
    start = time.perf_counter()
    results = translator.translate(sources, beam_size=beam, constraints=constraints, length_penalty=length_penalty)
    return [r.text for r in results], time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="constraints_multi30k", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--length-penalty", type=float, default=None, help="GNMT alpha (default: the run's)")
    p.add_argument("--per-sentence", type=int, default=2)
    p.add_argument("--split", default="test_2016_flickr", help="the split to translate (own data: test)")
    p.add_argument("--sentences", type=int, default=None, help="only the first N sentences")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", default="constraints_multi30k.json", metavar="PATH")
    args = p.parse_args(argv)
    if args.beam < 2 or args.per_sentence < 1:
        print("constraints_multi30k: error: --beam must be >= 2 and --per-sentence >= 1", file=sys.stderr)
        return 2
    translator = Translator.load(args.run_dir, device="cpu")
    corpus = load_corpus(corpus_spec(translator.cfg.data), args.split)
    sources, references = corpus.src[: args.sentences], corpus.tgt[: args.sentences]
    constraints = draw_constraints(references, args.per_sentence, args.seed)
    rows = []
    with torch_threads(args.threads):
        env = environment("cpu")
        for name, given in (("unconstrained", None), ("constrained", constraints)):
            outputs, seconds = decode(translator, sources, args.beam, given, args.length_penalty)
            scores = score_translations(outputs, references, tgt_lang=translator.cfg.data.tgt_lang)
            rows.append({"kind": "decode", "decoding": name, "sentences": len(sources), "bleu": scores["bleu"],
                         "chrf": scores["chrf"], "coverage": round(coverage(outputs, constraints), 4),
                         "seconds": round(seconds, 2), "sent_per_s": round(len(sources) / seconds, 2)})
    for row in rows:
        print(f"{row['decoding']:14} BLEU {row['bleu']:6.2f}  chrF {row['chrf']:6.2f}  coverage "
              f"{100 * row['coverage']:5.1f}%  {row['sent_per_s']:7.2f} sentences/s")
    write_report(args.json, make_report("constraints_multi30k", command=command(__file__, argv), environment=env,
                                        settings={"run_dir": args.run_dir, "split": args.split, "beam": args.beam,
                                                  "length_penalty": args.length_penalty,
                                                  "per_sentence": args.per_sentence, "seed": args.seed,
                                                  "constraints": sum(len(c) for c in constraints)},
                                        results=rows, notes=[]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

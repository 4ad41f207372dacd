#!/usr/bin/env python3
"""What a text in capitals costs the model alone (issue 62, item 4: no input costs more than its
length), with the output budget counted on the typed pieces (before) and in lower case (now,
search.budget_in_lower_case): one loaded model, the same sentences, only the budget differing,
timed in alternation (round r runs both, in an order rotated by r). Per setting: the median
seconds of the clean sentences and of the same in ALL CAPITALS, their ratio, the output tokens
a sentence, and how many outputs the bound cut. Read as typed: case, slips, final marks and the
phrase table off (robustness.py --as-typed), so the model sees the capitals.

    benchmarks/speed/capitals_budget.py RUN_OR_EXPORT [--sentences 200] [--rounds 2] [--beam 5]
        [--split test_2016_flickr] [--engine ctranslate2|native]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

AS_TYPED = dict(restore_case=False, correct_spelling=False, complete_final_mark=False, short_phrases=False)
SETTINGS = (("typed pieces", False), ("lower case", True))  # (name, search.budget_in_lower_case)


def timed(translator, texts: list[str], beam: int) -> tuple[float, float, int]:
    """(seconds, output tokens a sentence, outputs cut at the bound) of one translate call."""
    start = time.perf_counter()
    results = translator.translate(texts, beam_size=beam)
    seconds = time.perf_counter() - start
    return seconds, sum(len(r.tokens) for r in results) / len(results), sum(r.at_length_bound for r in results)


def run(args) -> dict:
    from attnmt.data.corpus import corpus_spec, load_corpus
    from attnmt.run_dir import RunDir
    from attnmt.translator import Translator

    translator = Translator.load(args.run, engine=args.engine or RunDir(args.run).engine)
    translator.cfg = dataclasses.replace(translator.cfg, search=dataclasses.replace(translator.cfg.search, **AS_TYPED))
    clean = load_corpus(corpus_spec(translator.cfg.data), args.split).src[:args.sentences]
    capitals = [text.upper() for text in clean]
    translator.translate(clean, beam_size=args.beam)  # warm up
    found = {name: {"clean": [], "capitals": []} for name, _ in SETTINGS}
    tokens, cut = {}, {}
    for r in range(args.rounds):
        for name, lower in SETTINGS[r % 2:] + SETTINGS[:r % 2]:
            translator.engine.search_cfg = dataclasses.replace(translator.engine.search_cfg, budget_in_lower_case=lower)
            for kind, texts in (("clean", clean), ("capitals", capitals)):
                seconds, tokens[name, kind], cut[name, kind] = timed(translator, texts, args.beam)
                found[name][kind].append(seconds)
    report = {"run": str(args.run), "sentences": len(clean), "beam": args.beam, "rounds": args.rounds, "settings": []}
    for name, lower in SETTINGS:
        clean_s, caps_s = statistics.median(found[name]["clean"]), statistics.median(found[name]["capitals"])
        row = {"budget": name, "budget_in_lower_case": lower, "clean_seconds": round(clean_s, 3),
               "capitals_seconds": round(caps_s, 3), "ratio": round(caps_s / clean_s, 2),
               "clean_tokens": round(tokens[name, "clean"], 1), "capitals_tokens": round(tokens[name, "capitals"], 1),
               "clean_cut": cut[name, "clean"], "capitals_cut": cut[name, "capitals"]}
        report["settings"].append(row)
        print(f"budget on the {name:<12}: clean {clean_s:7.2f} s, capitals {caps_s:7.2f} s ({row['ratio']}x); "
              f"output tokens a sentence {row['clean_tokens']} / {row['capitals_tokens']}; cut at the bound "
              f"{row['clean_cut']} / {row['capitals_cut']} of {len(clean)}", flush=True)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run or an export")
    parser.add_argument("--engine", default=None, help="native or ctranslate2 (default: by the folder)")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--beam", type=int, default=5)
    args = parser.parse_args(argv)
    if args.sentences < 1 or args.rounds < 1 or args.beam < 1:
        parser.error("--sentences, --rounds and --beam must be at least 1")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Paragraphs of Multi30k: BLEU with and without sentence splitting, and how well coverage flags
translations that lost a sentence (docs/results.md, "Sentence splitting" and "Coverage").

Paragraphs are 3-5 consecutive captions of a split (sizes drawn with a fixed seed), a final period
added to each caption (and its reference) that has none, joined with one space. Three ways:
  alone      each caption translated on its own, the outputs joined per paragraph (the bar);
  split      each paragraph through Translator.translate(split_sentences=True);
  unsplit    each paragraph as one "sentence" (what attnmt did before: sentences get dropped).
With --http, the paragraphs also go through `attnmt serve`'s POST /translate (which always splits).

Boundaries: the caption joins are the gold sentence boundaries; precision, recall and F1 of the
splitter's, by the rules alone (data/sentences.split_sentences) and as the model splits
(Translator.sentences: a stretch without sentence marks split by the boundary counts its lexicon
keeps, data/boundaries.py). --boundaries prints only those, for every --typed variant, with no
model: the counts are taken from the split's training data (Multi30k train, --src-lang), or from
RUN's lexicon.json when RUN is given; --single adds how many single captions (typed the same way)
the model's splitter cuts.

Coverage (decoding/coverage.py): a paragraph of `unsplit` "lost a sentence" when, for one of its
captions, fewer than half the content words of that caption's `alone` translation (lower-cased,
3+ letters, not a stop word) appear in the paragraph's output: a lexical judgement, independent of
attention. Reported: the share of those paragraphs flagged, and the share of `alone` captions
flagged (false alarms). --grid prints, for the split, the flag rates over a grid of thresholds
(choose on val, report on test_2016_flickr).

    benchmarks/quality/paragraphs_multi30k.py RUN_OR_EXPORT [--engine ctranslate2] [--split val] [--beam 5]
        [--grid] [--http] [--typed lowercase|uppercase|no-punct|lowercase-no-punct] [--recount]
    benchmarks/quality/paragraphs_multi30k.py [RUN] --boundaries [--split val] [--src-lang de]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the benchmarks package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

STOP = set("the and with for are from that this his her their its into onto over under near while who "
           "has have one two three some other each very there".split())


def with_period(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def make_paragraphs(count: int, seed: int = 1) -> list[range]:
    rng, out, start = random.Random(seed), [], 0
    while start < count:
        size = rng.randint(3, 5)
        out.append(range(start, min(count, start + size)))
        start += size
    return out


TYPED = ["as-written", "lowercase", "uppercase", "no-punct", "lowercase-no-punct"]


def typed_captions(sources: list[str], refs: list[str], typed: str) -> tuple[list[str], list[str]]:
    """The captions (a final period added) and their references as people type them."""
    sources = [with_period(s) for s in sources]
    refs = [with_period(r) for r in refs]
    if typed in ("no-punct", "lowercase-no-punct"):
        sources = [s.rstrip(".!? ") for s in sources]
    if typed.startswith("lowercase"):
        sources, refs = [s.lower() for s in sources], [r.lower() for r in refs]
    elif typed == "uppercase":
        sources, refs = [s.upper() for s in sources], [r.lower() for r in refs]
    return sources, refs


def gold_boundaries(paragraph: str, captions: list[str]) -> set[int]:
    """Where each caption after the first starts in its paragraph."""
    starts, position = set(), 0
    for caption in captions:
        at = paragraph.index(caption, position)
        starts.add(at)
        position = at + len(caption)
    return starts - {0}


def boundary_scores(paragraphs: list[str], golds: list[set[int]], split) -> dict:
    """Precision, recall and F1 (in %) of the sentence starts `split(paragraph)` finds."""
    right = made_up = missed = 0
    for paragraph, gold in zip(paragraphs, golds):
        found = {start for start, _ in split(paragraph)} - {0}
        right, made_up, missed = right + len(gold & found), made_up + len(found - gold), missed + len(gold - found)
    precision, recall = right / max(1, right + made_up), right / max(1, right + missed)
    f1 = 2 * precision * recall / max(1e-12, precision + recall)
    return {"precision": 100 * precision, "recall": 100 * recall, "f1": 100 * f1, "right": right,
            "made up": made_up, "missed": missed}


def print_boundaries(name: str, scores: dict) -> None:
    print(f"  {name:34} P {scores['precision']:5.1f}  R {scores['recall']:5.1f}  F1 {scores['f1']:5.1f}  "
          f"({scores['right']} found, {scores['made up']} made up, {scores['missed']} missed)")


def boundaries_only(args) -> int:
    """--boundaries: the splitters' boundary figures for every typed variant, no model."""
    from attnmt.data.corpus import load_multi30k
    from attnmt.data.lexicon import Lexicon
    from attnmt.data.sentences import split_sentences
    from attnmt.run_dir import RunDir

    tgt_lang = "en" if args.src_lang != "en" else "de"
    if args.run:
        lexicon, source = RunDir(args.run).pipeline().lexicon, f"{args.run}/lexicon.json"
    else:
        start = time.perf_counter()
        train = load_multi30k("train", args.src_lang, tgt_lang)
        lexicon, source = Lexicon.from_sentences(s.split() for s in train.src), f"{train.name} source side"
        source += f" ({len(train.src)} sentences, counted in {time.perf_counter() - start:.1f} s)"
    boundaries = lexicon.boundaries if lexicon is not None else None
    print(f"boundary counts: {source}" + ("" if boundaries is not None else ": none kept (no splitting by them)"))
    corpus = load_multi30k(args.split, args.src_lang, tgt_lang)
    groups = make_paragraphs(len(corpus.src))
    for typed in TYPED:
        sources, _ = typed_captions(corpus.src, corpus.tgt, typed)
        paragraphs = [" ".join(sources[i] for i in g) for g in groups]
        golds = [gold_boundaries(p, [sources[i] for i in g]) for p, g in zip(paragraphs, groups)]
        print(f"{args.split}, {typed}: {len(paragraphs)} paragraphs of 3-5 captions, {sum(map(len, golds))} boundaries")
        print_boundaries("rules (split_sentences)", boundary_scores(paragraphs, golds,
                                                                    lambda p: split_sentences(p, args.src_lang)))
        start = time.perf_counter()
        scores = boundary_scores(paragraphs, golds, lambda p: split_sentences(p, args.src_lang, boundaries))
        print_boundaries(f"with the counts ({time.perf_counter() - start:.2f} s)", scores)
        if args.single:
            cut = sum(len(split_sentences(s, args.src_lang, boundaries)) > 1 for s in sources)
            print(f"  single captions split in two or more (with the counts): {cut}/{len(sources)}")
    return 0


def content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-zäöüß]{3,}", text.lower()) if w not in STOP]


def lost_a_sentence(paragraph_output: str, alone: list[str]) -> bool:
    found = set(content_words(paragraph_output))
    for sentence in alone:
        words = content_words(sentence)
        if len(words) >= 2 and sum(w in found for w in words) / len(words) < 0.5:
            return True
    return False


def figures(result) -> dict:
    """The raw signals of one result, for choosing thresholds: per sentence, the least attention a
    source word received, the capped-mean coverage and the length ratio."""
    return [{"least": s.least, "coverage": s.coverage, "ratio": s.length_ratio} for s in result.sentences]


def flag(signals: list[dict], least: float, coverage: float, ratio: float) -> bool:
    return any((s["least"] is not None and s["least"] < least) or (s["coverage"] is not None and s["coverage"] < coverage)
               or s["ratio"] < ratio for s in signals)


def translate_http(run: str, engine: str | None, paragraphs: list[str], beam: int) -> tuple[list[str], float]:
    import httpx

    port = 8765
    argv = [sys.executable, "-m", "attnmt", "serve", run, "--port", str(port), "--beam", str(beam)]
    if engine:
        argv += ["--engine", engine]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("attnmt serve did not start")
            time.sleep(0.5)
        model = httpx.get(url + "/v1/model", timeout=10).json()
        outputs, start = [], time.perf_counter()
        for i in range(0, len(paragraphs), 32):
            answer = httpx.post(url + "/translate", json={"q": paragraphs[i:i + 32], "source": model["source_lang"],
                                                          "target": model["target_lang"]}, timeout=600)
            answer.raise_for_status()
            outputs += answer.json()["translatedText"]
        return outputs, time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(timeout=60)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", help="a run directory or export (optional with --boundaries)")
    parser.add_argument("--engine", default=None, help="native or ctranslate2 (default: by the folder)")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--grid", action="store_true", help="flag rates over a grid of thresholds")
    parser.add_argument("--http", action="store_true", help="also through attnmt serve's POST /translate")
    parser.add_argument("--json", type=Path, help="write the per-text signals here")
    parser.add_argument("--typed", choices=TYPED, default="as-written", help="the captions as people type them "
                        "(scored lowercased when the case changes; alone: the same typed captions one by one)")
    parser.add_argument("--boundaries", action="store_true", help="only the splitters' boundary figures, for every "
                        "--typed variant (no model needed: counts from Multi30k train, or RUN's lexicon)")
    parser.add_argument("--src-lang", default="de", help="with --boundaries and no RUN: the source language")
    parser.add_argument("--single", action="store_true", help="with --boundaries: also single captions cut")
    parser.add_argument("--recount", action="store_true", help="use boundary counts of Multi30k train (in memory; "
                        "for a run trained before its lexicon kept them; --http serves the run as it is)")
    args = parser.parse_args(argv)
    if args.boundaries:
        return boundaries_only(args)
    if not args.run:
        parser.error("a run directory or export is needed (or --boundaries)")

    from attnmt import Translator
    from attnmt.data.corpus import load_multi30k
    from attnmt.data.sentences import split_sentences
    from attnmt.decoding import coverage as cov
    from attnmt.evaluation import score_translations
    from attnmt.run_dir import RunDir

    engine = args.engine or RunDir(args.run).engine
    translator = Translator.load(args.run, engine=engine, device="cpu")
    src_lang, tgt_lang = translator.directions[0]
    lexicon = translator.pipeline.lexicon
    if args.recount:  # a run trained before its lexicon kept boundary counts: Multi30k train's, in memory only
        from attnmt.data.boundaries import BoundaryStats
        from attnmt.data.lexicon import Lexicon

        train = load_multi30k("train", src_lang, tgt_lang).src
        counts = BoundaryStats.from_sentences(train)
        translator.pipeline.lexicon = (Lexicon.from_sentences(s.split() for s in train) if lexicon is None
                                       else dataclasses.replace(lexicon, boundaries=counts))
    source = "Multi30k train (--recount)" if args.recount else "the run's lexicon.json"
    if translator.pipeline.lexicon is None or translator.pipeline.lexicon.boundaries is None:
        source = "none (a run trained before they were kept: --recount counts Multi30k train's)"
    print(f"boundary counts: {source}")
    corpus = load_multi30k(args.split, src_lang, tgt_lang)
    sources, refs = typed_captions(corpus.src, corpus.tgt, args.typed)
    groups = make_paragraphs(len(sources))
    paragraphs = [" ".join(sources[i] for i in g) for g in groups]
    ref_paragraphs = [" ".join(refs[i] for i in g) for g in groups]
    print(f"{args.split}: {len(sources)} captions, {len(paragraphs)} paragraphs of 3-5; engine {engine}, "
          f"beam {args.beam}")

    golds = [gold_boundaries(p, [sources[i] for i in g]) for p, g in zip(paragraphs, groups)]
    print_boundaries("boundaries, rules (split_sentences)",
                     boundary_scores(paragraphs, golds, lambda p: split_sentences(p, src_lang)))
    print_boundaries("boundaries, the model's splitter", boundary_scores(paragraphs, golds,
                                                                         lambda p: translator.sentences(p, src_lang)))

    timings, outputs = {}, {}
    start = time.perf_counter()
    alone = translator.translate(sources, beam_size=args.beam)
    timings["alone"] = time.perf_counter() - start
    outputs["alone"] = [" ".join(alone[i].text for i in g) for g in groups]
    start = time.perf_counter()
    split = translator.translate(paragraphs, beam_size=args.beam, split_sentences=True)
    timings["split"] = time.perf_counter() - start
    outputs["split"] = [r.text for r in split]
    start = time.perf_counter()
    unsplit = translator.translate(paragraphs, beam_size=args.beam)
    timings["unsplit"] = time.perf_counter() - start
    outputs["unsplit"] = [r.text for r in unsplit]
    if args.http:
        outputs["http /translate"], timings["http /translate"] = translate_http(args.run, args.engine, paragraphs,
                                                                                args.beam)
    for name, hyps in outputs.items():
        if args.typed != "as-written" and args.typed != "no-punct":
            hyps = [h.lower() for h in hyps]
        scores = score_translations(hyps, ref_paragraphs, tgt_lang=tgt_lang)
        ratio = re.search(r"ratio = ([0-9.]+)", scores["bleu_details"]).group(1)
        print(f"  {name:16} BLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}  length ratio {ratio}  "
              f"({timings[name]:.1f} s)")
    print(f"  {scores['signature']}")
    if "http /translate" in outputs:
        same = sum(a == b for a, b in zip(outputs["http /translate"], outputs["split"]))
        print(f"  /translate over HTTP equals Translator.translate(split_sentences=True) on {same}/{len(paragraphs)}")

    alone_signals = [figures(r) for r in alone]
    unsplit_signals = [figures(r) for r in unsplit]
    split_signals = [figures(r) for r in split]
    lost = [lost_a_sentence(out, [alone[i].text for i in g]) for out, g in zip(outputs["unsplit"], groups)]
    print(f"  unsplit paragraphs that lost a sentence (lexical judgement): {sum(lost)}/{len(lost)}")

    def rates(least, coverage, ratio):
        caught = sum(flag(s, least, coverage, ratio) for s, lo in zip(unsplit_signals, lost) if lo)
        alarms = sum(flag(s, least, coverage, ratio) for s in alone_signals)
        split_alarms = sum(flag(s, least, coverage, ratio) for s in split_signals)
        return caught / max(1, sum(lost)), alarms / len(alone_signals), split_alarms / len(split_signals)

    chosen = (cov.WORD_ATTENTION_MIN, cov.COVERAGE_MIN, cov.LENGTH_RATIO_MIN)
    caught, alarms, split_alarms = rates(*chosen)
    print(f"  thresholds (word {chosen[0]}, coverage {chosen[1]}, length ratio {chosen[2]}): lost paragraphs flagged "
          f"{100 * caught:.1f}%, single captions flagged {100 * alarms:.1f}%, split paragraphs flagged "
          f"{100 * split_alarms:.1f}%")
    flagged_results = sum(r.flagged for r in alone)
    assert flagged_results == round(alarms * len(alone)), "the library's flags differ from the thresholds applied here"
    if args.grid:
        print("  grid: word coverage ratio -> lost flagged, captions flagged, split flagged")
        rows = []
        for least in (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3):
            for coverage in (0.0, 0.3, 0.4, 0.5, 0.6, 0.7):
                for ratio in (0.0, 0.4, 0.5, 0.6, 0.7):
                    rows.append(((least, coverage, ratio), rates(least, coverage, ratio)))
        kept = [row for row in rows if row[1][1] <= 0.05]  # at most 5% of single captions flagged
        for (least, coverage, ratio), (c, a, s) in sorted(kept, key=lambda row: (-row[1][0], row[1][1]))[:15]:
            print(f"    {least:4} {coverage:4} {ratio:4} -> {100 * c:5.1f}% {100 * a:5.1f}% {100 * s:5.1f}%")
    if args.json:
        args.json.write_text(json.dumps({"alone": alone_signals, "unsplit": unsplit_signals, "lost": lost}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

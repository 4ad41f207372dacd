#!/usr/bin/env python3
"""How the CTranslate2 engine calls CTranslate2, A/B (issue 25, item 1): variants timed in
alternation within one run (round r runs every variant once, in an order rotated by r), so
that a shared machine's load falls on all of them alike. Reported: each variant's median
seconds, output tokens/s and its ratio to the first variant.

Variants (the engine through ``CTranslate2Engine.translate``, tokenization included):
    old          the engine of git ref --old-ref (default main): inter_threads=1, intra=threads,
                 64-sentence chunks split wherever the output budget changes
    new          this tree's engine, defaults (inter_threads=threads, intra_threads=1)
    new-intra    this tree's engine with inter_threads=1, intra_threads=threads
    new-nofix    new without the one-step greedy decode that repairs beam attention (beam > 1)
and, on CTranslate2 directly (translate_batch over the source tokens, all sentences in one call,
max_batch_size 64, the new engine's translator):
    ct2-all-hyps beam hypotheses + attention, length_penalty 0 (what the engine asks for)
    ct2-own-lp   1 hypothesis, no attention, CTranslate2's own length_penalty (= search.length_penalty)

    benchmarks/speed/ct2_calls_ab.py EXPORT_DIR [--beams 1 5] [--sentences 300] [--rounds 3] [--copies 1]
        [--variants old new new-intra] [--old-ref main]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

if __package__ in (None, ""):  # run as a file
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attnmt.data.corpus import corpus_spec, load_corpus
from attnmt.decoding.inputs import encode_sources
from attnmt.decoding.options import DecodingOptions
from attnmt.engines import ctranslate2 as new_module

VARIANTS = ("old", "new", "new-intra", "new-nofix", "ct2-all-hyps", "ct2-own-lp")


def old_module(ref: str):
    """The engine module as it is at git ref `ref`, imported under another name."""
    root = Path(new_module.__file__).resolve().parents[3]
    text = subprocess.run(["git", "-C", str(root), "show", f"{ref}:src/attnmt/engines/ctranslate2.py"],
                          capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="attnmt-old-ct2-")) / "old_ctranslate2.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_ctranslate2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_runner(variant: str, export: Path, beam: int, sentences: list[str], old_ref: str):
    """A function that translates `sentences` once and returns the number of output tokens."""
    threads = torch.get_num_threads()
    if variant == "old":
        engine, _ = old_module(old_ref).load_export(export)
    elif variant == "new-intra":
        engine, _ = new_module.load_export(export, inter_threads=1, intra_threads=threads)
    else:
        engine, _ = new_module.load_export(export)
    if variant == "new-nofix":
        engine._fix_first_attention = lambda *args, **kwargs: None
    if variant.startswith("ct2-"):
        cfg = engine.search_cfg
        _, src_ids = encode_sources(engine.pipeline, sentences, cfg)
        source = [engine._source_tokens(ids) for ids in src_ids if ids]
        budget = max(int(len(s) * cfg.max_len_ratio + cfg.max_len_offset) for s in source)
        if variant == "ct2-all-hyps":
            options = dict(num_hypotheses=beam, length_penalty=0.0, return_attention=True)
        else:
            options = dict(num_hypotheses=1, length_penalty=cfg.length_penalty if beam > 1 else 0.0,
                           return_attention=False)

        def run():
            found = engine.translator.translate_batch(source, max_batch_size=64, beam_size=beam,
                                                      max_decoding_length=budget, min_decoding_length=0,
                                                      max_input_length=0, return_scores=True, **options)
            return sum(len(r.hypotheses[0]) for r in found)
        return run

    def run():
        return sum(len(r.tokens) for r in engine.translate(sentences, DecodingOptions(beam_size=beam, batch_size=64)))
    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", type=Path)
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["old", "new", "new-intra"])
    parser.add_argument("--old-ref", default="main")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--copies", type=int, default=1, help="translate the sentences this many times over")
    args = parser.parse_args(argv)
    from attnmt.run_dir import RunDir

    cfg = RunDir(args.export).config()
    sentences = load_corpus(corpus_spec(cfg.data), args.split).src[:args.sentences] * args.copies
    print(f"# {' '.join(sys.argv)}\n# {len(sentences)} sentences, torch threads {torch.get_num_threads()}, "
          f"load {os.getloadavg()[0]:.2f} at start")
    for beam in args.beams:
        runners = {v: make_runner(v, args.export, beam, sentences, args.old_ref) for v in args.variants}
        for run in runners.values():
            run()  # warm-up
        seconds = {v: [] for v in args.variants}
        tokens = {}
        for r in range(args.rounds):
            order = args.variants[r % len(args.variants):] + args.variants[:r % len(args.variants)]
            for v in order:
                start = time.perf_counter()
                tokens[v] = runners[v]()
                seconds[v].append(time.perf_counter() - start)
        base = statistics.median(seconds[args.variants[0]])
        for v in args.variants:
            med = statistics.median(seconds[v])
            print(f"beam {beam}  {v:13s} median {med:7.3f} s  {tokens[v] / med:8.1f} tok/s  "
                  f"x{base / med:5.2f} vs {args.variants[0]}  runs {[round(s, 2) for s in seconds[v]]}")
    print(f"# load {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

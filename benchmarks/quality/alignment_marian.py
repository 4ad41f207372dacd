#!/usr/bin/env python3
"""Alignment accuracy of an imported Marian model's attention per decoder layer and head: a tiny
Marian (OPUS-MT layout: post-norm, swish, sources ending with </s>) trained with transformers on
the toy copy task (word i <-> word i), imported with `attnmt import`, then the share of output
words that `--alignments` links to their gold source word, for each layer / head view. Needs the
optional extra attnmt[hf] (transformers).

    benchmarks/quality/alignment_marian.py [--layers 3] [--heads 4] [--steps 300]
"""

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support import marian_toy, toy  # noqa: E402
from benchmarks.quality.alignment_toy import accuracy, gold  # noqa: E402
from attnmt.interop.marian import import_marian  # noqa: E402
from attnmt.translator import Translator  # noqa: E402


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    p = argparse.ArgumentParser(prog="alignment_marian", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--steps", type=int, default=200, help="Adam steps of 32 pairs")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="attnmt-alignment-marian-"))
    folder = marian_toy.write_marian(base / "marian", layers=args.layers, heads=args.heads, d_model=args.d_model, ff_dim=2 * args.d_model,
                                     std=0.1, train_steps=args.steps, seed=args.seed)
    translator = Translator.load(import_marian(folder, base / "run").path, device="cpu")
    sources = [s for s, _ in toy.copy_pairs(100, seed=1234)]
    views = {"mean": (None, None), **{f"L{l} mean": (l, None) for l in range(args.layers)},
             **{f"L{l} H{h}": (l, h) for l in range(args.layers) for h in range(args.heads)}}
    results = {name: translator.translate(sources, beam_size=1, layer=l, head=h, alignments=True)
               for name, (l, h) in views.items()}
    ref = results["mean"]
    for source, result in list(zip(sources, ref))[:3]:
        print(f"  {source} -> {result.text}", file=out)
    words = [sum(t.startswith("\u2581") for t in r.source_tokens[:-1]) for r in ref]  # </s> is no word
    out_words = [len(r.alignment) for r in ref]
    keep = [i for i in range(len(ref)) if words[i] == out_words[i]]  # gold is defined word for word
    golds = [gold("copy", words[i], out_words[i]) for i in keep]
    if not keep:
        print("no output has as many words as its source: the model did not learn the task", file=out)
        return 1
    print(f"copy task, {args.layers} layers x {args.heads} heads, {args.steps} steps: {len(keep)}/{len(ref)} "
          f"sentences with as many output words as source words, {sum(out_words[i] for i in keep)} words", file=out)
    for name, found in results.items():
        print(f"  {name:8s} gold {accuracy([found[i].alignment for i in keep], golds):.3f}", file=out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Alignment accuracy of attention per decoder layer and head on the toy tasks, whose gold word
alignment is known by construction (copy: word i <-> word i; reversal: word i <-> word n-1-i):
the share of output words linked to their gold source word, against the diagonal baseline, and the
agreement of each layer/head view with the default view (the mean over layers and heads).

    benchmarks/quality/alignment_toy.py [--epochs 10]   # trains two tiny Transformers (~1 min)
"""

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the toy tasks live in tests/support/toy.py

from support import toy  # noqa: E402
from attnmt.cli import main as attnmt  # noqa: E402
from attnmt.translator import Translator  # noqa: E402


def train(base: Path, task: str, epochs: int) -> Path:
    config = toy.write_config(base / f"{task}.yaml", task, "transformer", epochs=epochs, batch_size=32,
                              train=dict(log_every=100, eval_max_sentences=8))
    if attnmt(["train", str(config), "--run-dir", str(base / task)]) != 0:
        raise SystemExit(f"alignment_toy: training the {task} task failed")
    return base / task


def gold(task: str, n_src: int, n_tgt: int) -> list[tuple[int, int]]:
    if task == "copy":
        return [(j, j) for j in range(n_tgt)]
    return [(n_src - 1 - j, j) for j in range(n_tgt)]


def accuracy(links, reference) -> float:
    pairs = [(a, b) for x, y in zip(links, reference) for a, b in zip(x, y)]
    return sum(a == b for a, b in pairs) / len(pairs)


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    p = argparse.ArgumentParser(prog="alignment_toy", description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=10, help="training epochs per task")
    args = p.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="attnmt-alignment-"))
    for task in ("copy", "reversal"):
        run = train(base, task, args.epochs)
        translator = Translator.load(run, device="cpu")
        _, splits = toy.TASKS[task]
        sources = [s for s, _ in toy.TASKS[task][0](splits[2][1], splits[2][2])]
        layers, heads = translator.cfg.model.dec_layers, translator.cfg.model.heads
        views = {"mean": (None, None), **{f"L{l} mean": (l, None) for l in range(layers)},
                 **{f"L{l} H{h}": (l, h) for l in range(layers) for h in range(heads)}}
        results = {name: translator.translate(sources, beam_size=1, layer=l, head=h, alignments=True)
                   for name, (l, h) in views.items()}
        ref = results["mean"]
        golds = [gold(task, len(r.source_tokens), len(r.tokens)) for r in ref]
        # only sentences whose output has as many words as the source (gold is defined word for word)
        keep = [i for i, r in enumerate(ref) if len(r.tokens) == len(r.source_tokens)]
        diag = [[(min(j, len(ref[i].source_tokens) - 1), j) for j in range(len(ref[i].tokens))] for i in keep]
        print(f"\n{task}: {len(keep)}/{len(ref)} test sentences, {sum(len(ref[i].tokens) for i in keep)} words",
              file=out)
        print(f"  diagonal baseline: gold {accuracy(diag, [golds[i] for i in keep]):.3f}", file=out)
        for name, found in results.items():
            links = [found[i].alignment for i in keep]
            print(f"  {name:8s} gold {accuracy(links, [golds[i] for i in keep]):.3f}  "
                  f"agrees with mean {accuracy(links, [ref[i].alignment for i in keep]):.3f}  "
                  f"with diagonal {accuracy(links, diag):.3f}", file=out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

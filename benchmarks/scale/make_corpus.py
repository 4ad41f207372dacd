"""A deterministic synthetic parallel corpus of any size, for the scale benchmark (bench_scale.py).

    python benchmarks/scale/make_corpus.py OUT_DIR --pairs 1000000

writes OUT_DIR/train.de, train.en (and small valid.* and test.* from other seeds). Sentences are
4-30 words drawn from a 20,000-word vocabulary of made-up words with Zipfian frequencies (as
natural text has: sentencepiece and the vocabulary see a realistic long tail), and each target
is a word-for-word translation through a fixed dictionary with some neighbouring words swapped,
capitalised and ending in " .". The same --pairs and --seed give the same bytes, block by block
(a block of 100,000 pairs has its own generator), so a corpus is a function of its size.

Shapes: none.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

BLOCK = 100_000
VOCAB = 20_000
ZIPF = 1.1


def _words(seed: int, count: int) -> np.ndarray:
    """`count` distinct made-up words of 1-3 syllables."""
    rng = np.random.Generator(np.random.PCG64([seed, 17]))
    onsets = "b c d f g h k l m n p r s t v w z br kr st tr pl sch".split()
    vowels = "a e i o u au ei ie".split()
    codas = ["", "", "", "n", "r", "s", "t", "l", "ng"]
    found: dict[str, None] = {}
    while len(found) < count:
        syllables = rng.integers(1, 4)
        word = "".join(onsets[rng.integers(len(onsets))] + vowels[rng.integers(len(vowels))]
                       + codas[rng.integers(len(codas))] for _ in range(syllables))
        found.setdefault(word)
    return np.array(list(found), dtype=object)


class Language:
    """Two vocabularies in a fixed one-to-one dictionary, and Zipfian word frequencies."""

    def __init__(self, seed: int = 1):
        self.src, self.tgt = _words(seed, VOCAB), _words(seed + 1, VOCAB)
        weights = 1.0 / np.arange(1, VOCAB + 1) ** ZIPF
        self.cdf = np.cumsum(weights / weights.sum())

    def pairs(self, seed: int, block: int, count: int) -> tuple[list[str], list[str]]:
        """`count` pairs of block `block`, from their own generator."""
        rng = np.random.Generator(np.random.PCG64([seed, block]))
        lengths = np.minimum(4 + rng.poisson(8, count), 30)
        ids = np.minimum(np.searchsorted(self.cdf, rng.random(int(lengths.sum()))), VOCAB - 1)
        swaps = rng.random(int(lengths.sum())) < 0.15
        src_lines, tgt_lines, start = [], [], 0
        for length in lengths.tolist():
            words = ids[start:start + length]
            order = np.arange(length)
            for i in np.flatnonzero(swaps[start:start + length - 1]).tolist():  # swap some neighbours
                order[i], order[i + 1] = order[i + 1], order[i]
            start += length
            src_lines.append(" ".join(self.src[words]).capitalize() + " .")
            tgt_lines.append(" ".join(self.tgt[words[order]]).capitalize() + " .")
        return src_lines, tgt_lines


def write_corpus(folder: Path, pairs: int, *, seed: int = 1, held_out: int = 500) -> Path:
    """Write folder/{train,valid,test}.{de,en} (train: `pairs` pairs); returns the train prefix."""
    folder.mkdir(parents=True, exist_ok=True)
    language = Language()
    for split, count, split_seed in (("train", pairs, seed), ("valid", held_out, seed + 1000),
                                     ("test", held_out, seed + 2000)):
        with open(folder / f"{split}.de", "w", encoding="utf-8") as src, \
                open(folder / f"{split}.en", "w", encoding="utf-8") as tgt:
            for block, start in enumerate(range(0, count, BLOCK)):
                s, t = language.pairs(split_seed, block, min(BLOCK, count - start))
                src.write("\n".join(s) + "\n")
                tgt.write("\n".join(t) + "\n")
    return folder / "train"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--pairs", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    if args.pairs < 1:
        p.error("--pairs must be positive")
    print(write_corpus(args.out, args.pairs, seed=args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())

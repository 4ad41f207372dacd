"""The range of every bounded number that more than one surface takes, declared once.

A value past these would hang, overflow or allocate without bound; each is far above any
sensible setting. The config (`config.RANGES`), the CLI's argument types, decoding's argument
checks and the service (its settings and its request bodies) read their ranges here, and each
turns a failure into its own error kind and wording: a ConfigError naming the dotted key, an
argparse error naming the option, a ValueError naming the argument, an HTTP 422 naming the field.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """low..high, both included (low excluded when `low_open`: a positive float); `integer`: no fractions."""

    low: int | float
    high: int | float
    integer: bool = True
    low_open: bool = False

    def contains(self, value: object) -> bool:
        """Whether `value` is a number of this bound's kind inside it (False for NaN, inf and bools)."""
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if self.integer else numbers.Real):
            return False
        above_low = value > self.low if self.low_open else value >= self.low  # type: ignore[operator]
        return above_low and value <= self.high  # type: ignore[operator]  # NaN fails both

    def range_text(self) -> str:
        """"1..16", "0.01..100", "(0, 10080]"."""
        if self.low_open:
            return f"({self.low:g}, {self.high:g}]"
        return f"{self.low}..{self.high}" if self.integer else f"{self.low:g}..{self.high:g}"

    def check(self, name: str, value: object, *, error: type[Exception] = ValueError) -> None:
        """The rule of a library argument (decoding, the service's settings).

        Raises:
            error: "beam_size=17 must be in 1..16", or "... must be an integer" / "a number".
        """
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if self.integer else numbers.Real):
            raise error(f"{name}={value!r} must be {'an integer' if self.integer else 'a number'}")
        if not self.contains(value):
            raise error(f"{name}={value if self.integer else repr(value)} must be in {self.range_text()}")


def positive(high: float) -> Bound:
    """A float > 0, at most `high`."""
    return Bound(0.0, high, integer=False, low_open=True)


def non_negative(high: float) -> Bound:
    """A float >= 0, at most `high`."""
    return Bound(0.0, high, integer=False)


# ---- decoding: the config's search section, every decoding call, the CLI and the service
BEAM = Bound(1, 16)                           # beam_size and n_best (time and memory grow with the beam)
LENGTH_PENALTY = non_negative(10.0)           # GNMT alpha
SAMPLING_TEMPERATURE = Bound(0.01, 100.0, integer=False)  # 0.01: already as sharp as greedy (smaller ones overflow
                                              # logits / temperature); 100: already as flat as uniform
SAMPLING_TOPK = Bound(0, 2**20)               # more than any vocabulary (0 = all)
DECODING_SEED = Bound(0, 2**32 - 1)           # what both torch and CTranslate2 take
CONFIDENCE = Bound(0.0, 1.0, integer=False)     # min_confidence: a probability
CONSTRAINTS = Bound(0, 64)                    # terminology constraints of one sentence (search rows grow with them)

# ---- time and weights: the config, the CLI
MINUTES = positive(1e6)                       # train.max_minutes, distill --max-minutes (~2 years)
WEIGHT = non_negative(1000.0)                 # examples per epoch over pairs: data.train[i].weight (> 0 there),
                                              # distill --original-weight (0: the original targets left out)

# ---- processes and threads: the config, the CLI
THREADS = Bound(1, 1024)                      # train.num_threads, translate/score --threads
PREPARE_WORKERS = Bound(1, 1024)              # data.workers, prepare --workers
DECODING_WORKERS = Bound(1, 64)               # translate/evaluate --workers: each holds a copy of the model

# ---- sizes: the config, the CLI
VOCAB = Bound(1, 1_000_000)                   # data.spm_vocab_size, data.max_vocab, data stats --vocab-size
SHARD_LINES = Bound(1, 1_000_000)             # translate/score --shard-lines: a shard's outputs are held in memory

# ---- text files the CLI reads line by line (translate/score -i and -r, stdin, compare --hyp/--ref, --glossary,
# the sharded path's planning): a longer line is refused naming file:line, read in pieces of at most this size
LINE_BYTES = 1 << 20                          # 1 MiB, as one whole request to the service (MAX_BODY_BYTES)
CORPUS_LINE_BYTES = 64 << 20                  # a training corpus's line: long pairs are dropped and counted by
                                              # data.max_len; one past this is no text file (/dev/zero)

# ---- the service: its settings (`attnmt serve` flags) and request bodies
PORT = Bound(0, 65535)
WAIT_MS = non_negative(60_000.0)              # --max-wait-ms: longer, a lone request waits as if the server hung
MAX_BODY_BYTES = 1 << 20                      # requests over 1 MiB get 413
FILE_KB = Bound(1, 1000)                      # --file-limit-kb: a file and its form fit in one body
FILES = Bound(1, 100_000)                     # --max-files
SENTENCES = Bound(1, 100_000)                 # --max-sentences
EXPIRE_MINUTES = positive(7 * 24 * 60.0)      # --files-expire-minutes: a week

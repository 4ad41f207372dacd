"""Each epoch's batches from prepared data: shuffled, sorted by length in windows, cut into
batches, grouped into updates and shared among the ranks; a resumed run starts at its update.

Shapes:
    batch    sentences in a batch
    src_len, tgt_len   as in batching.py

An epoch, from `Batching.seed` and the epoch number alone (numpy's PCG64), the same on every rank:
    examples  each corpus's pairs `weight` times (data.train's weights; a fractional part takes a
              random share of the corpus, another one each epoch), in a random order
    windows   consecutive runs of `window` examples, each sorted by (source length, target
              length), the random order breaking ties, and cut into batches of similar lengths:
              `batch_size` sentences, or as many as fit `batch_size` padded tokens
              (rows x max(src_len, tgt_len + 1), an example longer than that alone); each
              window's batches in a random order
    updates   `world_size x accum_steps` consecutive batches each, shared by `shard_update`
              (token-balanced, disjoint); batches at the epoch's end that do not fill an update
              wait for another epoch
Only the lengths are read to plan an epoch (4 bytes a pair for its order, one window's sort at a
time); the ids of a batch are read when it is built, and a rank builds only its own batches.
With a window at least the corpus's size, an epoch is one global length sort (fairseq's
batches); smaller windows bound the sort's memory and mix lengths across the epoch less.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import torch

from attnmt.data.batching import Batch, collate
from attnmt.data.prepared import PreparedData

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batching:
    """How epochs are cut into batches and updates (train.batch_size, batch_by, length_window,
    seed; the number of ranks and train.accum_steps), and the pipeline's special ids."""

    batch_size: int
    batch_by: str = "sentences"
    window: int = 1_000_000
    seed: int = 1
    world_size: int = 1
    accum_steps: int = 1
    pad_id: int = 0
    bos_id: int = 2
    eos_id: int = 3
    src_extra: int = 0      # tokens a batch adds to each source (a language token, an eos), for the budget
    tgt_extra: int = 0      # tokens it adds first in each target
    src_eos: bool = False   # end each source with eos_id (an imported Marian model's convention)

    @property
    def group(self) -> int:
        """Batches per update, over all ranks."""
        return self.world_size * self.accum_steps


@dataclass
class Update:
    batches: list[Batch]   # this rank's share
    global_tokens: int     # target tokens of the update on all ranks


def epoch_rng(seed: int, epoch: int, stream: int = 0) -> np.random.Generator:
    """The generator of one epoch's order (stream 0) or of its window `stream - 1`."""
    return np.random.Generator(np.random.PCG64([seed, epoch, stream, 0xA77]))


def epoch_examples(corpus_of: np.ndarray, weights: Sequence[float], rng: np.random.Generator) -> np.ndarray:
    """The examples (pair indices) of one epoch in a random order: each corpus `weight` times.

    Args:
        corpus_of: (pairs,) the corpus of every pair.
        weights: one per corpus.
    """
    n = len(corpus_of)
    if all(w == 1 for w in weights):
        order = np.arange(n, dtype=np.uint32 if n < 1 << 32 else np.int64)
    else:
        chosen = []
        for corpus, weight in enumerate(weights):
            members = np.flatnonzero(corpus_of == corpus)
            whole, part = divmod(weight, 1.0)
            chosen += [members] * int(whole)
            if part > 0 and len(members):
                chosen.append(rng.choice(members, size=int(round(part * len(members))), replace=False))
        order = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    rng.shuffle(order)
    return order


def cut_window(examples: np.ndarray, src_lengths: np.ndarray, tgt_lengths: np.ndarray, batching: Batching,
               rng: np.random.Generator) -> list[np.ndarray]:
    """One window's batches: its examples sorted by (source, target) length (ties in the given
    order), cut into batches, in a random order."""
    src, tgt = src_lengths[examples].astype(np.int64), tgt_lengths[examples].astype(np.int64)
    order = np.argsort(src << 16 | tgt, kind="stable")
    examples, src, tgt = examples[order], src[order], tgt[order]
    if batching.batch_by == "sentences":
        cuts = list(range(batching.batch_size, len(examples), batching.batch_size))
    else:
        cuts = _token_cuts(np.maximum(src + batching.src_extra, tgt + batching.tgt_extra + 1).tolist(),
                           batching.batch_size)
    batches = np.split(examples, cuts)
    return [batches[i] for i in rng.permutation(len(batches))]


def _token_cuts(sizes: list[int], budget: int) -> list[int]:
    """Where to cut length-sorted examples so that rows x the longest size stays within `budget`
    (an example larger than the budget forms a batch alone)."""
    cuts, rows, longest, oversized = [], 0, 0, 0
    for i, size in enumerate(sizes):
        if rows and (rows + 1) * max(longest, size) > budget:
            cuts.append(i)
            rows, longest = 0, 0
        rows += 1
        longest = max(longest, size)
        oversized += size > budget
    if oversized:
        log.warning("%d example(s) are longer than batch_size=%d tokens and form batches of their own",
                    oversized, budget)
    return cuts


def shard_update(tokens: Sequence[int], world_size: int) -> list[list[int]]:
    """Share one update's batches (their target tokens) among the ranks: the batch positions
    each rank takes, equal counts, balanced tokens.

    Largest batch first, each to the rank with the fewest tokens so far among those that still
    take batches (ties: the lower rank); the same on every rank, so the shares are disjoint and
    cover the update. Every rank takes len(tokens) // world_size batches, so each one runs the
    same number of backward passes (DDP all-reduces in the last one).

    Raises:
        ValueError: a number of batches that the ranks cannot share equally.
    """
    if world_size < 1 or len(tokens) % world_size or not tokens:
        raise ValueError(f"{len(tokens)} batches cannot be shared equally by {world_size} ranks")
    per_rank = len(tokens) // world_size
    shares: list[list[int]] = [[] for _ in range(world_size)]
    load = [0] * world_size
    for i in sorted(range(len(tokens)), key=lambda i: (-tokens[i], i)):
        rank = min((r for r in range(world_size) if len(shares[r]) < per_rank), key=lambda r: (load[r], r))
        shares[rank].append(i)
        load[rank] += tokens[i]
    return [sorted(share) for share in shares]


class Epoch:
    """The batches and updates of one epoch of `data` (see the module docstring)."""

    def __init__(self, data: PreparedData, weights: Sequence[float], batching: Batching, epoch: int,
                 prefixes: Sequence[tuple[list[int], list[int]]] | None = None, augment: Callable | None = None):
        """`prefixes`: per corpus, the ids put before its sources and first in its targets (a
        multilingual model's language token); none by default. `augment`: the noise of each
        example as its batch is built (augment.Augmenter: (index, epoch, src, tgt) -> (src, tgt))."""
        self.data, self.batching, self.epoch = data, batching, epoch
        self.augment = augment
        self.prefixes = [(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)) for a, b in prefixes or ()]
        self.examples = epoch_examples(data.corpus_of, weights, epoch_rng(batching.seed, epoch))
        if len(self.examples) == 0:
            raise ValueError("an epoch with no examples (every corpus weight leaves nothing)")
        self.windows = max(1, -(-len(self.examples) // batching.window))
        self._first = self._window(0)  # planned at once: when it is the only window, the epoch's size is known

    def __len__(self) -> int:
        """Examples in the epoch."""
        return len(self.examples)

    @property
    def total_batches(self) -> int | None:
        """Batches in the epoch when the epoch is one window (known without planning more); else None."""
        return len(self._first) if self.windows == 1 else None

    @property
    def total_updates(self) -> int | None:
        """Updates in the epoch, when `total_batches` is known; else None."""
        return None if self.total_batches is None else self.total_batches // self.batching.group

    def _window(self, w: int) -> list[np.ndarray]:
        window = self.batching.window
        members = self.examples[w * window:(w + 1) * window]
        self.data.check_unchanged()
        return cut_window(members, self.data.src_lengths, self.data.tgt_lengths, self.batching,
                          epoch_rng(self.batching.seed, self.epoch, w + 1))

    def batches(self) -> Iterator[np.ndarray]:
        """Every batch of the epoch (the examples of each), in order."""
        yield from self._first
        for w in range(1, self.windows):
            yield from self._window(w)

    def tokens(self, examples: np.ndarray) -> int:
        """Target tokens of a batch of these examples, <eos> (and any first target ids) included."""
        return int(self.data.tgt_lengths[examples].astype(np.int64).sum()) + len(examples) * (1 + self.batching.tgt_extra)

    def updates(self, rank: int = 0, start: int = 0) -> Iterator[Update]:
        """The epoch's updates from update `start` on (the ones before are skipped without
        reading any ids), each with `rank`'s share of batches, built."""
        b, group, done = self.batching, self.batching.group, 0
        pending: list[np.ndarray] = []
        for batch in self.batches():
            pending.append(batch)
            if len(pending) < group:
                continue
            members, pending = pending, []
            done += 1
            if done <= start:
                continue
            self.data.check_unchanged()
            tokens = [self.tokens(m) for m in members]
            mine = [members[i] for i in shard_update(tokens, b.world_size)[rank]] if b.world_size > 1 else members
            yield Update([self.build(m) for m in mine], sum(tokens))

    def build(self, examples: np.ndarray) -> Batch:
        """The padded Batch of these examples (read from the memory maps)."""
        b = self.batching
        src, tgt = self.data.ids("src", examples), self.data.ids("tgt", examples)
        if self.augment is not None:  # from (seed, epoch, example) alone: the same on every rank and resume
            pairs = [self.augment(int(i), self.epoch, s, t) for i, s, t in zip(examples.tolist(), src, tgt)]
            src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
        if self.prefixes:
            corpus = self.data.corpus_of[examples].tolist()
            src = [np.concatenate([self.prefixes[c][0], ids]) for c, ids in zip(corpus, src)]
            tgt = [np.concatenate([self.prefixes[c][1], ids]) for c, ids in zip(corpus, tgt)]
        if b.src_eos:
            src = [np.append(ids, b.eos_id).astype(ids.dtype) for ids in src]
        return collate(list(zip(src, tgt)), torch.from_numpy(examples.astype(np.int64)), pad_id=b.pad_id,
                       bos_id=b.bos_id, eos_id=b.eos_id)

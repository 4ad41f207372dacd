"""Sentence-level co-occurrence of source and target ids, and the Dice coefficient over it: what the
vocabulary map (engines/vocab_map.py) lists and what the short fragments of training
(data/fragments.py) align with.

    counts = count_cooccurrence(pairs, src_size, tgt_size)    # pairs: (src_ids, tgt_ids) sequences

Shapes: (pairs,) arrays over the co-occurring (source id, target id) pairs; (vocab,) per id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

CHUNK = 20_000  # pairs counted before their keys are merged


@dataclass
class Cooccurrence:
    """Sentence-level counts over (source id, target id) pairs.

    Attributes:
        src, tgt: (pairs,) the ids of each co-occurring pair, and `both`: (pairs,) in how many sentences.
        src_sentences: (src_vocab,) sentences holding each source id; tgt_sentences likewise.
        tgt_tokens: (tgt_vocab,) occurrences of each target id (the `frequent` ranking).
    """

    src: np.ndarray
    tgt: np.ndarray
    both: np.ndarray
    src_sentences: np.ndarray
    tgt_sentences: np.ndarray
    tgt_tokens: np.ndarray


def count_cooccurrence(pairs: Iterable[tuple[np.ndarray, np.ndarray]], src_size: int, tgt_size: int) -> Cooccurrence:
    """Count each (source id, target id) once per pair of id sequences that holds both."""
    keys, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    src_sentences, tgt_sentences = np.zeros(src_size, np.int64), np.zeros(tgt_size, np.int64)
    tgt_tokens = np.zeros(tgt_size, np.int64)
    pending: list[np.ndarray] = []

    def merge(keys, counts, pending):
        new = np.concatenate([keys, *pending])
        weights = np.concatenate([counts, np.ones(sum(len(p) for p in pending), np.int64)])
        unique, inverse = np.unique(new, return_inverse=True)
        return unique, np.bincount(inverse, weights=weights, minlength=len(unique)).astype(np.int64)

    for number, (src_ids, tgt_ids) in enumerate(pairs, 1):
        src_ids, tgt_ids = np.asarray(src_ids, np.int64), np.asarray(tgt_ids, np.int64)
        src_set, tgt_set = np.unique(src_ids), np.unique(tgt_ids)
        src_sentences[src_set] += 1
        tgt_sentences[tgt_set] += 1
        np.add.at(tgt_tokens, tgt_ids, 1)
        pending.append((src_set[:, None] * tgt_size + tgt_set[None, :]).ravel())
        if number % CHUNK == 0:
            keys, counts = merge(keys, counts, pending)
            pending = []
    if pending:
        keys, counts = merge(keys, counts, pending)
    return Cooccurrence(keys // tgt_size, keys % tgt_size, counts, src_sentences, tgt_sentences, tgt_tokens)


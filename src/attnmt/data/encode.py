"""What one preparation worker does to a chunk of lines: decode, filter, tokenize, number; and
the pool of worker processes that does it to a stream of chunks (`encoders`).

A chunk (`corpus.RawChunk`) is raw bytes; `ChunkEncoder.encode` decodes and checks every line
(file:line in the message), drops the pairs a filter refuses (counting each under the first
filter that refuses it) and returns the kept pairs as flat arrays of token ids in the
tokenizer's own numbering: sentencepiece piece ids, or for Moses ids given to the chunk's tokens
in order of first sight (with the list of those tokens, which the preparing process numbers
globally). `encoders` runs it in worker processes, or in the preparing process with one worker;
both give the same arrays. The workers end with the preparing process, however it ends
(`die_with_parent`), and hold none of its locks (files.writer_lock closes them at the fork).

The filters, in the order they are tried (`FILTERS`):
    empty       a side is empty (or only white space)
    identical   source and target are the same text (data.drop_identical)
    too_long    a side has more than data.max_len tokens (or more than MAX_CHARS_PER_TOKEN x max_len
                characters: such a line is not tokenized at all)
    too_short   a side has fewer than data.min_len tokens
    ratio       the longer side has more than data.max_len_ratio times the tokens of the shorter
Exact duplicates (data.dedup) need the whole corpus: the worker gives each kept pair a 64-bit
digest of its text, and `staging.dedup` keeps the first pair of each digest.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import signal
import sys
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from attnmt.data.corpus import RawChunk
from attnmt.data.tokenizers import SentencePieceTokenizer, Tokenizer, tokenizer_from_dict
from attnmt.errors import AttnmtError

MAX_CHARS_PER_TOKEN = 20  # a line longer than this x max_len characters cannot pass max_len tokens
FILTERS = ("empty", "identical", "too_long", "too_short", "ratio", "duplicate")


@dataclass(frozen=True)
class Filters:
    """The pair filters of `data.*` (see the module docstring)."""

    max_len: int = 100
    min_len: int = 1
    max_len_ratio: float | None = None
    drop_identical: bool = False
    dedup: bool = False

    @classmethod
    def of(cls, data_cfg: Any) -> Filters:
        return cls(max_len=data_cfg.max_len, min_len=data_cfg.min_len, max_len_ratio=data_cfg.max_len_ratio,
                   drop_identical=data_cfg.drop_identical, dedup=data_cfg.dedup)

    def refuses(self, src_len: int, tgt_len: int) -> str | None:
        """The filter that refuses a pair of these token counts, or None."""
        if src_len > self.max_len or tgt_len > self.max_len:
            return "too_long"
        if src_len < self.min_len or tgt_len < self.min_len:
            return "too_short"
        if self.max_len_ratio is not None and max(src_len, tgt_len) > self.max_len_ratio * min(src_len, tgt_len):
            return "ratio"
        return None


@dataclass
class EncodedChunk:
    """The kept pairs of one chunk, in input order.

    Attributes:
        corpus: index of the corpus (in `data.train`'s order).
        src_ids, tgt_ids: (tokens,) uint32, every kept pair's ids one after the other.
        src_lens, tgt_lens: (pairs,) uint32.
        lines: (pairs,) uint64, each pair's line number in its files (1-based).
        digests: (pairs,) uint64 digests of the pairs' text (data.dedup), else None.
        src_types, tgt_types: Moses: the chunk's tokens, id i is `types[i]`; sentencepiece: None.
        read: pairs read; dropped: filter -> pairs it refused.
    """

    corpus: int
    src_ids: np.ndarray
    src_lens: np.ndarray
    tgt_ids: np.ndarray
    tgt_lens: np.ndarray
    lines: np.ndarray
    digests: np.ndarray | None
    src_types: list[str] | None
    tgt_types: list[str] | None
    read: int
    dropped: dict[str, int] = field(default_factory=dict)


def pair_digest(src: str, tgt: str) -> int:
    """A 64-bit digest of a pair's text, the same in every process (unlike `hash`)."""
    digest = hashlib.blake2b(src.encode("utf-8") + b"\t" + tgt.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _numbered(tokenizer: Tokenizer, texts: list[str]) -> tuple[list[list[int]], list[str] | None]:
    """Token ids of `texts` in the tokenizer's numbering: sentencepiece piece ids (no type list),
    or ids given to tokens in order of first sight, with those tokens."""
    if isinstance(tokenizer, SentencePieceTokenizer):
        return tokenizer.piece_ids(texts), None
    types: dict[str, int] = {}
    ids = [[types.setdefault(token, len(types)) for token in tokenizer.tokenize(text)] for text in texts]
    return ids, list(types)


def _flat(id_lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lens = np.fromiter(map(len, id_lists), dtype=np.uint32, count=len(id_lists))
    return np.fromiter(chain.from_iterable(id_lists), dtype=np.uint32, count=int(lens.sum())), lens


class ChunkEncoder:
    """Decodes, filters and numbers chunks with the tokenizers of `settings` (their `to_dict()`,
    sentencepiece model files under `base_dir`)."""

    def __init__(self, src_tokenizer: dict, tgt_tokenizer: dict, base_dir: str | Path, filters: Filters):
        self.src_tokenizer = tokenizer_from_dict(src_tokenizer, base_dir, source="source tokenizer")
        self.tgt_tokenizer = tokenizer_from_dict(tgt_tokenizer, base_dir, source="target tokenizer")
        self.filters = filters

    def encode(self, chunk: RawChunk, corpus: int) -> EncodedChunk:
        """The kept pairs of `chunk` (see `EncodedChunk`).

        Raises:
            DataError: a line with bad bytes, or a TSV line without 2 columns (file:line).
        """
        f = self.filters
        limit = MAX_CHARS_PER_TOKEN * f.max_len
        dropped = dict.fromkeys(FILTERS, 0)
        lines, srcs, tgts = [], [], []
        for number, src, tgt in chunk.pairs():
            if not src or not tgt:
                dropped["empty"] += 1
            elif f.drop_identical and src == tgt:
                dropped["identical"] += 1
            elif len(src) > limit or len(tgt) > limit:
                dropped["too_long"] += 1
            else:
                lines.append(number)
                srcs.append(src)
                tgts.append(tgt)
        src_ids, src_types = _numbered(self.src_tokenizer, srcs)
        tgt_ids, tgt_types = _numbered(self.tgt_tokenizer, tgts)
        keep = []
        for i, (s, t) in enumerate(zip(src_ids, tgt_ids)):
            refused = f.refuses(len(s), len(t))
            if refused:
                dropped[refused] += 1
            else:
                keep.append(i)
        if len(keep) < len(srcs):
            src_ids, tgt_ids = [src_ids[i] for i in keep], [tgt_ids[i] for i in keep]
        src_flat, src_lens = _flat(src_ids)
        tgt_flat, tgt_lens = _flat(tgt_ids)
        digests = None
        if f.dedup:
            digests = np.fromiter((pair_digest(srcs[i], tgts[i]) for i in keep), dtype=np.uint64, count=len(keep))
        return EncodedChunk(corpus, src_flat, src_lens, tgt_flat, tgt_lens,
                            np.fromiter((lines[i] for i in keep), dtype=np.uint64, count=len(keep)), digests,
                            src_types, tgt_types, read=len(chunk), dropped={k: v for k, v in dropped.items() if v})


# ---- in a worker process (`encoders` starts them with start_worker and sends chunks to work)

_ENCODER: ChunkEncoder | None = None
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """End this worker when `parent` (the preparing process) ends, however it ends (SIGKILL too):
    the kernel's parent-death signal on Linux (prctl(PR_SET_PDEATHSIG, SIGKILL)), then a check
    that the parent did not end before it was set. Elsewhere the pool's pipes end the workers."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def start_worker(parent: int, src_tokenizer: dict, tgt_tokenizer: dict, base_dir: str, filters: Filters) -> None:
    global _ENCODER
    die_with_parent(parent)
    _ENCODER = ChunkEncoder(src_tokenizer, tgt_tokenizer, base_dir, filters)


def work(chunk: RawChunk, corpus: int) -> EncodedChunk:
    assert _ENCODER is not None, "start_worker runs first"
    return _ENCODER.encode(chunk, corpus)


# ---- the pool, in the preparing process


@contextmanager
def encoders(args: tuple, workers: int) -> Iterator[Callable[[Iterator], Iterator[EncodedChunk]]]:
    """A function from (corpus, chunk) jobs to their EncodedChunks in order: in this process with
    one worker or one chunk, else in `workers` processes (`_worker_context`), at most 2 chunks each
    in flight (a worker's result does not depend on where it runs). `args`: ChunkEncoder's."""
    local = ChunkEncoder(*args)
    pools: list[ProcessPoolExecutor] = []

    def run(jobs: Iterator) -> Iterator[EncodedChunk]:
        jobs = iter(jobs)
        first = next(jobs, None)
        second = next(jobs, None) if workers > 1 else None
        if second is None:  # one chunk (or one worker): no processes to start
            yield from (local.encode(chunk, corpus) for corpus, chunk in filter(None, (first,)))
            yield from (local.encode(chunk, corpus) for corpus, chunk in jobs)
            return
        pools.append(ProcessPoolExecutor(workers, mp_context=_worker_context(), initializer=start_worker,
                                         initargs=(os.getpid(), *args)))
        pending: deque = deque()
        for corpus, chunk in chain([first, second], jobs):
            pending.append(pools[0].submit(work, chunk, corpus))
            if len(pending) >= 2 * workers:
                yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())

    try:
        yield run
    finally:
        for pool in pools:
            pool.shutdown(wait=True, cancel_futures=True)


def _worker_context():
    """Forked workers on Linux (as torch's DataLoader's): no re-import of the caller's __main__ (a
    script without an `if __name__ == "__main__"` guard would run again in each spawned worker, and
    block on this preparation's lock), and no second start-up; the workers touch no torch or thread
    state. Spawned ones where fork is not the platform's way (macOS, Windows)."""
    return get_context("fork" if sys.platform.startswith("linux") else "spawn")


def _result(future) -> EncodedChunk:
    try:
        return future.result()
    except BrokenProcessPool:
        raise AttnmtError("a preparation worker process died (out of memory? killed?); nothing was written to "
                          "the cache: run again, perhaps with fewer data.workers") from None

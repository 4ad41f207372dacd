"""Micro-batching: sentences of concurrent requests go through the model together.

    batcher = MicroBatcher(translator.translate, max_wait_ms=5, max_batch_sentences=32)
    await batcher.start()
    results = await batcher.translate(["Ein Hund ."], DecodingOptions(beam_size=5))
    await batcher.close()

A request's sentences wait as one job. A batch holds sentences of equal decoding options (a
frozen DecodingOptions, decoding/options.py) and of one kind (plain, or with target prefixes or
constraints per sentence), at most `max_batch_sentences`, taken from the waiting jobs in turn
(round robin, one sentence of each job at a time): a request of a thousand sentences is a
series of batches, and a one-sentence request that arrives meanwhile goes into the next one
instead of waiting for the thousand (issue 66 group A). The job served longest ago chooses the
next batch's options, so no setting waits for another's long request either. The first sentence
of a batch waits up to `max_wait_ms` for company. A job whose request has gone (its future
cancelled: the client left, server/limits.py) is dropped before its next sentence is taken.

The model runs in one worker thread, off the event loop, so the server answers other requests
(e.g. /health) while a batch runs, and the model's state (a Transformer's attention view) is
only touched by that one thread.

A batch that raises is retried one request at a time, so that a fault caused by one request
fails only that request; each failing request gets the exception.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence

from attnmt.decoding.options import DecodingOptions

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Job:
    """One request: its sentences, and their results as batches finish."""

    future: asyncio.Future
    options: DecodingOptions
    texts: list[str]
    prefixes: list | None          # per sentence, or None
    constraints: list | None       # per sentence, or None
    arrived: float
    results: list = field(default_factory=list)
    taken: int = 0                 # sentences handed to batches so far
    remaining: int = 0             # sentences without a result yet

    @property
    def key(self) -> tuple[DecodingOptions, bool]:
        """What a batch must share: the options, and whether per-sentence data travels."""
        return self.options, self.prefixes is None and self.constraints is None

    @property
    def waiting(self) -> int:
        return len(self.texts) - self.taken


@dataclass
class BatcherStats:
    batches: int = 0          # model calls made
    sentences: int = 0        # sentences translated
    largest_batch: int = 0    # most sentences in one model call
    running: int = 0          # sentences in the model now
    failed_batches: int = 0   # model calls that raised


class MicroBatcher:
    """Collects sentences of concurrent requests into batches for `translate_fn`.

    Args:
        translate_fn: called as translate_fn(texts, options) in the worker thread (Translator.translate),
            with target_prefix= and constraints= (one entry per text) for sentences that carry them;
            returns one result per text, in order.
        max_wait_ms: how long the oldest waiting sentence waits for others to join its batch.
        max_batch_sentences: the most sentences in one call of translate_fn.
    """

    def __init__(self, translate_fn: Callable, *, max_wait_ms: float, max_batch_sentences: int):
        if max_wait_ms < 0 or max_batch_sentences < 1:
            raise ValueError(f"max_wait_ms={max_wait_ms} must be >= 0 and "
                             f"max_batch_sentences={max_batch_sentences} >= 1")
        self.translate_fn = translate_fn
        self.max_wait = max_wait_ms / 1000.0
        self.max_batch = max_batch_sentences
        self.stats = BatcherStats()
        self._jobs: deque[_Job] = deque()  # jobs with sentences waiting, the one served longest ago first
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnmt-model")

    @property
    def queued(self) -> int:
        """Sentences waiting for a batch."""
        return sum(job.waiting for job in self._jobs if not job.future.done())

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="attnmt-batcher")

    async def close(self) -> None:
        """Stop after the batches in hand; requests still waiting get a RuntimeError."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        while self._jobs:
            _fail(self._jobs.popleft(), RuntimeError("the server is shutting down"))
        self._executor.shutdown(wait=True)

    async def run_in_worker(self, fn: Callable, *args):
        """Run fn(*args) in the model's worker thread (for work that touches the model)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def translate(self, texts: Sequence[str], options: DecodingOptions, *,
                        target_prefix: Sequence[str | None] | None = None,
                        constraints: Sequence | None = None) -> list:
        """Translate texts as `options` say (with each text's prefix and constraints, when given),
        sharing model calls with concurrent requests; cancelling the call drops what is left."""
        if self._task is None or self._task.done():
            raise RuntimeError("the batcher is not running")
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        job = _Job(loop.create_future(), options, list(texts),
                   None if target_prefix is None else list(target_prefix),
                   None if constraints is None else list(constraints), loop.time())
        job.results, job.remaining = [None] * len(job.texts), len(job.texts)
        self._jobs.append(job)
        self._wake.set()
        return await job.future

    def _count_like(self, key) -> int:
        return sum(job.waiting for job in self._jobs if job.key == key and not job.future.done())

    def _take_batch(self, key) -> list[tuple[_Job, int]]:
        """Up to max_batch waiting sentences of `key`, one of each such job in turn (the jobs in
        service order); the jobs served move to the back, those with nothing left leave."""
        live = [job for job in self._jobs if not job.future.done()]  # cancelled (client gone) or failed: dropped
        served = [job for job in live if job.key == key]
        batch: list[tuple[_Job, int]] = []
        turn = list(served)
        while turn and len(batch) < self.max_batch:
            still = []
            for job in turn:
                if len(batch) >= self.max_batch:
                    still.append(job)
                    continue
                batch.append((job, job.taken))
                job.taken += 1
                if job.waiting:
                    still.append(job)
            turn = still
        got = {id(job) for job, _ in batch}  # to the back, in turn; the others keep their places
        self._jobs = deque([job for job in live if id(job) not in got] +
                           [job for job in served if id(job) in got and job.waiting])
        return batch

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while self._jobs and self._jobs[0].future.done():
                self._jobs.popleft()
            if not self._jobs:
                self._wake.clear()
                await self._wake.wait()
                continue
            first = self._jobs[0]
            deadline = first.arrived + self.max_wait
            while self._count_like(first.key) < self.max_batch and loop.time() < deadline:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), deadline - loop.time())
                except asyncio.TimeoutError:
                    break
            batch = self._take_batch(first.key)
            if batch:
                await self._run(batch, first.options)

    def _call(self, items: list[tuple[_Job, int]], options: DecodingOptions) -> list:
        texts = [job.texts[i] for job, i in items]
        extra = {}
        if any(job.prefixes is not None for job, _ in items):
            extra["target_prefix"] = [job.prefixes[i] if job.prefixes is not None else None for job, i in items]
        if any(job.constraints is not None for job, _ in items):
            extra["constraints"] = [job.constraints[i] if job.constraints is not None else None for job, i in items]
        results = self.translate_fn(texts, options, **extra)
        if len(results) != len(texts):
            raise RuntimeError(f"the model returned {len(results)} results for {len(texts)} texts")
        return results

    async def _run(self, batch: list[tuple[_Job, int]], options: DecodingOptions) -> None:
        self.stats.running = len(batch)
        try:
            try:
                results = await self.run_in_worker(self._call, batch, options)
            except Exception as err:  # a model fault: find the request(s) that cause it
                self.stats.failed_batches += 1
                log.exception("a batch of %d sentences failed", len(batch))
                jobs = list({id(job): job for job, _ in batch}.values())
                if len(jobs) == 1:
                    _fail(jobs[0], err)
                    return
                for job in jobs:
                    items = [item for item in batch if item[0] is job]
                    try:
                        found = await self.run_in_worker(self._call, items, options)
                    except Exception as job_err:
                        _fail(job, job_err)
                    else:
                        self._deliver(items, found)
                return
            self.stats.batches += 1
            self.stats.sentences += len(batch)
            self.stats.largest_batch = max(self.stats.largest_batch, len(batch))
            self._deliver(batch, results)
        finally:
            self.stats.running = 0

    @staticmethod
    def _deliver(items: list[tuple[_Job, int]], results: list) -> None:
        for (job, index), result in zip(items, results):
            if job.future.done():
                continue
            job.results[index] = result
            job.remaining -= 1
            if job.remaining == 0:
                job.future.set_result(job.results)


def _fail(job: _Job, err: Exception) -> None:
    if not job.future.done():
        job.future.set_exception(err)

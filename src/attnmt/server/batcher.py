"""Micro-batching: sentences of concurrent requests go through the model together.

    batcher = MicroBatcher(translator.translate, max_wait_ms=5, max_batch_sentences=32)
    await batcher.start()
    results = await batcher.translate(["Ein Hund ."], DecodingOptions(beam_size=5))
    await batcher.close()

The first sentence waiting opens a batch; sentences with equal decoding options (a frozen
DecodingOptions, decoding/options.py) that arrive within `max_wait_ms` of it join, up to
`max_batch_sentences`. Sentences with other options wait
for a later batch (they never share one). The model runs in one worker thread, off the event
loop, so the server answers other requests (e.g. /health) while a batch runs, and the
model's state (a Transformer's attention view) is only touched by that one thread.

A batch that raises is retried one request at a time, so that a fault caused by one request
fails only that request; each failing request gets the exception.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence

from attnmt.decoding.options import DecodingOptions

log = logging.getLogger(__name__)


@dataclass
class _Job:
    """One request: its sentences' results fill in as batches finish."""

    future: asyncio.Future
    results: list
    remaining: int


@dataclass
class _Item:
    options: DecodingOptions
    text: str
    job: _Job
    index: int
    arrived: float


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
        translate_fn: called as translate_fn(texts, options) in the worker thread (Translator.translate);
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
        self._pending: deque[_Item] = deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnmt-model")

    @property
    def queued(self) -> int:
        """Sentences waiting for a batch."""
        return len(self._pending)

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
        while self._pending:
            item = self._pending.popleft()
            if not item.job.future.done():
                item.job.future.set_exception(RuntimeError("the server is shutting down"))
        self._executor.shutdown(wait=True)

    async def run_in_worker(self, fn: Callable, *args):
        """Run fn(*args) in the model's worker thread (for work that touches the model)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def translate(self, texts: Sequence[str], options: DecodingOptions) -> list:
        """Translate texts as `options` say, sharing model calls with concurrent requests."""
        if self._task is None or self._task.done():
            raise RuntimeError("the batcher is not running")
        loop = asyncio.get_running_loop()
        if not texts:
            return []
        job = _Job(loop.create_future(), [None] * len(texts), len(texts))
        now = loop.time()
        self._pending.extend(_Item(options, text, job, i, now) for i, text in enumerate(texts))
        self._wake.set()
        return await job.future

    def _count_like(self, options: DecodingOptions) -> int:
        return sum(1 for item in self._pending if item.options == options)

    def _take_batch(self, options: DecodingOptions) -> list[_Item]:
        """Remove and return up to max_batch waiting sentences with these options, oldest first."""
        batch, keep = [], deque()
        while self._pending:
            item = self._pending.popleft()
            if item.job.future.done():  # cancelled (client gone) or already failed
                continue
            if item.options == options and len(batch) < self.max_batch:
                batch.append(item)
            else:
                keep.append(item)
        self._pending = keep
        return batch

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            first = self._pending[0]
            deadline = first.arrived + self.max_wait
            while self._count_like(first.options) < self.max_batch and loop.time() < deadline:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), deadline - loop.time())
                except asyncio.TimeoutError:
                    break
            batch = self._take_batch(first.options)
            if batch:
                await self._run(batch, first.options)

    def _call(self, texts: list[str], options: DecodingOptions) -> list:
        results = self.translate_fn(texts, options)
        if len(results) != len(texts):
            raise RuntimeError(f"the model returned {len(results)} results for {len(texts)} texts")
        return results

    async def _run(self, batch: list[_Item], options: DecodingOptions) -> None:
        self.stats.running = len(batch)
        try:
            try:
                results = await self.run_in_worker(self._call, [item.text for item in batch], options)
            except Exception as err:  # a model fault: find the request(s) that cause it
                self.stats.failed_batches += 1
                log.exception("a batch of %d sentences failed", len(batch))
                jobs = list({id(item.job): item.job for item in batch}.values())
                if len(jobs) == 1:
                    _fail(jobs[0], err)
                    return
                for job in jobs:
                    items = [item for item in batch if item.job is job]
                    try:
                        found = await self.run_in_worker(self._call, [item.text for item in items], options)
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
    def _deliver(items: list[_Item], results: list) -> None:
        for item, result in zip(items, results):
            job = item.job
            if job.future.done():
                continue
            job.results[item.index] = result
            job.remaining -= 1
            if job.remaining == 0:
                job.future.set_result(job.results)


def _fail(job: _Job, err: Exception) -> None:
    if not job.future.done():
        job.future.set_exception(err)

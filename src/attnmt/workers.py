"""Native decoding in several worker processes, each with few torch threads; outputs in input order.

    with WorkerPool(["runs/multi30k_rnn"], workers=2, threads=1) as pool:
        results = pool.translate(sentences, DecodingOptions(beam_size=5))  # as Translator.translate

Each worker is a process of multiprocessing's 'spawn' context (never fork: torch's thread pools
do not survive a fork) that calls torch.set_num_threads(threads), loads its own Translator from
the same run(s) and translates what it is sent. A call's sentences are sorted by length and dealt
out interleaved (worker w takes the w-th, (w + N)-th, ... shortest), so every worker gets the same
mix of lengths, about the same work; the results are put back in input order. On a shared machine
N single-threaded processes may beat one process with N intra-op threads, which wait for the
slowest thread at every operation: benchmarks/speed/workers.py measures it (docs/performance.md).

Failures never hang the parent: an error in a worker (loading, or one call) becomes an AttnmtError
naming the worker and the message, and a worker that dies without a word (killed, out of memory)
is noticed within POLL_S. Leaving the `with` block stops every worker (at once on an error or
Ctrl-C); a worker whose parent died (kill -9) stops itself within POLL_S.

Shapes: none; sentences in, TranslationResults out.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import queue
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from attnmt.decoding.options import DecodingOptions
from attnmt.errors import AttnmtError
from attnmt.devices import resolve_device
from attnmt.sharding import usable_cpus
from attnmt.world import launched_by_torchrun
from attnmt.translator import TranslationResult, Translator

log = logging.getLogger(__name__)

POLL_S = 1.0  # how often a waiting side checks that the other one is alive
STOP_S = 5.0  # how long a worker has to stop after being asked, before it is terminated
READY = 0  # the job number of a worker's "loaded" message; calls count from 1
PER_SENTENCE = ("target_prefix", "constraints")  # Translator.translate's options given per sentence


@dataclass(frozen=True)
class WorkerSpec:
    """What each worker loads: Translator.load's arguments, and its torch threads."""

    runs: tuple[str, ...]
    checkpoint: str
    device: str
    threads: int


def deal(sentences: Sequence[str], workers: int) -> list[list[int]]:
    """The input indices each worker translates: sorted by length in words, then dealt out in turn,
    so that each worker gets the same mix of short and long sentences."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].split()))
    return [order[w::workers] for w in range(workers)]


def _serve(index: int, spec: WorkerSpec, tasks, results) -> None:
    """A worker's life: load the run, say so, then translate each task until told to stop (None)
    or the parent is gone. Each message is (worker, job, ok, payload); a failed load ends the worker,
    a failed call is reported and the worker waits for the next one."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the workers
    try:
        torch.set_num_threads(spec.threads)
        runs = list(spec.runs) if len(spec.runs) > 1 else spec.runs[0]
        translator = Translator.load(runs, checkpoint=spec.checkpoint, device=spec.device)
    except Exception as err:  # noqa: BLE001 - every failure goes back to the parent, in words
        results.put((index, READY, False, f"{type(err).__name__}: {err}"))
        return
    results.put((index, READY, True, None))
    while (task := _next_task(tasks)) is not None:
        job, sentences, options, keywords = task
        try:  # pickled here: plain bytes through the queue, not torch's shared-memory tensors
            results.put((index, job, True, pickle.dumps(translator.translate(sentences, options, **keywords))))
        except Exception as err:  # noqa: BLE001
            results.put((index, job, False, f"{type(err).__name__}: {err}"))
    results.cancel_join_thread()  # stopping: answers the parent no longer reads must not hold up the exit


def _next_task(tasks):
    """The next task, or None when told to stop or when the parent process is gone."""
    parent = multiprocessing.parent_process()
    while True:
        try:
            return tasks.get(timeout=POLL_S)
        except queue.Empty:
            if parent is not None and not parent.is_alive():
                return None


class WorkerPool:
    """`workers` processes, each translating with its own copy of the run(s); a context manager.

    Args:
        runs: a run directory, or several (an ensemble), as Translator.load takes them.
        workers: how many processes (1 or more).
        threads: torch threads per worker; default the CPUs this process may use, shared out.
        checkpoint, device: as Translator.load (native engine).
    """

    def __init__(self, runs, *, workers: int, threads: int | None = None, checkpoint: str = "best",
                 device: str = "cpu"):
        if workers < 1 or (threads is not None and threads < 1):
            raise ValueError(f"workers={workers} and threads={threads} must be 1 or more")
        runs = (runs,) if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence) else runs
        self.spec = WorkerSpec(runs=tuple(str(r) for r in runs), checkpoint=checkpoint, device=device,
                               threads=threads or max(1, usable_cpus() // workers))
        self.workers = workers
        self._processes: list = []
        self._tasks: list = []
        self._results = None
        self._job = READY

    def __enter__(self) -> WorkerPool:
        try:
            self._start()
        except BaseException:
            self.close(graceful=False)
            raise
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self.close(graceful=exc_type is None)

    def _start(self) -> None:
        """Spawn the workers and wait until each has loaded the run (or one fails)."""
        context = multiprocessing.get_context("spawn")
        self._results = context.Queue()
        for index in range(self.workers):
            tasks = context.Queue()
            process = context.Process(target=_serve, args=(index, self.spec, tasks, self._results),
                                      name=f"attnmt-worker-{index}", daemon=True)
            process.start()
            self._tasks.append(tasks)
            self._processes.append(process)
        self._collect(READY, set(range(self.workers)))
        log.info("%d decoding worker(s) with %d torch thread(s) each", self.workers, self.spec.threads)

    def translate(self, sentences: Sequence[str], options: DecodingOptions | None = None,
                  **keywords) -> list[TranslationResult]:
        """Translator.translate over the workers: the same options (and keywords: decoding options,
        or the per-sentence target_prefix and constraints), the results in input order. An empty
        list still goes to one worker, which checks the options.

        Raises:
            AttnmtError: a worker failed (names it and its error) or died; the pool is not started.
        """
        if not self._processes:
            raise AttnmtError("the worker pool is not running: use it in a `with` block")
        sentences = list(sentences)
        self._job += 1
        parts = deal(sentences, self.workers)
        for worker, indices in enumerate(parts):
            if indices or worker == 0:
                self._tasks[worker].put((self._job, [sentences[i] for i in indices], options,
                                         _options_for(keywords, indices)))
        found = self._collect(self._job, {w for w, indices in enumerate(parts) if indices or w == 0})
        results: list = [None] * len(sentences)
        for worker, indices in enumerate(parts):
            for i, result in zip(indices, found.get(worker, [])):
                results[i] = result
        return results

    def _collect(self, job: int, waiting: set[int]) -> dict[int, list]:
        """Each worker in `waiting`'s answer to `job` (unpickled); messages of older jobs (left
        behind by a failed call) are dropped."""
        found = {}
        while waiting:
            try:
                worker, answer_job, ok, payload = self._results.get(timeout=POLL_S)
            except queue.Empty:
                if all(process.is_alive() for process in self._processes):
                    continue
                try:  # a worker has exited: its last words may still be on their way
                    worker, answer_job, ok, payload = self._results.get(timeout=POLL_S)
                except queue.Empty:
                    raise self._death() from None
            if answer_job != job:
                continue
            if not ok:
                raise AttnmtError(f"decoding worker {worker} (pid {self._processes[worker].pid}) failed: {payload}")
            found[worker] = pickle.loads(payload) if payload is not None else None
            waiting.discard(worker)
        return found

    def _death(self) -> AttnmtError:
        """The error for the first worker that has exited without an answer."""
        index, process = next((i, p) for i, p in enumerate(self._processes) if not p.is_alive())
        return AttnmtError(f"decoding worker {index} (pid {process.pid}) exited with code {process.exitcode} "
                           f"without an answer (killed, or out of memory?)")

    def close(self, *, graceful: bool = True) -> None:
        """Stop the workers: ask them (`graceful`) and wait up to STOP_S, then terminate the rest."""
        if graceful:
            for tasks in self._tasks:
                tasks.put(None)
            deadline = time.monotonic() + STOP_S
            for process in self._processes:
                process.join(timeout=max(0.0, deadline - time.monotonic()))
        for process in self._processes:
            if process.is_alive():
                process.terminate()
        for process in self._processes:
            process.join(timeout=STOP_S)
            if process.is_alive():
                process.kill()
                process.join()
        for channel in [*self._tasks, *([self._results] if self._results is not None else [])]:
            channel.cancel_join_thread()  # unread tasks of a dead worker must not block our exit
            channel.close()
        self._processes, self._tasks, self._results = [], [], None


def _options_for(options: dict, indices: list[int]) -> dict:
    """`options` for the sentences at `indices`: the per-sentence ones (PER_SENTENCE) cut to them."""
    return {key: ([value[i] for i in indices] if key in PER_SENTENCE and isinstance(value, (list, tuple)) else value)
            for key, value in options.items()}


# ----------------------------------------------------------------------------- the one way to open a decoder

def check_workers(workers: int, engine: str) -> None:
    """--workers N > 1 needs the native engine, one process (not torchrun), and at most as many
    workers as the CPUs this process may use (more only add copies of the model).

    Raises:
        AttnmtError: naming what to use instead.
    """
    if workers <= 1:
        return
    if engine != "native":
        raise AttnmtError(f"--workers is the native engine's: the {engine} engine decodes batches side by side "
                          f"itself; set ATTNMT_CT2_INTER_THREADS (and ATTNMT_CT2_INTRA_THREADS) instead")
    if launched_by_torchrun():
        raise AttnmtError("--workers > 1 under torchrun: the ranks already decode side by side; start more ranks "
                          "(--nproc-per-node) or give each more --threads instead")
    if workers > usable_cpus():
        raise AttnmtError(f"--workers {workers}: this process may use {usable_cpus()} CPU(s), and each worker needs "
                          f"one (more only add copies of the model): give at most {usable_cpus()}")


@contextmanager
def open_translator(runs: Sequence[str], *, checkpoint: str, device: str | None, engine: str, workers: int = 1,
                    threads: int | None = None) -> Iterator[Translator | WorkerPool]:
    """The run(s) loaded in this process, or with `workers` > 1 a pool of worker processes
    (workers.py: `threads` torch threads each, default the CPUs shared out) that translates alike.

    Raises:
        AttnmtError: workers on another device than the CPU; what Translator.load and check_workers raise.
    """
    check_workers(workers, engine)
    if workers <= 1:
        yield Translator.load(runs, checkpoint=checkpoint, device=device, engine=engine)
        return
    resolved = resolve_device(device or "auto", key="--device")
    if resolved.type != "cpu":
        raise AttnmtError(f"--workers {workers} shares out CPU cores, and the device is {resolved}: give "
                          f"--device cpu, or drop --workers (on a GPU, raise --batch-size instead)")
    with WorkerPool(runs, workers=workers, threads=threads, checkpoint=checkpoint, device="cpu") as pool:
        yield pool

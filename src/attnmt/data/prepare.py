"""Prepare training data once: corpora streamed in, tokenized by worker processes, written as
memory-mapped token ids (prepared.py) in a cache that every run, rank and resume opens at once.

    attnmt prepare CONFIG                                 (attnmt train prepares when nothing matches)
    torchrun --nproc-per-node N -m attnmt prepare CONFIG  (each rank a part of the corpus)

This module orders the stages, each over the corpus as a stream; the rest lives with its concept:
    plan       cache.py: the settings and inputs' sha256 give the key, a folder in the cache
    sample     tokenizer_training.py: sentencepiece trained on a sample (rank 0)
    encode     encode.py's worker processes; staging.py writes the kept pairs' ids (every rank a part)
    vocab      staging.py: duplicates dropped (data.dedup), tokens counted, vocabularies (rank 0)
    write      prepared.py's PartWriter: ids renumbered into the vocabularies (every rank its part)
    manifest   prepared.py's write_manifest (rank 0); then the folder is renamed into place
Rank barriers stand only between stages. With `init_from` (train.init_from) nothing is trained:
that run's tokenizers and vocabularies are taken as they are, and their digest joins the key.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from attnmt.data import staging
from attnmt.data.cache import Plan, discard, make_plan, open_cached, tool_versions
from attnmt.data.encode import FILTERS, Filters, encoders
from attnmt.data.prepared import SIDES, PreparedData, part_name, write_manifest
from attnmt.data.tokenizer_training import train_tokenizers
from attnmt.errors import DataError
from attnmt.files import writer_lock, writing
from attnmt.world import SINGLE, World, barrier, broadcast_from_main, gather_to_main

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0


def default_workers(world: World = SINGLE) -> int:
    """One worker per usable core, shared among the ranks of this machine."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, world.size))


def prepare(data_cfg: Any, *, world: World = SINGLE, workers: int | None = None,
            root: Path | None = None, init_from: str | None = None) -> PreparedData:
    """The prepared training data of `data_cfg`: the cached folder of its key, checked, or
    prepared now (every rank of `world` takes part) by `workers` processes a rank (default:
    data.workers, else one per core). A damaged cached folder is refused, said and prepared again.
    `init_from`: a run whose tokenizers and vocabularies to use (none are trained).

    Raises:
        DataError: bad input (file:line), or nothing left after the filters.
    """
    plan = broadcast_from_main(world, make_plan(data_cfg, root, init_from) if world.main else None)
    opened = open_cached(plan, heal=False)[0] if world.main else None  # whole: read without a lock
    if broadcast_from_main(world, opened is None if world.main else None):
        with (writer_lock(plan.root, name=plan.lock, wait=True) if world.main else _nothing()):  # one at a time
            reason = ""
            if world.main:
                opened, reason = open_cached(plan)
            todo = broadcast_from_main(world, None if opened is not None else reason)
            if todo is not None:
                log.info("preparing the training data in %s (%s)", plan.folder, todo)
                try:
                    with writing(plan.partial, "the cache keeps only whole preparations: this one is removed"):
                        _prepare(plan, world, workers or data_cfg.workers or default_workers(world))
                except BaseException:  # refused input, a full disk, an interrupt: its space goes back
                    if world.main:
                        shutil.rmtree(plan.partial, ignore_errors=True)
                    raise
    barrier(world)
    return opened if opened is not None else PreparedData.open(plan.folder, verify=world.main)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _prepare(plan: Plan, world: World, workers: int) -> None:
    """The stages, into plan.partial, renamed to plan.folder at the end."""
    start = time.perf_counter()
    partial = plan.partial
    if world.main:
        if partial.is_symlink() or partial.exists():
            discard(partial, "a preparation left unfinished (its process was stopped)")
        partial.mkdir(parents=True)
    tokenizers = broadcast_from_main(world, train_tokenizers(plan, partial) if world.main else None)
    part = partial / part_name(world.rank)
    summaries = gather_to_main(world, _encode_part(plan, tokenizers, partial, part, world, workers))
    if world.main:
        _check_kept(plan, summaries)
        if plan.settings["dedup"]:
            staging.dedup([partial / part_name(r) for r in range(world.size)], summaries)
    barrier(world)
    staging.count_tokens(part, tokenizers)
    barrier(world)
    if world.main:
        side_stats = staging.build_vocabularies(plan, tokenizers, partial, world.size)
    barrier(world)
    finished = gather_to_main(world, staging.finish_part(part, partial))
    if world.main:
        _write_manifest(plan, summaries, finished, side_stats, seconds=time.perf_counter() - start,
                        workers=workers, ranks=world.size)
        if plan.folder.is_symlink() or plan.folder.exists():  # open_cached discarded it: only a link or a race
            discard(plan.folder, "in the way of the new preparation")
        os.rename(partial, plan.folder)


def _encode_part(plan: Plan, tokenizers: tuple[dict, dict], base: Path, part: Path, world: World,
                 workers: int) -> dict:
    """Encode this rank's chunks (every world.size-th) into `part`'s temporary files; its summary."""
    writer = staging.StagingWriter(part)
    jobs = ((c, chunk) for i, (c, chunk) in enumerate(plan.chunks()) if i % world.size == world.rank)
    start = last = time.perf_counter()
    with encoders((*tokenizers, str(base), Filters(**{k: plan.settings[k] for k in Filters.__dataclass_fields__})),
                  workers) as encoder:
        for chunk in encoder(jobs):
            writer.add(chunk)
            if time.perf_counter() - last > LOG_EVERY_S:
                last = time.perf_counter()
                log.info("prepared %s pairs (%.0f pairs/s)", f"{writer.read:,}", writer.read / (last - start))
    return writer.close()


def _check_kept(plan: Plan, summaries: list[dict]) -> None:
    """Raises DataError when no part kept a pair."""
    if not any(s["pairs"] for s in summaries):
        read = sum(s["read"] for s in summaries)
        if read == 0:
            raise DataError(f"{plan.names()}: the training data has no sentence pairs")
        raise DataError(f"{plan.names()}: none of its {read:,} sentence pairs is usable: "
                        f"{_dropped_text(_sum_dropped(summaries), plan.settings)}")


def _write_manifest(plan: Plan, summaries: list[dict], finished: list[dict], side_stats: dict, *,
                    seconds: float, workers: int, ranks: int) -> None:
    """The manifest of plan.partial from the parts' summaries (encode) and counts (finish_part)."""
    per_corpus = np.zeros(len(plan.corpora), dtype=np.int64)
    for info in finished:
        per_corpus[:len(info["per_corpus"])] += info["per_corpus"]
    sides = {side: {**side_stats[side], "tokens": sum(f["sides"][side]["tokens"] for f in finished),
                    "unk": sum(f["sides"][side]["unk"] for f in finished)} for side in SIDES}
    read, kept = sum(s["read"] for s in summaries), sum(f["pairs"] for f in finished)
    counts = {"read": read, "kept": kept, "dropped": _sum_dropped(summaries)}
    write_manifest(plan.partial, key=plan.key, settings=plan.settings, versions=tool_versions(),
                   inputs=[{**entry, "pairs": int(n)} for entry, n in zip(plan.inputs(), per_corpus)],
                   counts=counts, sides=sides, ranks=ranks, part_files=[f["files"] for f in finished],
                   prepared={"seconds": round(seconds, 1), "workers": workers, "ranks": ranks,
                             "date": time.strftime("%Y-%m-%d %H:%M:%S %z")})
    log.info("prepared %s of %s pairs read (%s) in %.0f s: %s", f"{kept:,}", f"{read:,}",
             _dropped_text(counts["dropped"]), seconds, plan.folder)


def _sum_dropped(summaries: list[dict]) -> dict[str, int]:
    total: Counter = Counter()
    for summary in summaries:
        total.update(summary["dropped"])
    return {name: total[name] for name in FILTERS if total[name]}


def _dropped_text(dropped: dict[str, int], settings: dict | None = None) -> str:
    """`too_long 3, duplicate 1`; with the settings, each filter's setting too."""
    def why(name: str) -> str:
        key = {"too_long": "max_len", "too_short": "min_len", "ratio": "max_len_ratio", "identical": "drop_identical",
               "duplicate": "dedup"}.get(name)
        return f" (data.{key}={settings[key]})" if settings is not None and key else ""

    return ", ".join(f"{name} {n:,}{why(name)}" for name, n in dropped.items()) or "none dropped"

"""Prepare training data once: corpora streamed in, tokenized by worker processes, written as
memory-mapped token ids (prepared.py) in a cache that every run, rank and resume opens at once.

    attnmt prepare CONFIG                                 (attnmt train prepares when nothing matches)
    torchrun --nproc-per-node N -m attnmt prepare CONFIG  (each rank a part of the corpus)

The steps, each over the corpus as a stream (never whole in memory):
    plan       the inputs' sha256 and every setting that changes the ids give the key, a folder
               in the cache ($ATTNMT_CACHE/prepared/KEY): found there, it is opened and checked
    sample     sentencepiece trains on a random sample of at most data.spm_train_sentences
               sentences (reservoir sampling: one pass, the sample's memory only)
    encode     worker processes decode, filter, tokenize and number chunks of lines (encode.py);
               this process writes the kept pairs' ids to temporary files, in input order
    dedup      (data.dedup) the first of each run of exactly repeated pairs is kept
    vocab      tokens counted on the kept pairs; the vocabularies (vocab.py's order and cut)
    write      ids renumbered into the vocabularies, in the narrowest integer type, with offsets
    manifest   settings, inputs, counts per filter and every file's sha256; then the folder is
               renamed into place, so a folder under its key is always whole

With `init_from` (train.init_from: a run to start from, e.g. an imported OPUS-MT model) there is
nothing to train: the sample and vocab steps take that run's tokenizers and vocabularies as
they are (its sentencepiece models, its ids, its own special tokens), and their digest joins the key.

Under torchrun the ranks share the work: rank 0 samples and trains sentencepiece, every rank
encodes every N-th chunk into its own part, rank 0 dedups over all parts and builds the
vocabularies, every rank writes its part, rank 0 writes the manifest over all parts. The cache
folder must then be one all ranks see (one machine, or a shared file system).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import shutil
import sys
import time
from collections import Counter, deque
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from itertools import chain
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from attnmt.bounded import load_json
from attnmt.data import encode
from attnmt.data.corpus import CorpusFiles, RawChunk, cache_dir, read_chunks, train_files
from attnmt.data.encode import FILTERS, Filters
from attnmt.data.languages import Languages
from attnmt.data.pipeline import TextPipeline
from attnmt.direction import Direction
from attnmt.data.prepared import (FORMAT, MANIFEST, PIPELINE_FILES, SIDES, PartWriter, PreparedData, blocks,
                                  file_digest, part_name, read_manifest, write_manifest)
from attnmt.data.tokenizers import MosesTokenizer, SentencePieceTokenizer, Tokenizer, train_sentencepiece
from attnmt.data.vocab import Vocab
from attnmt.errors import AttnmtError, DataError, WriteError
from attnmt.files import atomic_write_text, sha256_file, write_json, writer_lock, writing
from attnmt.world import SINGLE, World, barrier, broadcast_from_main, gather_to_main

log = logging.getLogger(__name__)

# The data settings that change the prepared ids (data.train's weights do not: they act per epoch).
SETTINGS = ("corpus", "src_lang", "tgt_lang", "tokenizer", "lowercase", "spm_model_type", "spm_vocab_size",
            "spm_joint", "spm_train_sentences", "min_freq", "max_vocab", "max_len", "min_len", "max_len_ratio",
            "drop_identical", "dedup", "train_subset")
SPM_ONLY = ("spm_model_type", "spm_vocab_size", "spm_joint", "spm_train_sentences")
LOG_EVERY_S = 10.0


def prepared_root() -> Path:
    """Where prepared data lives: `$ATTNMT_CACHE/prepared` (see corpus.cache_dir)."""
    return cache_dir() / "prepared"


def default_workers(world: World = SINGLE) -> int:
    """One worker per usable core, shared among the ranks of this machine."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, world.size))


def tool_versions() -> dict[str, str]:
    """The tokenizer libraries, whose output may change between versions."""
    found = {}
    for name in ("sentencepiece", "sacremoses"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "none"
    return found


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Plan:
    """What to prepare: the settings that decide the ids, the input files and their sha256, the key."""

    settings: dict
    corpora: tuple[CorpusFiles, ...]
    digests: tuple[tuple[str, ...], ...]  # per corpus, per file
    key: str
    root: Path
    init_from: str | None = None  # a run whose tokenizers and vocabularies the ids are in (train.init_from)

    @property
    def folder(self) -> Path:
        return self.root / self.key

    def inputs(self) -> list[dict]:
        return [{"files": [str(p) for p in c.paths], "sha256": list(d), "corpus": c.corpus,
                 **({} if c.direction is None else {"pair": str(c.direction)})}
                for c, d in zip(self.corpora, self.digests)]

    def languages(self) -> Languages | None:
        """A multilingual plan's directions (their tokens join the vocabulary)."""
        directions = self.settings.get("directions")
        return None if directions is None else Languages(tuple(Direction.parse(d, "manifest: directions", error=DataError) for d in directions))


def preparation_settings(data_cfg: Any) -> dict:
    """The settings of `data_cfg` that change the prepared ids, and nothing that does not (a
    multilingual config: its directions instead of src_lang / tgt_lang)."""
    settings = {key: getattr(data_cfg, key) for key in SETTINGS}
    if settings["tokenizer"] == "moses":
        for key in SPM_ONLY:
            del settings[key]
    elif not settings["lowercase"]:  # the keys of data prepared before sentencepiece could lowercase stay
        del settings["lowercase"]
    if data_cfg.multilingual:
        del settings["src_lang"], settings["tgt_lang"]
        settings["directions"] = [str(d) for d in data_cfg.directions()]
    return settings


def make_plan(data_cfg: Any, root: Path | None = None, init_from: str | None = None) -> Plan:
    """The plan of `data_cfg`'s training data (the inputs are hashed, or their sha256 is taken from
    the digest cache when their size and modification time have not changed).

    Raises:
        DataError: an input is missing or unreadable.
    """
    root = Path(root) if root is not None else prepared_root()
    corpora = tuple(train_files(data_cfg))
    known = _DigestCache(root / "digests.json")
    digests = tuple(tuple(known.digest(path) for path in c.paths) for c in corpora)
    known.save()
    settings = preparation_settings(data_cfg)
    if init_from:  # the given tokenizers and vocabularies decide the ids: their content is in the key
        folder = Path(init_from)
        names = [*PIPELINE_FILES, *sorted(p.name for p in folder.glob("*.model"))]
        settings["init_pipeline"] = hashlib.sha256("".join(
            f"{name}:{sha256_file(folder / name)}\n" for name in names).encode()).hexdigest()
    identity = json.dumps({"format": FORMAT, "settings": settings, "inputs": digests, "versions": tool_versions()},
                          sort_keys=True)
    return Plan(settings, corpora, digests, hashlib.sha256(identity.encode()).hexdigest()[:24], root,
                str(init_from) if init_from else None)


class _DigestCache:
    """sha256 of input files, remembered by (path, size, modification time, inode)."""

    def __init__(self, path: Path):
        self.path, self.changed = path, False
        try:
            found = load_json(path.read_text(encoding="utf-8"), source=str(path))
        except (OSError, UnicodeDecodeError, AttnmtError):
            found = {}
        self.entries: dict = found if isinstance(found, dict) else {}

    def digest(self, path: Path) -> str:
        try:
            stat = path.stat()
        except OSError as err:
            raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
        key, stamp = str(path.resolve()), [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        entry = self.entries.get(key)
        if isinstance(entry, dict) and entry.get("stat") == stamp and isinstance(entry.get("sha256"), str):
            return entry["sha256"]
        try:
            digest = file_digest(path)
        except OSError as err:
            raise DataError(f"{path}: cannot read ({err.strerror or err})") from None
        self.entries[key] = {"stat": stamp, "sha256": digest}
        self.changed = True
        return digest

    def save(self) -> None:
        if self.changed:
            try:
                write_json(self.path, self.entries, indent=None)
            except OSError as err:  # a cache that cannot be written only costs time
                log.warning("%s: not written (%s); the inputs will be hashed again next time", self.path, err)


# --------------------------------------------------------------------------- the entry point


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
    opened, reason = None, ""
    with (writer_lock(plan.root, name=f".{plan.key}.lock", wait=True) if world.main else _nothing()):  # one at a time
        if world.main:
            opened, reason = _cached(plan)
        todo = broadcast_from_main(world, None if opened else reason)
        if todo is not None:
            log.info("preparing the training data in %s (%s)", plan.folder, todo)
            partial = plan.root / f".{plan.key}.partial"
            try:
                with writing(partial, "the cache keeps only whole preparations: this one is removed"):
                    _prepare(plan, world, workers or data_cfg.workers or default_workers(world))
            except WriteError:
                shutil.rmtree(partial, ignore_errors=True)  # the space it took goes back
                raise
    barrier(world)
    return opened or PreparedData.open(plan.folder, verify=world.main)


def _cached(plan: Plan) -> tuple[PreparedData | None, str]:
    """The cached folder of the plan, checked; or None and why it must be prepared."""
    if not (plan.folder / MANIFEST).is_file():
        return None, what_changed(plan)
    try:
        data = PreparedData.open(plan.folder)
    except DataError as err:
        log.warning("refusing the prepared data in %s: %s; preparing it again", plan.folder, err)
        shutil.rmtree(plan.folder, ignore_errors=True)
        return None, f"the cached copy was damaged: {err}"
    log.info("using the prepared data in %s (%d pairs)", plan.folder, len(data))
    return data, ""


def what_changed(plan: Plan) -> str:
    """How the plan differs from the newest prepared folder of the same input files, in words."""
    paths = [[str(p) for p in c.paths] for c in plan.corpora]
    newest, found = -1.0, None
    for path in plan.root.glob(f"*/{MANIFEST}"):
        try:
            manifest = read_manifest(path.parent)
        except DataError:
            continue
        if [i.get("files") for i in manifest.get("inputs", [])] == paths and path.stat().st_mtime > newest:
            newest, found = path.stat().st_mtime, manifest
    if found is None:
        return "nothing prepared from these files yet"
    changes = [f"{f} changed (sha256 {old[:12]}... -> {new[:12]}...)"
               for inputs, digests in zip(found["inputs"], plan.digests)
               for f, old, new in zip(inputs["files"], inputs.get("sha256", []), digests) if old != new]
    old_settings = found["settings"]
    changes += [f"data.{key}: {old_settings[key]!r} -> {value!r}" for key, value in plan.settings.items()
                if key in old_settings and old_settings[key] != value]  # a tokenizer's own keys: its change says it
    if not changes:
        changes = ["the tokenizer libraries changed"]  # the only other part of the key
    return "since the last preparation of these files: " + "; ".join(changes)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# --------------------------------------------------------------------------- preparing


def _prepare(plan: Plan, world: World, workers: int) -> None:
    start = time.perf_counter()
    partial = plan.root / f".{plan.key}.partial"
    if world.main:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    tokenizers = broadcast_from_main(world, _train_tokenizers(plan, partial) if world.main else None)
    part = partial / part_name(world.rank)
    summary = _encode_part(plan, tokenizers, partial, part, world, workers)
    summaries = gather_to_main(world, summary)
    if world.main:
        if not any(s["pairs"] for s in summaries):
            read = sum(s["read"] for s in summaries)
            if read == 0:
                raise DataError(f"{_names(plan)}: the training data has no sentence pairs")
            raise DataError(f"{_names(plan)}: none of its {read:,} sentence pairs is usable: "
                            f"{_dropped_text(_sum_dropped(summaries), plan.settings)}")
        if plan.settings["dedup"]:
            _dedup([partial / part_name(r) for r in range(world.size)], summaries)
    barrier(world)
    _count_part(part, tokenizers)
    barrier(world)
    if world.main:
        side_stats = _build_vocabularies(plan, tokenizers, partial, world.size)
    barrier(world)
    finished = gather_to_main(world, _finish_part(part, partial))
    if world.main:
        _write_manifest(plan, partial, summaries, finished, side_stats, seconds=time.perf_counter() - start,
                        workers=workers, ranks=world.size)
        os.rename(partial, plan.folder)


def _names(plan: Plan) -> str:
    return ", ".join(c.name for c in plan.corpora)


def _chunks(plan: Plan) -> Iterator[tuple[int, RawChunk]]:
    """(corpus index, chunk) of all corpora in order, cut after data.train_subset pairs."""
    left = plan.settings["train_subset"]
    for index, files in enumerate(plan.corpora):
        for chunk in read_chunks(files):
            if left is not None:
                if left <= 0:
                    return
                if len(chunk) > left:
                    chunk = RawChunk(files, chunk.first_line, chunk.src[:left],
                                     None if chunk.tgt is None else chunk.tgt[:left])
                left -= len(chunk)
            yield index, chunk


# ---- sample, tokenizers


def sample_pairs(chunks: Iterator[tuple[int, RawChunk]], size: int, seed: str) -> list[tuple[str, str]]:
    """A uniform random sample of `size` pairs of the stream (all of them when there are fewer),
    in stream order, pairs with an empty side left out. Reservoir sampling, algorithm L of Li
    (1994): the gaps between the pairs that enter are drawn, so only those pairs are decoded."""
    rng = random.Random(seed)

    def shrink(weight: float) -> float:  # weight *= u^(1/size), kept below 1 so that the gap is finite
        return min(weight * math.exp(math.log(1.0 - rng.random()) / size), math.nextafter(1.0, 0.0))

    def gap(weight: float) -> int:  # pairs passed over before the next one enters
        return int(math.log(1.0 - rng.random()) / math.log(1.0 - weight))

    reservoir: list[tuple[int, str, str]] = []  # (position in the stream, source, target)
    weight, following = shrink(1.0), None      # the next position to enter once the reservoir is full
    start = 0
    for _, chunk in chunks:
        end = start + len(chunk)
        position = start
        while len(reservoir) < size and position < end:
            reservoir.append((position, *chunk.pair(position - start)[1:]))
            position += 1
        if len(reservoir) == size:
            following = size + gap(weight) if following is None else following
            while following < end:
                reservoir[rng.randrange(size)] = (following, *chunk.pair(following - start)[1:])
                weight = shrink(weight)
                following += 1 + gap(weight)
        start = end
    reservoir.sort()
    return [(src, tgt) for _, src, tgt in reservoir if src and tgt]


def _train_tokenizers(plan: Plan, folder: Path) -> tuple[dict, dict]:
    """The tokenizers' settings (`to_dict`), their sentencepiece models trained on a sample and
    copied into `folder`."""
    s = plan.settings
    if plan.init_from:  # the given run's, as they are
        given = TextPipeline.load(Path(plan.init_from))
        return tuple((tok.copy_model_to(folder) if isinstance(tok, SentencePieceTokenizer) else tok).to_dict()
                     for tok in (given.src_tokenizer, given.tgt_tokenizer))
    if s["tokenizer"] == "moses":
        return (MosesTokenizer(s["src_lang"], lowercase=s["lowercase"]).to_dict(),
                MosesTokenizer(s["tgt_lang"], lowercase=s["lowercase"]).to_dict())
    per_model = s["spm_train_sentences"]
    pairs = sample_pairs(_chunks(plan), per_model // 2 if s["spm_joint"] else per_model,
                         seed=f"attnmt-spm-sample:{plan.key}")
    if not pairs:
        raise DataError(f"{_names(plan)}: no pair with two non-empty sides to train sentencepiece on")
    options = dict(vocab_size=s["spm_vocab_size"], model_type=s["spm_model_type"], cache_dir=cache_dir() / "sentencepiece")
    lowercase = s.get("lowercase", False)
    if lowercase:  # the models learn lowercased text, which their tokenizers then give them
        pairs = [(src.lower(), tgt.lower()) for src, tgt in pairs]

    def trained_on(texts: list[str]) -> SentencePieceTokenizer:
        model = train_sentencepiece(texts, **options)
        return SentencePieceTokenizer(model, lowercase=lowercase).copy_model_to(folder)

    if s["spm_joint"]:
        src_tok = tgt_tok = trained_on([src for src, _ in pairs] + [tgt for _, tgt in pairs])
    else:
        src_tok, tgt_tok = trained_on([src for src, _ in pairs]), trained_on([tgt for _, tgt in pairs])
    return src_tok.to_dict(), tgt_tok.to_dict()


def _tokenizer(settings: dict, folder: Path) -> Tokenizer:
    from attnmt.data.tokenizers import tokenizer_from_dict

    return tokenizer_from_dict(settings, folder, source="prepared tokenizer")


# ---- encode


@contextmanager
def _encoders(args: tuple, workers: int) -> Iterator[Callable[[Iterator], Iterator[encode.EncodedChunk]]]:
    """A function from (corpus, chunk) jobs to their EncodedChunks in order: in this process with
    one worker or one chunk, else in `workers` processes (`_worker_context`), at most 2 chunks each
    in flight (a worker's result does not depend on where it runs: encode.py)."""
    local = encode.ChunkEncoder(*args)
    pools: list[ProcessPoolExecutor] = []

    def run(jobs: Iterator) -> Iterator[encode.EncodedChunk]:
        jobs = iter(jobs)
        first = next(jobs, None)
        second = next(jobs, None) if workers > 1 else None
        if second is None:  # one chunk (or one worker): no processes to start
            yield from (local.encode(chunk, corpus) for corpus, chunk in filter(None, (first,)))
            yield from (local.encode(chunk, corpus) for corpus, chunk in jobs)
            return
        pools.append(ProcessPoolExecutor(workers, mp_context=_worker_context(), initializer=encode.start_worker,
                                         initargs=args))
        pending: deque = deque()
        for corpus, chunk in chain([first, second], jobs):
            pending.append(pools[0].submit(encode.work, chunk, corpus))
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


def _result(future) -> encode.EncodedChunk:
    try:
        return future.result()
    except BrokenProcessPool:
        raise AttnmtError("a preparation worker process died (out of memory? killed?); nothing was written to "
                          "the cache: run again, perhaps with fewer data.workers") from None


class _PartWriter:
    """Appends EncodedChunks to a part's temporary files, giving Moses tokens part-wide ids."""

    TEMP = {"src.tok": np.uint32, "src.len": np.uint32, "tgt.tok": np.uint32, "tgt.len": np.uint32,
            "lines.tmp": np.uint64, "corpus.tmp": np.uint8, "digests.tmp": np.uint64}

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.handles = {name: open(folder / name, "wb") for name in self.TEMP}
        self.types: dict[str, dict[str, int]] = {"src": {}, "tgt": {}}
        self.read = self.pairs = 0
        self.dropped: Counter = Counter()

    def add(self, chunk: encode.EncodedChunk) -> None:
        for side in SIDES:
            ids, types = getattr(chunk, f"{side}_ids"), getattr(chunk, f"{side}_types")
            if types is not None:  # Moses: the chunk's own numbering -> the part's
                space = self.types[side]
                ids = np.fromiter((space.setdefault(t, len(space)) for t in types), dtype=np.uint32,
                                  count=len(types))[ids] if len(ids) else ids
            ids.astype(np.uint32, copy=False).tofile(self.handles[f"{side}.tok"])
            getattr(chunk, f"{side}_lens").astype(np.uint32, copy=False).tofile(self.handles[f"{side}.len"])
        chunk.lines.astype(np.uint64, copy=False).tofile(self.handles["lines.tmp"])
        np.full(len(chunk.lines), chunk.corpus, dtype=np.uint8).tofile(self.handles["corpus.tmp"])
        if chunk.digests is not None:
            chunk.digests.tofile(self.handles["digests.tmp"])
        self.read += chunk.read
        self.pairs += len(chunk.lines)
        self.dropped.update(chunk.dropped)

    def close(self) -> dict:
        for handle in self.handles.values():
            handle.close()
        for side in SIDES:
            if self.types[side]:
                atomic_write_text(self.folder / f"types.{side}.json", json.dumps(list(self.types[side]), ensure_ascii=False))
        return {"read": self.read, "pairs": self.pairs, "dropped": dict(self.dropped)}


def _encode_part(plan: Plan, tokenizers: tuple[dict, dict], base: Path, part: Path, world: World,
                 workers: int) -> dict:
    """Encode this rank's chunks (every world.size-th) into `part`'s temporary files."""
    writer = _PartWriter(part)
    jobs = ((c, chunk) for i, (c, chunk) in enumerate(_chunks(plan)) if i % world.size == world.rank)
    start = last = time.perf_counter()
    with _encoders((*tokenizers, str(base), Filters(**{k: plan.settings[k] for k in Filters.__dataclass_fields__})),
                   workers) as encoder:
        for chunk in encoder(jobs):
            writer.add(chunk)
            if time.perf_counter() - last > LOG_EVERY_S:
                last = time.perf_counter()
                log.info("prepared %s pairs (%.0f pairs/s)", f"{writer.read:,}", writer.read / (last - start))
    return writer.close()


# ---- dedup, counts, vocabularies


def _dedup(parts: list[Path], summaries: list[dict]) -> None:
    """Keep the first pair of each digest, first in (corpus, line) order whatever the parts;
    writes each part's keep.npy and counts the duplicates in `summaries`."""
    digests = np.concatenate([np.fromfile(p / "digests.tmp", dtype=np.uint64) for p in parts])
    corpus = np.concatenate([np.fromfile(p / "corpus.tmp", dtype=np.uint8) for p in parts])
    lines = np.concatenate([np.fromfile(p / "lines.tmp", dtype=np.uint64) for p in parts])
    order = np.lexsort((lines, corpus, digests))  # by digest, then where the pair stands in the input
    first = np.ones(len(order), dtype=bool)
    first[1:] = digests[order[1:]] != digests[order[:-1]]
    keep = np.empty(len(order), dtype=bool)
    keep[order] = first
    del digests, corpus, lines, order
    start = 0
    for folder, summary in zip(parts, summaries):
        mine = keep[start:start + summary["pairs"]]
        np.save(folder / "keep.npy", mine)
        start += summary["pairs"]
        duplicates = int(summary["pairs"] - mine.sum())
        summary["pairs"] -= duplicates
        if duplicates:
            summary["dropped"]["duplicate"] = duplicates


def _keep(folder: Path) -> np.ndarray | None:
    path = folder / "keep.npy"
    return np.load(path) if path.is_file() else None


def _token_blocks(lens: np.ndarray, keep: np.ndarray | None) -> Iterator[tuple[slice, slice, np.ndarray | None]]:
    """(pairs, their tokens, the kept tokens' mask or None) in blocks of pairs."""
    token = 0
    for pairs in blocks(len(lens)):
        n = int(lens[pairs].sum())
        mask = None if keep is None else np.repeat(keep[pairs], lens[pairs])
        yield pairs, slice(token, token + n), mask
        token += n


def _count_part(part: Path, tokenizers: tuple[dict, dict]) -> None:
    """Count each token id of the kept pairs, per side: counts.SIDE.npy."""
    keep = _keep(part)
    for side, settings in zip(SIDES, tokenizers):
        ids = np.memmap(part / f"{side}.tok", dtype=np.uint32, mode="r") if (part / f"{side}.tok").stat().st_size \
            else np.zeros(0, dtype=np.uint32)
        lens = np.fromfile(part / f"{side}.len", dtype=np.uint32)
        size = len(_types(part, side, settings))
        counts = np.zeros(size, dtype=np.int64)
        for _, tokens, mask in _token_blocks(lens, keep):
            chunk = ids[tokens] if mask is None else ids[tokens][mask]
            counts += np.bincount(chunk, minlength=size)[:size]
        np.save(part / f"counts.{side}.npy", counts)


def _types(part: Path, side: str, settings: dict) -> list[str]:
    """The part's token strings by id: sentencepiece's pieces, or the Moses tokens of types.SIDE.json."""
    if settings["type"] == "sentencepiece":
        return _tokenizer(settings, part.parent).pieces()
    path = part / f"types.{side}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []


def _build_vocabularies(plan: Plan, tokenizers: tuple[dict, dict], folder: Path, ranks: int) -> dict:
    """The vocabularies from every part's counts (joint for a joint sentencepiece model), the
    pipeline saved in `folder`, each part's remap.SIDE.npy (its ids -> vocabulary ids); returns
    the distinct tokens seen on each side."""
    s = plan.settings
    parts = [folder / part_name(r) for r in range(ranks)]
    joint = s["tokenizer"] == "sentencepiece" and s["spm_joint"]
    totals: dict[str, Counter] = {side: Counter() for side in SIDES}
    for part in parts:
        for side, settings in zip(SIDES, tokenizers):
            counts = np.load(part / f"counts.{side}.npy")
            types = _types(part, side, settings)
            for i in np.flatnonzero(counts).tolist():
                totals[side][types[i]] += int(counts[i])
    seen = {side: {"types": len(totals[side])} for side in SIDES}
    if joint:  # one vocabulary over both sides' counts
        totals = {"src": totals["src"] + totals["tgt"], "tgt": Counter()}
    languages, source_eos = plan.languages(), False
    if plan.init_from:  # the given run's vocabularies: its tokens keep their ids, the rest is <unk>
        given = TextPipeline.load(Path(plan.init_from))
        src_vocab, tgt_vocab, languages, source_eos = given.src_vocab, given.tgt_vocab, given.languages, given.source_eos
    else:
        options = dict(min_freq=s["min_freq"], max_size=s["max_vocab"],
                       reserved=languages.tokens() if languages else ())
        src_vocab = Vocab.from_counts(totals["src"], **options)
        tgt_vocab = src_vocab if joint else Vocab.from_counts(totals["tgt"], **options)
    TextPipeline(_tokenizer(tokenizers[0], folder), _tokenizer(tokenizers[1], folder), src_vocab, tgt_vocab,
                 languages, source_eos).save(folder)
    for part in parts:
        for side, settings, vocab in zip(SIDES, tokenizers, (src_vocab, tgt_vocab)):
            types = _types(part, side, settings)
            remap = np.fromiter((vocab.stoi.get(t, vocab.unk_id) for t in types), dtype=np.uint32, count=len(types))
            np.save(part / f"remap.{side}.npy", remap)
    return seen


# ---- write


def _finish_part(part: Path, folder: Path) -> dict:
    """The part's arrays (prepared.PartWriter) from its temporary files, which are removed;
    returns their manifest entries and the part's counts."""
    pipeline = TextPipeline.load(folder)
    keep = _keep(part)
    lines = np.fromfile(part / "lines.tmp", dtype=np.uint64)
    corpus = np.fromfile(part / "corpus.tmp", dtype=np.uint8)
    if keep is not None:
        lines, corpus = lines[keep], corpus[keep]
    info: dict[str, Any] = {"pairs": len(lines), "sides": {}, "per_corpus": np.bincount(corpus, minlength=1).tolist()}
    writer = PartWriter(part)
    writer.pairs(lines, corpus)
    del lines, corpus
    for side, vocab in zip(SIDES, (pipeline.src_vocab, pipeline.tgt_vocab)):
        lens = np.fromfile(part / f"{side}.len", dtype=np.uint32)
        unknown = [0]
        tokens = writer.side(side, lens if keep is None else lens[keep], len(vocab),
                             _renumbered(part, side, lens, keep, vocab.unk_id, unknown))
        info["sides"][side] = {"tokens": tokens, "unk": unknown[0]}
    for temp in [*_PartWriter.TEMP, "keep.npy", "counts.src.npy", "counts.tgt.npy", "remap.src.npy",
                 "remap.tgt.npy", "types.src.json", "types.tgt.json"]:
        (part / temp).unlink(missing_ok=True)
    info["files"] = writer.files()
    return info


def _renumbered(part: Path, side: str, lens: np.ndarray, keep: np.ndarray | None, unk_id: int,
                unknown: list[int]) -> Iterator[np.ndarray]:
    """The kept pairs' ids of `side` in the vocabulary's numbering, in blocks; adds the <unk>s to unknown[0]."""
    remap = np.load(part / f"remap.{side}.npy")
    raw = np.memmap(part / f"{side}.tok", dtype=np.uint32, mode="r") if len(lens) and lens.sum() \
        else np.zeros(0, dtype=np.uint32)
    for _, tokens, mask in _token_blocks(lens, keep):
        ids = remap[raw[tokens] if mask is None else raw[tokens][mask]]
        unknown[0] += int(np.count_nonzero(ids == unk_id))
        yield ids


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


def _write_manifest(plan: Plan, folder: Path, summaries: list[dict], finished: list[dict], side_stats: dict, *,
                    seconds: float, workers: int, ranks: int) -> None:
    per_corpus = np.zeros(len(plan.corpora), dtype=np.int64)
    for info in finished:
        per_corpus[:len(info["per_corpus"])] += info["per_corpus"]
    sides = {side: {**side_stats[side], "tokens": sum(f["sides"][side]["tokens"] for f in finished),
                    "unk": sum(f["sides"][side]["unk"] for f in finished)} for side in SIDES}
    read, kept = sum(s["read"] for s in summaries), sum(f["pairs"] for f in finished)
    counts = {"read": read, "kept": kept, "dropped": _sum_dropped(summaries)}
    write_manifest(folder, key=plan.key, settings=plan.settings, versions=tool_versions(),
                   inputs=[{**entry, "pairs": int(n)} for entry, n in zip(plan.inputs(), per_corpus)],
                   counts=counts, sides=sides, ranks=ranks, part_files=[f["files"] for f in finished],
                   prepared={"seconds": round(seconds, 1), "workers": workers, "ranks": ranks,
                             "date": time.strftime("%Y-%m-%d %H:%M:%S %z")})
    log.info("prepared %s of %s pairs read (%s) in %.0f s: %s", f"{kept:,}", f"{read:,}",
             _dropped_text(counts["dropped"]), seconds, plan.folder)

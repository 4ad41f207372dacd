"""Line files processed in shards, on one process or several (torchrun), resumable after a kill.

    torchrun --nproc-per-node N -m attnmt translate RUN -i BIG -o OUT
    torchrun --nproc-per-node N -m attnmt score RUN -i SRC -r REF -o OUT

The input is cut into shards of `shard_lines` lines (the last one shorter). Every finished shard
is written atomically (files.atomic_write) into a work folder next to the output, `OUT.shards/`,
so a shard file either holds a whole shard's output or does not exist. The folder's manifest
names the inputs (line count and sha256) and the settings that change the output; a resume
whose inputs or settings differ is refused rather than mixing two jobs' outputs in one file.

Rank 0 lists the shards not yet done and shares them round-robin (rank r takes the r-th, the
(r + N)-th, ...); after a barrier it concatenates the shards in input order into OUT (atomically)
and removes the work folder. Without torchrun the same code runs as rank 0 of 1. On several
nodes the input must be readable and OUT's folder writable at the same path on every node
(a shared file system). Lines follow commands/text_io's rule: a line ends at "\\n" only.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Callable, Sequence

from attnmt.errors import AttnmtError, DataError
from attnmt.files import LOCK_FILE, atomic_write, read_json, write_json
from attnmt.untrusted import bounded_lines
from attnmt.world import SINGLE, World, barrier, broadcast_from_main

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
DEFAULT_SHARD_LINES = 10_000
WAIT_FOR_RANKS_S = 24 * 3600  # the process group's timeout: a rank may wait this long for the slowest one

# one shard's lines as bytes, one list per input file -> its output lines, each ending in "\n"
Work = Callable[[list[list[bytes]]], list[str]]


@dataclass(frozen=True)
class LinePlan:
    """One input file cut into shards: its line count, its sha256 and where each shard starts."""

    path: str
    lines: int
    sha256: str
    starts: tuple[int, ...]  # byte offset of each shard's first line


def plan_lines(path: str, shard_lines: int) -> LinePlan:
    """Read `path` once: count its lines ("\\n"-terminated, and a last one without), hash it and
    note the byte offset of every `shard_lines`-th line.

    Raises:
        ValueError: `shard_lines` < 1.
        DataError: `path` is not a regular file (a pipe cannot be read twice), or a line of it is
            longer than bounds.LINE_BYTES (untrusted.bounded_lines: file:line, before any work).
        OSError: the file cannot be read (the CLI names it).
    """
    if shard_lines < 1:
        raise ValueError(f"shard_lines={shard_lines} must be 1 or more")
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise DataError(f"{path}: not a regular file; shards are read by line offsets, so give a file "
                        f"(a pipe or a device streams only on one process, without -o)")
    digest, starts, offset, lines = hashlib.sha256(), [], 0, 0
    with open(path, "rb") as handle:
        for line in bounded_lines(handle, str(path)):  # split at b"\n" only, none past bounds.LINE_BYTES
            if lines % shard_lines == 0:
                starts.append(offset)
            digest.update(line)
            offset += len(line)
            lines += 1
    return LinePlan(path=str(path), lines=lines, sha256=digest.hexdigest(), starts=tuple(starts))


def read_shard(plan: LinePlan, index: int, shard_lines: int) -> list[bytes]:
    """The lines of shard `index` of `plan` as bytes, each with its "\\n" (the caller decodes
    them: commands/text_io.read_lines)."""
    count = min(shard_lines, plan.lines - index * shard_lines)
    with open(plan.path, "rb") as handle:
        handle.seek(plan.starts[index])
        return [handle.readline() for _ in range(count)]


def work_folder(output: str | os.PathLike) -> Path:
    """Where the shards of `output` are kept until it is written: `OUTPUT.shards/`."""
    return Path(f"{output}.shards")


@dataclass(frozen=True)
class ShardedJob:
    """A sharded job as one rank sees it after `open_job`."""

    plans: tuple[LinePlan, ...]  # one per input file, all with the same line count
    output: Path
    shard_lines: int
    pending: tuple[int, ...]  # the shards not yet done when the job (re)started, in input order
    world: World = SINGLE
    started: float = field(default_factory=time.monotonic)  # for the pace in the progress log

    @property
    def folder(self) -> Path:
        return work_folder(self.output)

    @property
    def shards(self) -> int:
        return len(self.plans[0].starts)

    @property
    def mine(self) -> tuple[int, ...]:
        """This rank's shards: round-robin over the pending ones."""
        return self.pending[self.world.rank::self.world.size]

    def shard_path(self, index: int) -> Path:
        return self.folder / f"shard-{index:06d}.txt"

    def shard_size(self, index: int) -> int:
        return min(self.shard_lines, self.plans[0].lines - index * self.shard_lines)


def threads_per_rank(requested: int | None) -> int | None:
    """The torch threads for one rank: `requested` when given; under torchrun the CPUs this
    process may use shared among the ranks of its node (torchrun itself sets OMP_NUM_THREADS=1,
    which leaves the other cores idle); None (torch's own choice) on one process."""
    if requested:
        return requested
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0)
    if local < 1:
        return None
    return max(1, usable_cpus() // local)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it), to share out."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def check_output(output: str | os.PathLike) -> None:
    """Refuse, before any work, an output that cannot be written: a folder, a missing parent, or
    something other than a regular file (a device like /dev/null would be replaced by a file).

    Raises:
        OSError: the folder cases (named as the OS names them).
        DataError: not a regular file.
    """
    path = Path(output)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    if os.path.lexists(path) and not path.is_file():
        raise DataError(f"{path}: not a regular file; the output is written to a new file and renamed into place")


def open_job(inputs: Sequence[str], output: str | os.PathLike, *, shard_lines: int, settings: dict,
             world: World = SINGLE) -> ShardedJob:
    """Plan the shards of `inputs` (aligned files: line i of each belongs together), then start
    the work folder or check that it belongs to this job (rank 0; every rank gets its answer).

    Args:
        settings: what changes the output besides the inputs (model, beam, ...), plain JSON data;
            a resume with other settings (or inputs, or shard_lines) is refused.

    Raises:
        DataError: the inputs have different line counts.
        AttnmtError: the work folder holds finished shards of another job, or is not attnmt's.
        OSError: an input cannot be read or the output cannot be written (names the file).
    """
    check_output(output)
    plans = tuple(plan_lines(path, shard_lines) for path in inputs)
    for plan in plans[1:]:
        if plan.lines != plans[0].lines:
            raise DataError(f"{plans[0].path} has {plans[0].lines} lines, {plan.path} has {plan.lines}")
    manifest = {"inputs": [{"path": str(Path(p.path).resolve()), "lines": p.lines, "sha256": p.sha256}
                           for p in plans], "shard_lines": shard_lines, "settings": settings}
    answer: object = None
    if world.main:
        try:
            answer = _start_folder(work_folder(output), manifest, len(plans[0].starts))
        except (AttnmtError, OSError) as err:
            answer = err
    answer = broadcast_from_main(world, answer)  # every rank raises rank 0's error, or none does
    if isinstance(answer, BaseException):
        raise answer
    return ShardedJob(plans=plans, output=Path(output), shard_lines=shard_lines, pending=tuple(answer), world=world)


def _done(folder: Path) -> set[int]:
    """The indices of the finished shards in `folder` (half-written ones are hidden temp files)."""
    names = (entry.name for entry in os.scandir(folder)) if folder.is_dir() else ()
    return {int(name[6:-4]) for name in names
            if name.startswith("shard-") and name.endswith(".txt") and name[6:-4].isdigit()}


def _start_folder(folder: Path, manifest: dict, shards: int) -> list[int]:
    """Write `folder`'s manifest, or check the one there; return the shards left to do."""
    path = folder / MANIFEST
    done = _done(folder)
    if path.is_file() and done:
        differences = _differences(read_json(path, AttnmtError), manifest)
        if differences:
            raise AttnmtError(f"{folder} holds {len(done)} finished shard(s) of another job "
                              f"({'; '.join(differences)}): "
                              f"rerun with the same inputs and settings to resume, or remove {folder} to start over")
        log.info("resuming: %d of %d shard(s) already done in %s", len(done), shards, folder)
    elif not path.is_file() and folder.exists() and any(p.name != LOCK_FILE for p in folder.iterdir()):
        raise AttnmtError(f"{folder} exists and has no {MANIFEST}: it is not attnmt's work folder; move it away")
    else:  # a new job, or one killed before its first shard: nothing to mix
        write_json(path, manifest)
    return [index for index in range(shards) if index not in done]


def _differences(old: object, new: dict) -> list[str]:
    """What differs between two manifests, in words (`old` as read: anything JSON holds)."""
    old = old if isinstance(old, dict) else {}
    found = []
    old_inputs = old.get("inputs") if isinstance(old.get("inputs"), list) else []
    if [i.get("sha256") for i in old_inputs if isinstance(i, dict)] != [i["sha256"] for i in new["inputs"]]:
        found.append(f"the input changed: {', '.join(i['path'] for i in new['inputs'])}")
    if old.get("shard_lines") != new["shard_lines"]:
        found.append(f"shard_lines: {old.get('shard_lines')!r} -> {new['shard_lines']!r}")
    old_settings = old.get("settings") if isinstance(old.get("settings"), dict) else {}
    for key in sorted(set(old_settings) | set(new["settings"])):
        if old_settings.get(key) != new["settings"].get(key):
            found.append(f"{key}: {old_settings.get(key)!r} -> {new['settings'].get(key)!r}")
    return found


def run_shards(job: ShardedJob, work: Work) -> None:
    """Do this rank's shards: read each one's lines, `work` them, write the output atomically."""
    for index in job.mine:
        output = work([read_shard(plan, index, job.shard_lines) for plan in job.plans])
        atomic_write(job.shard_path(index), lambda tmp: _write_lines(tmp, output))
        if job.world.main:
            _log_progress(job)


def remove_work_folder(folder: Path) -> None:
    """Remove what a job wrote into its work folder (shards, manifest, lock, temporary files) and
    then the folder; a file the job did not write stays, and so does the folder, with a warning."""
    for entry in list(os.scandir(folder)):
        own = (entry.name in (MANIFEST, LOCK_FILE) or entry.name.startswith(".") and entry.name.endswith(".tmp")
               or entry.name.startswith("shard-") and entry.name.endswith(".txt") and entry.name[6:-4].isdigit())
        if own and entry.is_file(follow_symlinks=False):
            os.unlink(entry.path)
    try:
        folder.rmdir()
    except OSError:
        log.warning("%s: kept, with the files attnmt did not write in it", folder)


def _write_lines(path: Path, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(lines)


def _pace(job: ShardedJob) -> tuple[set[int], int, float]:
    """Every rank's finished shards (counted in the work folder), the sentences left and the
    sentences per second since this run of the job started."""
    done, pending = _done(job.folder), set(job.pending)
    sentences = sum(job.shard_size(i) for i in done & pending)
    left = sum(job.shard_size(i) for i in pending - done)
    return done, left, sentences / max(time.monotonic() - job.started, 1e-9)


def _log_progress(job: ShardedJob) -> None:
    """Rank 0's progress line after each of its shards."""
    done, left, rate = _pace(job)
    eta = str(timedelta(seconds=round(left / rate))) if rate else "?"
    log.info("%s: %d/%d shards done, %.1f sentences/s over %d rank(s), %d sentences left (about %s)",
             job.output, len(done), job.shards, rate, job.world.size, left, eta)


def finish_job(job: ShardedJob) -> None:
    """Wait for every rank, then (rank 0) write the shards in input order into the output in one
    atomic step and remove the work folder."""
    barrier(job.world)
    if not job.world.main:
        return
    missing = [index for index in range(job.shards) if not job.shard_path(index).is_file()]
    if missing:  # only when someone removed shard files while the job ran
        raise AttnmtError(f"{job.folder}: shard(s) {missing[:5]} missing after every rank finished; run again")

    def concatenate(tmp: Path) -> None:
        with open(tmp, "wb") as out:
            for index in range(job.shards):
                with open(job.shard_path(index), "rb") as part:
                    shutil.copyfileobj(part, out)

    rate = _pace(job)[2]
    atomic_write(job.output, concatenate)
    remove_work_folder(job.folder)
    log.info("wrote %s: %d input line(s) in %d shard(s), %.1f sentences/s over %d rank(s)",
             job.output, job.plans[0].lines, job.shards, rate, job.world.size)

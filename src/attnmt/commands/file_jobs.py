"""`translate` and `score` over files in shards (sharding.py): on one process, or on every rank
of a torchrun job, resumable after a kill.

Used when -i and -o name regular files (or -o a new one), and always under torchrun (where they
must). stdin, stdout, pipes and devices keep each command's streaming path: a pipe cannot be
split between ranks nor resumed, and a device must be written to, not replaced by a file.
The run(s) are loaded by workers.open_translator (for translate, evaluate and distill alike), in
this process or, with --workers N, in a pool of N worker processes.
"""

from __future__ import annotations

import logging
import os
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch

from attnmt.commands.text_io import check_text_input
from attnmt.devices import resolve_device
from attnmt.errors import AttnmtError
from attnmt.files import LOCK_FILE, refuse_overwrite, writer_lock
from attnmt.run_dir import RunDir
from attnmt.sharding import (DEFAULT_SHARD_LINES, WAIT_FOR_RANKS_S, Work, check_output, finish_job, open_job,
                             run_shards, threads_per_rank, work_folder)
from attnmt.world import broadcast_from_main, close_world, init_world, launched_by_torchrun
from attnmt.translator import Translator
from attnmt.workers import WorkerPool, check_workers, open_translator  # noqa: F401 (the verbs' way in)

log = logging.getLogger(__name__)


def wanted(args) -> bool:
    """Whether this call runs in shards: under torchrun, or from a regular file into a regular
    file or a new one. A pipe or a device (/dev/stdin, /dev/null) streams: an input one cannot
    be read twice, and an output one must be written to, not replaced."""
    return launched_by_torchrun() or (args.input is not None and args.output is not None
                                      and os.path.isfile(args.input)
                                      and (os.path.isfile(args.output) or not os.path.lexists(args.output)))


def model_settings(args) -> dict:
    """What names the model(s) in a work folder's manifest: each one's folder and its weights
    file's size and modification time (a retrained run is another model)."""
    return {"models": [str(Path(p).resolve()) for p in args.run_dir], "checkpoint": args.checkpoint,
            "engine": args.engine,
            "weights": [RunDir(p).weights_identity(args.checkpoint, args.engine) for p in args.run_dir]}


def run(args, inputs: Sequence[str], settings: dict, make_work: Callable[[Translator | WorkerPool], Work], *,
        workers: int = 1) -> int:
    """Load the model on this rank's device (or in `workers` processes: open_translator), do this
    rank's shards of `inputs` into args.output with `make_work(translator)`, and (rank 0) write the output.

    Raises:
        AttnmtError: stdin or stdout under torchrun; what open_job raises.
    """
    if args.input is None or args.output is None:
        raise AttnmtError("under torchrun, give -i FILE and -o FILE: the ranks share files, not a stream")
    for path in inputs:  # regular text files only (text_io.open_text_file): no FIFO, device or zip
        check_text_input(path)
    check_output(args.output)  # before the process group: every rank refuses alike
    with torch_threads(args.threads):
        device = resolve_device(args.device or "auto", key="--device")
        world, device = init_world("auto", device, timeout_s=WAIT_FOR_RANKS_S)  # one process: SINGLE
        with ExitStack() as held:
            shard_lines = args.shard_lines or DEFAULT_SHARD_LINES
            log.info("%d rank(s) on %s, %d torch thread(s) each, shards of %d lines", world.size, device.type,
                     torch.get_num_threads(), shard_lines)
            with open_translator(args.run_dir, checkpoint=args.checkpoint, device=str(device), engine=args.engine,
                                 workers=workers, threads=args.threads) as translator:
                work = make_work(translator)  # refuses bad options before the work folder is made
                _lock_output(args.output, world, held)
                job = open_job(inputs, args.output, shard_lines=shard_lines,
                               settings={**model_settings(args), **settings}, world=world)
                run_shards(job, work)
            finish_job(job)
        close_world(world)
    return 0


def _lock_output(output: str, world, held: ExitStack) -> None:
    """Rank 0 takes the one-writer lock of `output` (in its work folder, OUTPUT.shards/), held
    until `held` closes; every rank raises rank 0's refusal alike."""
    answer: object = None
    if world.main:
        folder = work_folder(output)
        try:
            held.enter_context(writer_lock(folder))
            held.callback(_remove_if_only_the_lock, folder)  # at the end, while still held
        except AttnmtError as err:
            answer = err
    answer = broadcast_from_main(world, answer)
    if isinstance(answer, BaseException):
        raise answer


def _remove_if_only_the_lock(folder: Path) -> None:
    """A work folder that holds nothing but its lock file (a job that stopped before its manifest) goes."""
    try:
        if folder.is_dir() and [p.name for p in folder.iterdir()] == [LOCK_FILE]:
            (folder / LOCK_FILE).unlink()
            folder.rmdir()
    except OSError:
        pass


def refuse_overwriting_inputs(output: str | None, inputs: dict[str, str | None], run_dirs: Sequence[str]) -> None:
    """Refuse, before any work, an -o (or its work folder, OUTPUT.shards/) that is an input file
    (label -> path), holds one, or lies in a model folder read (files.refuse_overwrite)."""
    if output is None or output == "-":
        return
    files = {label: path for label, path in inputs.items() if path not in (None, "-")}
    runs = ({"model folder": path for path in run_dirs} if len(run_dirs) == 1 else
            {f"model folder {i + 1}": path for i, path in enumerate(run_dirs)})
    refuse_overwrite(output, files, runs)
    refuse_overwrite(work_folder(output), files, runs)


@contextmanager
def torch_threads(requested: int | None) -> Iterator[None]:
    """torch's CPU threads while the command runs (`--threads`, else sharding.threads_per_rank),
    restored after (tests call the CLI in one process)."""
    before = torch.get_num_threads()
    wanted_threads = threads_per_rank(requested)
    if wanted_threads:
        torch.set_num_threads(wanted_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def refuse_shard_lines(args) -> None:
    """--shard-lines on the streaming path would be ignored: refused instead."""
    if args.shard_lines is not None:
        raise AttnmtError("--shard-lines works from -i FILE into -o FILE (regular files) or under torchrun; "
                          "here the lines stream: drop it, or give both files")

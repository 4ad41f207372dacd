"""Ranks of a torch.distributed job, forked here for the tests (gloo on 127.0.0.1), each with a hard
time limit: nothing may hang CI. The importing test module imports what the ranks need before
they fork (torch, safetensors, sacrebleu, ...), so a forked rank imports nothing."""

from __future__ import annotations

import os
import sys
import time
import traceback

import torch.multiprocessing as mp

from support.servers import free_port

RANKS_TIMEOUT_S = 120  # hard limit for every multi-process run: nothing may hang CI


def _rank_main(rank, world_size, port, target, args):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    try:
        code = target(rank, *args)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)  # skip pytest's exit handlers in the child


def run_ranks(target, *args, world_size=2, timeout=RANKS_TIMEOUT_S) -> list[int]:
    """Run target(rank, *args) on `world_size` forked ranks; return their exit codes. Ranks still
    running after `timeout` seconds are killed and the test fails."""
    ctx = mp.get_context("fork")
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(rank, world_size, port, target, args)) for rank in range(world_size)]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    hung = [proc for proc in procs if proc.is_alive()]
    for proc in hung:
        proc.kill()
        proc.join()
    assert not hung, f"{len(hung)} rank(s) still running after {timeout} s"
    return [proc.exitcode for proc in procs]

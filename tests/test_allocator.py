"""allocator.keep_freed_memory: glibc's malloc serves big blocks from its heap and keeps them.

Each check runs in a fresh Python process (the setting is process-wide) and reads glibc's own
accounting, mallinfo2(3): `hblkhd` counts the bytes in blocks with a mapping of their own, `arena`
the bytes of the heap. The expected values come from those counters, not from attnmt."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import subprocess
import sys

import pytest

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
pytestmark = pytest.mark.skipif(not GLIBC or not hasattr(ctypes.CDLL(None), "mallinfo2"),
                                reason="mallopt is glibc's, mallinfo2 glibc 2.33's and later")

PROBE = r"""
import ctypes, json, sys
import torch
from attnmt.allocator import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "train":                # `attnmt train` in this process, refused after its start
    from attnmt import cli
    applied = cli.main(["train", "--resume", sys.argv[2]])
else:
    applied = keep_freed_memory() if sys.argv[1] == "keep" else None
SIZE = 100 << 20                       # a 100 MiB block, like a batch's logits
before = libc.mallinfo2()
block = libc.malloc(SIZE)
ctypes.memset(block, 1, SIZE)          # touch it, as a tensor's values would
held = libc.mallinfo2()
libc.free(block)
freed = libc.mallinfo2()
tensor = torch.ones(SIZE // 4)         # and a tensor of that size, through PyTorch's CPU allocator
by_torch = libc.mallinfo2()
print(json.dumps(dict(applied=applied, mapped_held=held.hblkhd - before.hblkhd, heap_held=held.arena - before.arena,
                      heap_after_free=freed.arena - before.arena, mapped_by_torch=by_torch.hblkhd - freed.hblkhd)))
"""
MIB = 1 << 20


def _probe(mode: str, *args: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, mode, *args], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_glibc_maps_a_big_block_of_its_own_by_default():
    found = _probe("default")
    assert found["mapped_held"] >= 100 * MIB    # a mapping of its own ...
    assert found["heap_after_free"] < 100 * MIB  # ... not the heap's
    assert found["mapped_by_torch"] >= 100 * MIB


def test_keep_freed_memory_serves_it_from_the_heap_and_keeps_it():
    found = _probe("keep")
    assert found["applied"] is True
    assert found["mapped_held"] == 0 and found["mapped_by_torch"] == 0
    assert found["heap_held"] >= 100 * MIB
    assert found["heap_after_free"] >= 100 * MIB  # freed, and kept for the next update


def test_attnmt_malloc_system_keeps_the_defaults():
    found = _probe("keep", ATTNMT_MALLOC="system")
    assert found["applied"] is False
    assert found["mapped_held"] >= 100 * MIB


def test_attnmt_train_asks_for_it_first(tmp_path):
    """`attnmt train` (here refused at once: no such run) has set glibc's malloc by then: the
    process's next 100 MiB block comes from the heap and stays there, as keep_freed_memory makes it
    (before: keep_freed_memory was replaced by a lambda, so nothing showed that glibc changed)."""
    found = _probe("train", str(tmp_path / "no-run"))
    assert found["applied"] == 2  # the command was refused after its start ...
    assert found["mapped_held"] == 0 and found["mapped_by_torch"] == 0  # ... with glibc set as keep_freed_memory sets it
    assert found["heap_after_free"] >= 90 * MIB  # kept (less what the heap already had free: the command ran first)
    system = _probe("train", str(tmp_path / "no-run"), ATTNMT_MALLOC="system")
    assert system["applied"] == 2 and system["mapped_held"] >= 100 * MIB  # the defaults, when asked


def test_an_unknown_attnmt_malloc_is_refused_naming_the_variable(tmp_path, monkeypatch, capsys):
    from attnmt import cli

    monkeypatch.setenv("ATTNMT_MALLOC", "sytem")  # refused before glibc is asked anything
    assert cli.main(["train", "--resume", str(tmp_path / "no-run")]) == 2
    err = capsys.readouterr().err
    assert "ATTNMT_MALLOC='sytem'" in err and "keep or system" in err and "Traceback" not in err

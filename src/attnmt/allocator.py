"""The C allocator of a training process: keep the memory an update frees for the next one.

glibc's malloc gives every block above its mmap threshold (32 MiB at most) a mapping of its own
and unmaps it when it is freed, and gives freed memory at the top of its heap back to the system.
A Transformer's logits are such blocks (tokens x vocabulary floats: 131 MB for 4,096 target tokens
and 8,000 types), and so are their log-probabilities and gradients: at every update they are
mapped, faulted in page by page by the kernel, and unmapped again. On a 2-core Intel Xeon that
was a fifth of a CPU Transformer-tiny's training time (docs/performance.md, "The C allocator").

    keep_freed_memory()        # True: glibc now serves every block from its heap and keeps it

`attnmt train` calls it at start; `ATTNMT_MALLOC=system` leaves glibc's defaults. The price is
that the process keeps its peak memory until it ends, as tcmalloc and jemalloc (which need no
call: `LD_PRELOAD` one of them instead) and PyTorch's CUDA allocator do. Elsewhere (macOS,
Windows, musl) the call does nothing and says so.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

from attnmt.errors import AttnmtError

log = logging.getLogger(__name__)

# mallopt(3) parameters, from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1   # free memory at the top of the heap above this is given back to the system
M_MMAP_MAX = -4         # how many blocks may have their own mapping at once (0: none)
KEEP_ALL = 2**31 - 1    # mallopt takes an int: a trim threshold no heap reaches here
ENV = "ATTNMT_MALLOC"   # "keep" (also when unset) or "system": leave the C allocator's defaults
CHOICES = ("keep", "system")


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory: no block gets a mapping of its own, and the heap is
    never trimmed. Returns True where it was set, False where nothing was done (not Linux with
    glibc, or `ATTNMT_MALLOC=system`).

    Raises:
        AttnmtError: `ATTNMT_MALLOC` is set to something else than keep or system; names the variable.
    """
    choice = os.environ.get(ENV, "").strip().lower() or "keep"
    if choice not in CHOICES:
        raise AttnmtError(f"{ENV}={os.environ[ENV]!r} must be {' or '.join(CHOICES)} (or unset: keep)")
    if choice == "system":
        log.info("%s=system: the C allocator keeps its defaults", ENV)
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, KEEP_ALL) == 1  # mallopt: 1 = done
    if done:
        log.info("C allocator: freed memory is kept for reuse (%s=system to keep glibc's defaults)", ENV)
    return done

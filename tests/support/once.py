"""Session fixtures built once per test session, not once per pytest-xdist worker.

    run = once(tmp_path_factory, "toy_run", lambda folder: train(folder))   # a Path inside this worker's copy

A session-scoped fixture runs once in each worker process, so under `pytest -n 2` every tiny
training of a shared fixture ran twice, one core each. `once` lets the first worker that needs it
build it in a folder of the session's common temporary root, under a file lock (the others wait
for it), and gives every worker a copy of that folder of its own: a test may still write into what
its fixture returns (a calibration, a copy of a config) without another worker seeing it. Without
xdist it builds straight into a folder of this process.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Callable


def once(tmp_path_factory, name: str, build: Callable[[Path], object]):
    """What `build(folder)` returns (a Path inside `folder`, or a list of them), for a copy of the
    folder it filled that is this worker's own; `build` runs once per session under `name`."""
    own = tmp_path_factory.mktemp(name)
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return build(own)
    common = tmp_path_factory.getbasetemp().parent / "built-once"  # the session's root, shared by its workers
    common.mkdir(exist_ok=True)
    folder, done = common / name, common / f"{name}.done"
    with open(common / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when this worker dies
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed in another worker
            folder.mkdir()
            built = build(folder)
            paths = built if isinstance(built, list) else [built]
            done.write_text(json.dumps({"list": isinstance(built, list),
                                        "paths": [str(Path(p).relative_to(folder)) for p in paths]}), encoding="utf-8")
    shutil.copytree(folder, own, symlinks=True, dirs_exist_ok=True)
    record = json.loads(done.read_text(encoding="utf-8"))
    paths = [own / relative for relative in record["paths"]]
    return paths if record["list"] else paths[0]

"""`attnmt average RUN_DIR --last N [-o FILE [--force]]`: the mean of the last N validated checkpoints;
without -o it goes into the run (checkpoints/average_lastN.safetensors) and average.json points to
it. Writing into the run, it takes the run's one-writer lock (files.writer_lock): never beside a
training. -o names a file outside the run (files.refuse_overwrite); an existing one is replaced
only with --force, and only when it is an earlier average."""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path

from attnmt.commands.arguments import positive_int
from attnmt.errors import AttnmtError
from attnmt.files import refuse_overwrite, writer_lock

HELP = "average the weights of several checkpoints of one run"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir")
    parser.add_argument("--last", type=positive_int, default=5,
                        help="average the last N validated checkpoints by update: checkpoints/epoch_*, and "
                             "step_* (every train.validate_every updates, or train.max_updates reached mid-epoch)")
    parser.add_argument("-o", "--output", default=None,
                        help="a file outside the run (default: checkpoints/average_lastN.safetensors in the run, "
                             "named by average.json)")
    parser.add_argument("--force", action="store_true", help="replace an earlier average at -o (and nothing else)")


def run(args) -> int:
    from attnmt.checkpoint import average_weights, save_tensors
    from attnmt.run_dir import RunDir

    run_dir = RunDir(args.run_dir)
    found = run_dir.checkpoints()
    paths = found[-args.last:]
    if not paths:
        raise AttnmtError(f"{run_dir.path}: no validated checkpoints (checkpoints/epoch_*.safetensors, "
                          f"step_*.safetensors) to average")
    out = (Path(args.output) if args.output
           else run_dir.path / "checkpoints" / f"average_last{len(paths)}.safetensors")
    if args.output:  # a file of the user's: never over the run it reads, nor over a file that is not an average
        refuse_overwrite(out, {f"checkpoint {p.name}": p for p in paths}, {"run": run_dir.path})
        refuse_replacing_file(out, force=args.force)
    into_run = out.resolve().is_relative_to(run_dir.path.resolve())
    with writer_lock(run_dir.path) if into_run else nullcontext():
        digest = save_tensors(average_weights(paths), out, metadata={"averaged": ",".join(p.name for p in paths)})
        if not args.output:
            run_dir.write_pointer("average", {"file": str(out.relative_to(run_dir.path)), "sha256": digest,
                                              "from": [p.name for p in paths]})
    if len(paths) < args.last:  # asked for more than there is: say so
        print(f"attnmt average: note: asked for the last {args.last} checkpoints; {run_dir.path} has "
              f"{len(found)}: averaged {len(found)}", file=sys.stderr)
    print(f"averaged {len(paths)} checkpoint{'s' if len(paths) != 1 else ''} -> {out}")
    return 0


def refuse_replacing_file(out: Path, *, force: bool) -> None:
    """-o over an existing file only with --force, and then only over an earlier average as it
    was written: a safetensors file whose own record (its metadata) says `averaged` and holds the
    digest of its tensors, which they still match (checkpoint.load_weights_file checks it); never
    a link, a folder, a file with another name's content, or anything else (files.refuse_replacing_file).

    Raises:
        AttnmtError: naming the file and why.
    """
    from attnmt.files import refuse_replacing_file as refuse

    refuse(out, force=force, earlier="an earlier average", ours=_an_unchanged_average,
           not_ours="an earlier average as `attnmt average` wrote it (a safetensors file recording `averaged` and "
                    "its tensors' digest, unchanged)")


def _an_unchanged_average(out: Path) -> bool:
    from attnmt.checkpoint import DIGEST_KEY, load_weights_file, recorded_metadata
    from attnmt.errors import CheckpointError

    try:
        metadata = recorded_metadata(out) if not out.is_symlink() and out.is_file() else {}
        if "averaged" in metadata and DIGEST_KEY in metadata:
            load_weights_file(out)  # the tensors still those it recorded
            return True
    except CheckpointError:
        pass
    return False

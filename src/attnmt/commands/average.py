"""`attnmt average RUN_DIR --last N [-o FILE]`: the mean of the last N validated checkpoints; without -o
it goes into the run (checkpoints/average_lastN.safetensors) and average.json points to it."""

from __future__ import annotations

from pathlib import Path

from attnmt.checkpoint import average_weights, save_tensors
from attnmt.errors import AttnmtError
from attnmt.run_dir import RunDir


def run(args) -> int:
    run_dir = RunDir(args.run_dir)
    paths = run_dir.checkpoints()[-args.last:]
    if not paths:
        raise AttnmtError(f"{run_dir.path}: no validated checkpoints (checkpoints/epoch_*.safetensors, "
                          f"step_*.safetensors) to average")
    out = (Path(args.output) if args.output
           else run_dir.path / "checkpoints" / f"average_last{len(paths)}.safetensors")
    digest = save_tensors(average_weights(paths), out, metadata={"averaged": ",".join(p.name for p in paths)})
    if not args.output:
        run_dir.write_pointer("average", {"file": str(out.relative_to(run_dir.path)), "sha256": digest,
                                          "from": [p.name for p in paths]})
    print(f"averaged {len(paths)} checkpoints -> {out}")
    return 0

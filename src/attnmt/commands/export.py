"""`attnmt export RUN_DIR -o DIR [--quantization Q] [--attention-layer L]`; without -o the folder is
RUN_DIR-ct2-Q beside the run."""

from __future__ import annotations

from attnmt.engines.ctranslate2_export import export_run
from attnmt.errors import AttnmtError


def run(args) -> int:
    if args.format != "ctranslate2":
        raise AttnmtError(f"--format {args.format!r}: only 'ctranslate2' is supported")
    output = args.output or str(args.run_dir).rstrip("/") + f"-ct2-{args.quantization}"
    out = export_run(args.run_dir, output, checkpoint=args.checkpoint, quantization=args.quantization,
                     attention_layer=args.attention_layer, force=args.force)
    print(f"exported {args.run_dir} ({args.quantization}) -> {out}")
    return 0

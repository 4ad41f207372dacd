"""`attnmt export RUN_DIR -o DIR [--quantization Q] [--attention-layer L]`; without -o the folder is
RUN_DIR-ct2-Q beside the run. `--format hf`: a Marian model folder for `transformers` (RUN_DIR-hf)."""

from __future__ import annotations

from attnmt.errors import AttnmtError


def run(args) -> int:
    from attnmt.engines.ctranslate2_export import export_run

    if args.format == "hf":
        from attnmt.interop.marian import export_marian

        if args.quantization != "float32" or args.attention_layer != -1:
            raise AttnmtError("--quantization and --attention-layer apply to --format ctranslate2 only")
        out = export_marian(args.run_dir, args.output or str(args.run_dir).rstrip("/") + "-hf",
                            checkpoint=args.checkpoint, force=args.force)
        print(f"exported {args.run_dir} (Marian, transformers) -> {out}")
        return 0
    if args.format != "ctranslate2":
        raise AttnmtError(f"--format {args.format!r}: expected 'ctranslate2' or 'hf'")
    output = args.output or str(args.run_dir).rstrip("/") + f"-ct2-{args.quantization}"
    out = export_run(args.run_dir, output, checkpoint=args.checkpoint, quantization=args.quantization,
                     attention_layer=args.attention_layer, force=args.force)
    print(f"exported {args.run_dir} ({args.quantization}) -> {out}")
    return 0

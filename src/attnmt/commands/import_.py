"""`attnmt import HF_FOLDER -o RUN_DIR [--src-lang L --tgt-lang L] [--overwrite]`: a Marian (OPUS-MT)
model folder in the Hugging Face layout -> an attnmt run directory (interop/marian.py)."""

from __future__ import annotations


def run(args) -> int:
    from attnmt.interop.marian import import_marian

    run_dir = import_marian(args.folder, args.output, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                            overwrite=args.overwrite)
    print(f"imported {args.folder} -> {run_dir.path} (translate, serve, evaluate, export it, or fine-tune it "
          f"with train.init_from: {run_dir.path})")
    return 0

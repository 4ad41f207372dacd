"""`attnmt import HF_FOLDER -o RUN_DIR [--src-lang L --tgt-lang L] [--overwrite]`: a Marian (OPUS-MT)
model folder in the Hugging Face layout -> an attnmt run directory (interop/marian.py)."""

from __future__ import annotations

import argparse

HELP = "a Marian (OPUS-MT) model folder in the Hugging Face layout -> a run"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="HF_FOLDER",
                        help="config.json, model.safetensors, source.spm, target.spm, vocab.json (e.g. from "
                             "`huggingface-cli download Helsinki-NLP/opus-mt-de-en --local-dir opus-mt-de-en`)")
    parser.add_argument("-o", "--output", required=True, metavar="RUN_DIR", help="the run directory to write")
    parser.add_argument("--src-lang", default=None, help="source language (default: tokenizer_config.json's)")
    parser.add_argument("--tgt-lang", default=None, help="target language (default: tokenizer_config.json's)")
    parser.add_argument("--overwrite", action="store_true", help="replace the run RUN_DIR holds")


def run(args) -> int:
    from attnmt.interop.marian import import_marian

    run_dir = import_marian(args.folder, args.output, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                            overwrite=args.overwrite)
    print(f"imported {args.folder} -> {run_dir.path} (translate, serve, evaluate, export it, or fine-tune it "
          f"with train.init_from: {run_dir.path})")
    return 0

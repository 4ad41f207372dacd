"""`attnmt import HF_FOLDER -o RUN_DIR [--src-lang L --tgt-lang L] [--overwrite]`: a Marian (OPUS-MT)
model folder in the Hugging Face layout -> an attnmt run directory (interop/marian.py).
`attnmt import PACKAGE.argosmodel -o DIR [--overwrite]`: an Argos Translate package -> a folder the
CTranslate2 engine loads, as an `attnmt export` folder (interop/argos/importing.py)."""

from __future__ import annotations

import argparse

HELP = "a Marian (OPUS-MT) model folder in the Hugging Face layout, or an Argos Translate package -> a model"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="HF_FOLDER|PACKAGE",
                        help="config.json, model.safetensors, source.spm, target.spm, vocab.json (e.g. from "
                             "`huggingface-cli download Helsinki-NLP/opus-mt-de-en --local-dir opus-mt-de-en`), or "
                             "an Argos Translate package (a .argosmodel file)")
    parser.add_argument("-o", "--output", required=True, metavar="RUN_DIR", help="the run directory to write")
    parser.add_argument("--src-lang", default=None, help="source language (default: tokenizer_config.json's)")
    parser.add_argument("--tgt-lang", default=None, help="target language (default: tokenizer_config.json's)")
    parser.add_argument("--overwrite", action="store_true", help="replace the run RUN_DIR holds")


def run(args) -> int:
    from attnmt.interop.argos.importing import is_package

    if is_package(args.folder):
        return _run_argos(args)
    from attnmt.interop.marian import import_marian

    run_dir = import_marian(args.folder, args.output, src_lang=args.src_lang, tgt_lang=args.tgt_lang,
                            overwrite=args.overwrite)
    print(f"imported {args.folder} -> {run_dir.path} (translate, serve, evaluate, export it, or fine-tune it "
          f"with train.init_from: {run_dir.path})")
    return 0


def _run_argos(args) -> int:
    from attnmt.errors import AttnmtError
    from attnmt.interop.argos.importing import import_argos

    if args.src_lang or args.tgt_lang:
        raise AttnmtError("--src-lang / --tgt-lang apply to a Marian folder; an Argos package names its languages "
                          "(metadata.json)")
    run = import_argos(args.folder, args.output, overwrite=args.overwrite)
    print(f"imported {args.folder} -> {run.path} (a CTranslate2 model: translate and evaluate it with --engine "
          f"ctranslate2, serve it, or distill from it)")
    return 0

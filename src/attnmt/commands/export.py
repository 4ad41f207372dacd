"""`attnmt export RUN_DIR -o DIR [--quantization Q] [--attention-layer L]`; without -o the folder is
RUN_DIR-ct2-Q beside the run. `--format hf`: a Marian model folder for `transformers` (RUN_DIR-hf).
`--format argos`: an Argos Translate package (RUN_DIR-de_en.argosmodel; int8 unless --quantization;
a multilingual run: a folder of one package per direction, RUN_DIR-argos), from a run or from a
CTranslate2 export (interop/argos/export.py).
`--vocab-map` adds vmap.txt, CTranslate2's vocabulary shortlist from the run's training data
(engines/vocab_map.py: --vocab-map-top-k targets per source token by co-occurrence, plus the
--vocab-map-frequent most frequent target tokens); the engine and `attnmt serve` use it."""

from __future__ import annotations

import argparse

from attnmt.commands.arguments import index_int, non_negative_int, positive_int
from attnmt.errors import AttnmtError

HELP = "write a CTranslate2 model folder for a Transformer run"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir")
    parser.add_argument("-o", "--output", default=None,
                        help="output folder (default: RUN_DIR-ct2-QUANTIZATION, or RUN_DIR-hf)")
    parser.add_argument("--format", default="ctranslate2", choices=["ctranslate2", "hf", "argos"],
                        help="ctranslate2; hf: a Marian model folder that transformers loads; argos: an Argos Translate "
                             "package (.argosmodel) for argostranslate and LibreTranslate")
    parser.add_argument("--quantization", default=None,
                        choices=["int8", "int8_float32", "int16", "float16", "float32"],
                        help="CTranslate2's weights (default: float32; int8 for --format argos)")
    parser.add_argument("--attention-layer", type=index_int, default=-1,
                        help="decoder layer whose cross-attention (averaged over heads) the export reports")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--force", action="store_true", help="replace an earlier export at the output")
    parser.add_argument("--package-version", default="1.0", metavar="V",
                        help="--format argos: the package's version (metadata.json package_version; default 1.0)")
    parser.add_argument("--vocab-map", action="store_true",
                        help="also write vmap.txt, a vocabulary shortlist from the run's training data (CTranslate2 "
                             "decodes with it: use_vmap)")
    parser.add_argument("--vocab-map-top-k", type=positive_int, default=50, metavar="K",
                        help="target tokens per source token in the map (by co-occurrence; default 50)")
    parser.add_argument("--vocab-map-frequent", type=non_negative_int, default=100, metavar="N",
                        help="the N most frequent target tokens, always allowed (default 100)")


def run(args) -> int:
    from attnmt.engines.ctranslate2_export import export_run

    if args.format == "argos":
        return _run_argos(args)
    if args.format == "hf":
        from attnmt.interop.marian import export_marian

        if args.quantization not in (None, "float32") or args.attention_layer != -1 or args.vocab_map:
            raise AttnmtError("--quantization, --attention-layer and --vocab-map apply to --format ctranslate2 only")
        out = export_marian(args.run_dir, args.output or str(args.run_dir).rstrip("/") + "-hf",
                            checkpoint=args.checkpoint, force=args.force)
        print(f"exported {args.run_dir} (Marian, transformers) -> {out}")
        return 0
    if args.format != "ctranslate2":
        raise AttnmtError(f"--format {args.format!r}: expected 'ctranslate2' or 'hf'")
    if args.package_version != "1.0":
        raise AttnmtError("--package-version applies to --format argos only")
    quantization = args.quantization or "float32"
    output = args.output or str(args.run_dir).rstrip("/") + f"-ct2-{quantization}"
    out = export_run(args.run_dir, output, checkpoint=args.checkpoint, quantization=quantization,
                     attention_layer=args.attention_layer, force=args.force, vocab_map=_vocab_map(args))
    print(f"exported {args.run_dir} ({quantization}) -> {out}")
    return 0


def _vocab_map(args):
    if not args.vocab_map:
        return None
    from attnmt.engines.vocab_map import VocabMapSettings

    return VocabMapSettings(top_k=args.vocab_map_top_k, frequent=args.vocab_map_frequent)


def _run_argos(args) -> int:
    from attnmt.interop.argos.export import default_output, export_argos

    if args.attention_layer != -1:
        raise AttnmtError("--attention-layer applies to --format ctranslate2 only (an Argos package reports the "
                          "last decoder layer's attention to attnmt)")
    output = args.output or default_output(args.run_dir)
    written = export_argos(args.run_dir, output, checkpoint=args.checkpoint, quantization=args.quantization,
                           force=args.force, vocab_map=_vocab_map(args), version=args.package_version)
    for path in written:
        print(f"exported {args.run_dir} (Argos package) -> {path}")
    return 0

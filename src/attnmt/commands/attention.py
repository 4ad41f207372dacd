"""`attnmt attention RUN_DIR "sentence" -o heatmap.png`: translate one sentence, draw its attention."""

from __future__ import annotations

import argparse

from attnmt.commands.arguments import IMAGE_FORMATS, add_engine_arg, beam_size, decoding_options, image_path, index_int
from attnmt.errors import AttnmtError
from attnmt.files import refuse_overwrite
from attnmt.plotting import plot_attention

HELP = "draw the attention heatmap of one translation"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir")
    parser.add_argument("sentence")
    parser.add_argument("-o", "--output", type=image_path, default="attention.png",
                        help=f"image file ({', '.join(IMAGE_FORMATS)})")
    parser.add_argument("--beam", type=beam_size, default=None, help="beam size (default: the model's search.beam_size)")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--layer", type=index_int, default=None, help="Transformer: layer index (default: average)")
    parser.add_argument("--head", type=index_int, default=None, help="Transformer: head index (default: average)")
    add_engine_arg(parser)


def run(args) -> int:
    from attnmt.translator import Translator

    refuse_overwrite(args.output, {}, {"run": args.run_dir})  # before any work
    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, engine=args.engine)
    result = translator.translate([args.sentence], decoding_options(args))[0]
    if not result.source_tokens:
        raise AttnmtError("the sentence is empty: nothing to attend to")
    out = plot_attention(result.attention, result.source_tokens, result.tokens, args.output, title=result.text)
    print(result.text)
    print(f"wrote {out}")
    return 0

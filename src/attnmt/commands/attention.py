"""`attnmt attention RUN_DIR "sentence" -o heatmap.png`: translate one sentence, draw its attention."""

from __future__ import annotations

from attnmt.errors import AttnmtError
from attnmt.plotting import plot_attention


def run(args) -> int:
    from attnmt.translator import Translator

    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, engine=args.engine)
    result = translator.translate([args.sentence], beam_size=args.beam, layer=args.layer, head=args.head)[0]
    if not result.source_tokens:
        raise AttnmtError("the sentence is empty: nothing to attend to")
    out = plot_attention(result.attention, result.source_tokens, result.tokens, args.output, title=result.text)
    print(result.text)
    print(f"wrote {out}")
    return 0

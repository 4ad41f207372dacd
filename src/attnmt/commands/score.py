"""`attnmt score RUN_DIR [RUN_DIR ...] -i SOURCE -r TRANSLATION`: per line 'log_prob<TAB>normalized<TAB>tokens'
(forced decoding; normalized = log_prob / tokens; tokens count <eos>)."""

from __future__ import annotations

from attnmt.commands.text_io import open_output, read_file
from attnmt.errors import AttnmtError
from attnmt.translator import Translator


def run(args) -> int:
    sources = read_file(args.input)
    targets = read_file(args.reference)
    if len(sources) != len(targets):
        raise AttnmtError(f"{args.input} has {len(sources)} lines, {args.reference} has {len(targets)}")
    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device, engine=args.engine)
    with open_output(args.output) as target:
        for result in translator.score(sources, targets, batch_size=args.batch_size):
            target.write(f"{result.log_prob:.6f}\t{result.normalized:.6f}\t{result.num_tokens}\n")
    return 0

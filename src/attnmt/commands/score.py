"""`attnmt score RUN_DIR [RUN_DIR ...] -i SOURCE -r TRANSLATION`: per line 'log_prob<TAB>normalized<TAB>tokens'
(forced decoding; normalized = log_prob / tokens; tokens count <eos>). With -o FILE, and on every
rank under torchrun, the pairs are scored in shards of --shard-lines lines that survive a kill
(commands/file_jobs.py, sharding.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from attnmt.commands.arguments import add_engine_arg, add_language_args, add_shard_args, positive_int
from attnmt.commands.text_io import open_output, read_file, read_lines
from attnmt.errors import AttnmtError

if TYPE_CHECKING:
    from attnmt.sharding import Work
    from attnmt.translator import Translator

HELP = "score given translations: log-prob, normalized score, tokens per line"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", nargs="+", metavar="RUN_DIR", help="a run; several runs are decoded as one ensemble (native engine)")
    parser.add_argument("-i", "--input", required=True, help="source sentences, one per line")
    parser.add_argument("-r", "--reference", required=True, help="their translations, one per line")
    parser.add_argument("-o", "--output", default=None)
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    add_language_args(parser)
    add_engine_arg(parser)
    add_shard_args(parser)


def run(args) -> int:
    from attnmt.commands import file_jobs
    from attnmt.translator import Translator

    file_jobs.refuse_overwriting_inputs(args.output, {"input (-i)": args.input, "reference": args.reference},
                                        args.run_dir)
    if file_jobs.wanted(args):
        languages = dict(source_lang=args.source_lang, target_lang=args.target_lang)
        return file_jobs.run(args, [args.input, args.reference], languages,
                             lambda translator: _work(translator, args.batch_size, languages))
    file_jobs.refuse_shard_lines(args)
    sources = read_file(args.input)
    targets = read_file(args.reference)
    if len(sources) != len(targets):
        raise AttnmtError(f"{args.input} has {len(sources)} lines, {args.reference} has {len(targets)}")
    with file_jobs.torch_threads(args.threads):
        translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device, engine=args.engine)
        with open_output(args.output) as target:
            target.writelines(_score(translator, sources, targets, args.batch_size,
                                     dict(source_lang=args.source_lang, target_lang=args.target_lang)))
    return 0


def _score(translator: Translator, sources: list[str], targets: list[str], batch_size: int,
           languages: dict) -> list[str]:
    """One output line per pair."""
    return [f"{r.log_prob:.6f}\t{r.normalized:.6f}\t{r.num_tokens}\n"
            for r in translator.score(sources, targets, batch_size=batch_size, **languages)]


def _work(translator: Translator, batch_size: int, languages: dict) -> Work:
    """One shard's scores (sharding.py), in chunks of batch_size * 8 pairs. A language the model
    lacks is refused here, before the work folder is made."""
    chunk = batch_size * 8
    translator.target_language(**languages)

    def work(columns: list[list[bytes]]) -> list[str]:
        sources, targets = (list(read_lines(column)) for column in columns)
        return [line for start in range(0, len(sources), chunk)
                for line in _score(translator, sources[start:start + chunk], targets[start:start + chunk], batch_size,
                                   languages)]
    return work

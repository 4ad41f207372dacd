"""The `attnmt` command line: one sub-command per job.

    attnmt data stats      corpus statistics (sentences, tokens, vocab, OOV, lengths)
    attnmt train           train a model from a YAML config
    attnmt evaluate        BLEU / chrF / perplexity of a run on a split
    attnmt translate       translate stdin (or a file) line by line (n-best lists, sampling)
    attnmt score           the model's log-probability of given translations (forced decoding)
    attnmt export          write a CTranslate2 model folder for a Transformer run
    attnmt attention       draw an attention heatmap for one sentence
    attnmt average         average the weights of checkpoints
    attnmt demo            the README's main job

Each sub-command's work lives with the concept it serves; this module only parses arguments
and turns user errors (`AttnmtError`) into one clear line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from attnmt.errors import AttnmtError

# sub-command -> "module:function"; the function takes the parsed argparse.Namespace and
# returns an exit code. Imported lazily so that `attnmt --help` does not load torch.
COMMANDS = {
    "data stats": "attnmt.data.stats:stats_command",
    "train": "attnmt.training:train_command",
    "evaluate": "attnmt.translator:evaluate_command",
    "translate": "attnmt.translator:translate_command",
    "score": "attnmt.translator:score_command",
    "export": "attnmt.engines.ctranslate2:export_command",
    "attention": "attnmt.plotting:attention_command",
    "average": "attnmt.checkpoint:average_command",
    "demo": "attnmt.demo:demo_command",
}


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", default="multi30k", help="'multi30k' or a path prefix / TSV file of your own data")
    p.add_argument("--src-lang", default="de")
    p.add_argument("--tgt-lang", default="en")
    p.add_argument("--tokenizer", choices=["moses", "sentencepiece"], default="moses")
    p.add_argument("--lowercase", action="store_true", help="lowercase (moses tokenizer)")
    p.add_argument("--vocab-size", type=int, default=8000, help="sentencepiece vocabulary size")
    p.add_argument("--min-freq", type=int, default=2, help="minimum token frequency in the vocabulary")


def _add_engine_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["native", "ctranslate2"], default="native",
                   help="native: RUN_DIR is a training run; ctranslate2: RUN_DIR is a folder from `attnmt export`")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnmt", description="Attention-based neural machine translation.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="inspect corpora").add_subparsers(dest="data_command", required=True)
    stats = data.add_parser("stats", help="corpus statistics per split")
    _add_data_args(stats)
    stats.add_argument("--splits", nargs="+", default=None, help="splits to show (default: train val test)")

    train = sub.add_parser("train", help="train a model from a YAML config")
    train.add_argument("config", nargs="?", help="YAML config file (not needed with --resume)")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config value, e.g. --set train.lr=3e-4 (repeatable)")
    train.add_argument("--run-dir", default=None, help="where to write the run (default: runs/<config name>)")
    train.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue an interrupted run exactly")

    evaluate = sub.add_parser("evaluate", help="score a trained run on a split")
    evaluate.add_argument("run_dir")
    evaluate.add_argument("--split", default="test_2016_flickr")
    evaluate.add_argument("--beam", type=int, default=5, help="beam size (1 = greedy)")
    evaluate.add_argument("--length-penalty", type=float, default=None)
    evaluate.add_argument("--batch-size", type=int, default=128)
    evaluate.add_argument("--checkpoint", default="best", help="'best', 'last', 'average' (after attnmt average) or a checkpoint file")
    evaluate.add_argument("--device", default=None)
    _add_engine_arg(evaluate)

    translate = sub.add_parser("translate", help="translate lines from stdin (or -i) to stdout (or -o)")
    translate.add_argument("run_dir")
    translate.add_argument("-i", "--input", default=None)
    translate.add_argument("-o", "--output", default=None)
    translate.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy; default 5, 1 when sampling)")
    translate.add_argument("--length-penalty", type=float, default=None)
    translate.add_argument("--batch-size", type=int, default=64)
    translate.add_argument("--checkpoint", default="best")
    translate.add_argument("--device", default=None)
    _add_engine_arg(translate)
    translate.add_argument("--n-best", type=int, default=1, metavar="K",
                           help="print the K best: 'rank<TAB>score<TAB>text' lines, an empty line after each sentence")
    translate.add_argument("--sampling-topk", type=int, default=1, metavar="K",
                           help="sample from the K most probable tokens (0 = all; 1 = no sampling), e.g. for back-translation")
    translate.add_argument("--sampling-temperature", type=float, default=1.0, metavar="T")
    translate.add_argument("--seed", type=int, default=None, help="seed for sampling (repeatable output)")

    score = sub.add_parser("score", help="score given translations: log-prob, normalized score, tokens per line")
    score.add_argument("run_dir")
    score.add_argument("-i", "--input", required=True, help="source sentences, one per line")
    score.add_argument("-r", "--reference", required=True, help="their translations, one per line")
    score.add_argument("-o", "--output", default=None)
    score.add_argument("--batch-size", type=int, default=64)
    score.add_argument("--checkpoint", default="best")
    score.add_argument("--device", default=None)
    _add_engine_arg(score)

    export = sub.add_parser("export", help="write a CTranslate2 model folder for a Transformer run")
    export.add_argument("run_dir")
    export.add_argument("-o", "--output", default=None, help="output folder (default: RUN_DIR-ct2-QUANTIZATION)")
    export.add_argument("--format", default="ctranslate2", choices=["ctranslate2"])
    export.add_argument("--quantization", default="float32",
                        choices=["int8", "int8_float32", "int16", "float16", "float32"])
    export.add_argument("--attention-layer", type=int, default=-1,
                        help="decoder layer whose cross-attention (averaged over heads) the export reports")
    export.add_argument("--checkpoint", default="best")
    export.add_argument("--force", action="store_true", help="replace an existing output folder")

    attention = sub.add_parser("attention", help="draw the attention heatmap of one translation")
    attention.add_argument("run_dir")
    attention.add_argument("sentence")
    attention.add_argument("-o", "--output", default="attention.png")
    attention.add_argument("--beam", type=int, default=5)
    attention.add_argument("--checkpoint", default="best")
    attention.add_argument("--layer", default=None, help="Transformer: layer index (default: average)")
    attention.add_argument("--head", default=None, help="Transformer: head index (default: average)")
    _add_engine_arg(attention)

    average = sub.add_parser("average", help="average the weights of several checkpoints of one run")
    average.add_argument("run_dir")
    average.add_argument("--last", type=int, default=5, help="average the last N epoch checkpoints")
    average.add_argument("-o", "--output", default=None)

    demo = sub.add_parser("demo", help="the README's main job: train, evaluate, translate, draw")
    demo.add_argument("--config", default=None, help="config (default: full on GPU, quickstart on CPU)")
    demo.add_argument("--run-dir", default="runs/demo")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    name = "data stats" if args.command == "data" else args.command
    module_name, func_name = COMMANDS[name].split(":")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
        return int(func(args) or 0)
    except AttnmtError as err:
        print(f"attnmt {name}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attnmt {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

"""The `attnmt` command line: one sub-command per job.

    attnmt data stats      corpus statistics (sentences, tokens, vocab, OOV, lengths)
    attnmt prepare         tokenize a config's training data once, into the cache training reads
    attnmt train           train a model from a YAML config
    attnmt evaluate        BLEU / chrF / perplexity of a run on a split
    attnmt translate       translate stdin (or a file) line by line (n-best lists, sampling)
    attnmt score           the model's log-probability of given translations (forced decoding)
    attnmt export          write a CTranslate2 model folder for a Transformer run (or a Marian one: --format hf)
    attnmt import          a Marian (OPUS-MT) model folder in the Hugging Face layout -> a run
    attnmt attention       draw an attention heatmap for one sentence
    attnmt average         average the weights of checkpoints
    attnmt demo            the README's main job
    attnmt serve           HTTP service (LibreTranslate API + /v1) and the attention page
    attnmt compare         BLEU / chrF of several systems, paired significance tests against the first
    attnmt summarize       mean and standard deviation of test scores over runs (seeds)

Each verb is a module of attnmt.commands that turns the parsed arguments into typed library
calls; this module only builds the parser, dispatches, and turns user errors into one clear line
on stderr, `attnmt VERB: error: ...`, and exit code 2:

- values argparse can check (positive counts, integers, choices, image formats) it checks;
- `--device` is checked here against this machine (devices.py) before anything loads;
- `AttnmtError` (bad data, config, checkpoint, run directory) and `OSError` (a file that cannot
  be read or written) are user errors;
- a `ValueError` raised by a `raise` statement of attnmt's own argument checks (e.g. a
  Transformer layer index out of range) is misuse of a public entry point: one line too. A
  `ValueError` from anywhere else (torch, numpy, a builtin) is a bug and keeps its traceback,
  and with `-v` so do OS errors and attnmt's ValueErrors.
"""

from __future__ import annotations

import argparse
import importlib
import linecache
import logging
import os
import sys

from attnmt.commands.arguments import (IMAGE_FORMATS, MAX_PREPARE_WORKERS, MAX_WAIT_MS, _add_data_args, _add_engine_arg,
                                       _add_language_args, _add_shard_args, _add_workers_arg, beam_size, bounded,
                                       image_path, index_int, length_penalty, non_negative_float, non_negative_int,
                                       pair, positive_float, positive_int, seed_list)
from attnmt.config import packaged_configs
from attnmt.decoding import (MAX_BEAM, MAX_SAMPLING_TEMPERATURE, MAX_SAMPLING_TOPK, MAX_SEED,
                             MIN_SAMPLING_TEMPERATURE)
from attnmt.errors import AttnmtError
from attnmt.server.settings import MAX_EXPIRE_MINUTES, MAX_FILE_KB, MAX_FILES, MAX_SENTENCES

# sub-command -> "module:function" (commands/, one module per verb); the function takes the parsed
# argparse.Namespace and returns an exit code. Imported lazily so that `attnmt --help` does not load torch.
COMMANDS = {name: f"attnmt.commands.{module}:run" for name, module in (
    ("data stats", "data_stats"), ("prepare", "prepare"), ("train", "train"), ("evaluate", "evaluate"), ("translate", "translate"),
    ("score", "score"), ("export", "export"), ("attention", "attention"), ("average", "average"),
    ("demo", "demo"), ("serve", "serve"), ("compare", "compare"), ("summarize", "summarize"),
    ("import", "import_"))}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnmt", description="Attention-based neural machine translation.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_data, _add_prepare, _add_train, _add_evaluate, _add_translate, _add_score, _add_export, _add_attention,
                _add_average, _add_demo, _add_serve, _add_compare, _add_summarize, _add_import):
        add(sub)
    return parser


def _add_data(sub) -> None:
    data = sub.add_parser("data", help="inspect corpora").add_subparsers(dest="data_command", required=True)
    stats = data.add_parser("stats", help="corpus statistics per split")
    _add_data_args(stats)
    stats.add_argument("--splits", nargs="+", default=None, help="splits to show (default: train val test)")


def _add_prepare(sub) -> None:
    prepare = sub.add_parser("prepare", help="tokenize a config's training data once, into the cache (ATTNMT_CACHE)")
    prepare.add_argument("config", help="YAML config file, or the name of a packaged config "
                         f"({', '.join(packaged_configs())})")
    prepare.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                         help="override a config value, e.g. --set data.max_len=80 (repeatable)")
    prepare.add_argument("--workers", type=bounded(positive_int, high=MAX_PREPARE_WORKERS), default=None, metavar="N",
                         help="tokenizing processes (default: data.workers, else one per CPU; under torchrun, per rank)")


def _add_train(sub) -> None:
    train = sub.add_parser("train", help="train a model from a YAML config")
    train.add_argument("config", nargs="?", help="YAML config file, or the name of a packaged config "
                       f"({', '.join(packaged_configs())}); not needed with --resume")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config value, e.g. --set train.lr=3e-4 (repeatable)")
    train.add_argument("--run-dir", default=None, help="where to write the run (default: runs/<config name>)")
    train.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue an interrupted run exactly")
    train.add_argument("--overwrite", action="store_true",
                       help="start afresh in a --run-dir that holds a run, deleting that run's files")
    train.add_argument("--seeds", type=seed_list, default=None, metavar="S1,S2,...",
                       help="train one run per seed, one after the other, in RUN_DIR-seedS (train.seed=S)")


def _add_evaluate(sub) -> None:
    evaluate = sub.add_parser("evaluate", help="score a trained run on a split")
    evaluate.add_argument("run_dir", nargs="+", metavar="RUN_DIR", help="a run; several runs are decoded as one ensemble (native engine)")
    evaluate.add_argument("--split", default="test_2016_flickr")
    evaluate.add_argument("--beam", type=beam_size, default=5, help=f"beam size (1 = greedy; at most {MAX_BEAM})")
    evaluate.add_argument("--length-penalty", type=length_penalty, default=None)
    evaluate.add_argument("--batch-size", type=positive_int, default=128)
    evaluate.add_argument("--checkpoint", default="best", help="'best', 'last', 'average' (after attnmt average) or a checkpoint file")
    evaluate.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    evaluate.add_argument("--pair", type=pair, default=None, metavar="SRC-TGT",
                          help="a multilingual model's direction to evaluate, or 'all' (one report per direction)")
    _add_engine_arg(evaluate)
    _add_workers_arg(evaluate)


def _add_translate(sub) -> None:
    translate = sub.add_parser("translate", help="translate lines from stdin (or -i) to stdout (or -o)")
    translate.add_argument("run_dir", nargs="+", metavar="RUN_DIR", help="a run; several runs are decoded as one ensemble (native engine)")
    translate.add_argument("-i", "--input", default=None)
    translate.add_argument("-o", "--output", default=None)
    translate.add_argument("--beam", type=beam_size, default=None,
                           help=f"beam size (1 = greedy; at most {MAX_BEAM}; default 5, 1 when sampling)")
    translate.add_argument("--length-penalty", type=length_penalty, default=None)
    translate.add_argument("--batch-size", type=positive_int, default=64)
    translate.add_argument("--checkpoint", default="best")
    translate.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    _add_language_args(translate)
    _add_engine_arg(translate)
    translate.add_argument("--n-best", type=beam_size, default=1, metavar="K",
                           help="print the K best: 'rank<TAB>score<TAB>text' lines, an empty line after each sentence")
    _add_shard_args(translate)
    _add_workers_arg(translate)
    translate.add_argument("--sampling-topk", type=bounded(non_negative_int, high=MAX_SAMPLING_TOPK), default=1,
                           metavar="K",
                           help="sample from the K most probable tokens (0 = all; 1 = no sampling), e.g. for back-translation")
    temperature = bounded(positive_float, low=MIN_SAMPLING_TEMPERATURE, high=MAX_SAMPLING_TEMPERATURE)
    translate.add_argument("--sampling-temperature", type=temperature, default=1.0, metavar="T",
                           help=f"sampling temperature, {MIN_SAMPLING_TEMPERATURE:g}..{MAX_SAMPLING_TEMPERATURE:g}")
    translate.add_argument("--seed", type=bounded(non_negative_int, high=MAX_SEED), default=None,
                           help=f"seed for sampling (repeatable output), 0..{MAX_SEED}")
    translate.add_argument("--replace-unk", action=argparse.BooleanOptionalAction, default=None,
                           help="replace each <unk> by the source word it attends to most (default: "
                                "search.replace_unk; null = on for moses, off for sentencepiece)")
    translate.add_argument("--alignments", action="store_true",
                           help="append a tab and the word alignment in Pharaoh format ('0-0 1-2 ...': "
                                "source-output word indices, from attention)")
    translate.add_argument("--glossary", default=None, metavar="TERMS.TSV",
                           help="terminology: 'source phrase<TAB>target phrase' lines; where the source phrase "
                                "occurs in a sentence, the target phrase appears in its translation exactly once "
                                "(constrained search: native engine; greedy or beam)")


def _add_score(sub) -> None:
    score = sub.add_parser("score", help="score given translations: log-prob, normalized score, tokens per line")
    score.add_argument("run_dir", nargs="+", metavar="RUN_DIR", help="a run; several runs are decoded as one ensemble (native engine)")
    score.add_argument("-i", "--input", required=True, help="source sentences, one per line")
    score.add_argument("-r", "--reference", required=True, help="their translations, one per line")
    score.add_argument("-o", "--output", default=None)
    score.add_argument("--batch-size", type=positive_int, default=64)
    score.add_argument("--checkpoint", default="best")
    score.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    _add_language_args(score)
    _add_engine_arg(score)
    _add_shard_args(score)


def _add_export(sub) -> None:
    export = sub.add_parser("export", help="write a CTranslate2 model folder for a Transformer run")
    export.add_argument("run_dir")
    export.add_argument("-o", "--output", default=None,
                        help="output folder (default: RUN_DIR-ct2-QUANTIZATION, or RUN_DIR-hf)")
    export.add_argument("--format", default="ctranslate2", choices=["ctranslate2", "hf"],
                        help="ctranslate2, or hf: a Marian model folder that transformers loads")
    export.add_argument("--quantization", default="float32",
                        choices=["int8", "int8_float32", "int16", "float16", "float32"])
    export.add_argument("--attention-layer", type=index_int, default=-1,
                        help="decoder layer whose cross-attention (averaged over heads) the export reports")
    export.add_argument("--checkpoint", default="best")
    export.add_argument("--force", action="store_true", help="replace an existing output folder")


def _add_attention(sub) -> None:
    attention = sub.add_parser("attention", help="draw the attention heatmap of one translation")
    attention.add_argument("run_dir")
    attention.add_argument("sentence")
    attention.add_argument("-o", "--output", type=image_path, default="attention.png",
                           help=f"image file ({', '.join(IMAGE_FORMATS)})")
    attention.add_argument("--beam", type=beam_size, default=5)
    attention.add_argument("--checkpoint", default="best")
    attention.add_argument("--layer", type=index_int, default=None, help="Transformer: layer index (default: average)")
    attention.add_argument("--head", type=index_int, default=None, help="Transformer: head index (default: average)")
    _add_engine_arg(attention)


def _add_average(sub) -> None:
    average = sub.add_parser("average", help="average the weights of several checkpoints of one run")
    average.add_argument("run_dir")
    average.add_argument("--last", type=positive_int, default=5,
                         help="average the last N validated checkpoints by update: checkpoints/epoch_*, and "
                              "step_* (every train.validate_every updates, or train.max_updates reached mid-epoch)")
    average.add_argument("-o", "--output", default=None)


def _add_demo(sub) -> None:
    demo = sub.add_parser("demo", help="the README's main job: train, evaluate, translate, draw")
    demo.add_argument("--config", default=None, help="config file or packaged name (default: multi30k_rnn on a GPU, "
                      "quickstart_rnn on a CPU)")
    demo.add_argument("--run-dir", default="runs/demo", help="a new folder, or one an earlier demo made (replaced)")


def _add_serve(sub) -> None:
    serve = sub.add_parser("serve", help="serve runs over HTTP: LibreTranslate API, /v1 API, attention page")
    serve.add_argument("models", nargs="+", metavar="RUN_OR_EXPORT",
                       help="a run or a CTranslate2 export per language pair (one model each; runs joined by '+', "
                            "e.g. runs/a-seed1+runs/a-seed2, are one ensemble)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0: every interface)")
    serve.add_argument("--port", type=non_negative_int, default=8000)
    serve.add_argument("--max-wait-ms", type=bounded(non_negative_float, high=MAX_WAIT_MS), default=5.0,
                       help="how long a sentence waits for others to share its batch")
    serve.add_argument("--max-batch-sentences", type=positive_int, default=32, help="most sentences per model call (1: no batching)")
    serve.add_argument("--max-texts", type=positive_int, default=64, help="most texts per request (more: 413)")
    serve.add_argument("--beam", type=beam_size, default=None, help="default beam size (default: the run's)")
    serve.add_argument("--api-key", default=None, help="require this key (api_key field or X-API-Key header)")
    serve.add_argument("--cors-origin", default=None, help="allow cross-origin requests from this origin")
    serve.add_argument("--req-limit", type=positive_int, default=None, metavar="N",
                       help="at most N requests a minute per client and per API key (more: 429)")
    serve.add_argument("--suggestions", default=None, metavar="FILE",
                       help="turn POST /suggest on: append each suggestion to FILE as one JSON line")
    serve.add_argument("--max-sentences", type=bounded(positive_int, high=MAX_SENTENCES), default=1000,
                       help="most sentences in one request's HTML or in one file (more: 413)")
    serve.add_argument("--files-dir", default=None, metavar="DIR",
                       help="where /translate_file keeps translated files (default: a temporary folder, removed at exit)")
    serve.add_argument("--file-limit-kb", type=bounded(positive_int, high=MAX_FILE_KB), default=512,
                       help="largest file /translate_file takes, in kB (more: 413)")
    serve.add_argument("--files-expire-minutes", type=bounded(positive_float, high=MAX_EXPIRE_MINUTES), default=60.0,
                       help="how long a translated file can be downloaded")
    serve.add_argument("--max-files", type=bounded(positive_int, high=MAX_FILES), default=1000,
                       help="most translated files kept at once (more, none expired: 429)")
    serve.add_argument("--checkpoint", default="best")
    serve.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    serve.add_argument("--engine", choices=["native", "ctranslate2"], default=None,
                       help="for every model (default: per model, ctranslate2 for an `attnmt export` folder, "
                            "native for a training run)")


def _add_compare(sub) -> None:
    compare = sub.add_parser("compare", help="BLEU / chrF of several systems and paired significance tests "
                             "(bootstrap, approximate randomization) against the first")
    compare.add_argument("systems", nargs="*", metavar="SYSTEM", help="a run directory, an export (with --engine "
                         "ctranslate2) or runs joined by '+' (an ensemble); the first system is the baseline")
    compare.add_argument("--hyp", action="append", default=[], metavar="FILE",
                         help="a system given by its translations, one per line (repeatable; after the SYSTEMs)")
    compare.add_argument("--ref", default=None, metavar="FILE", help="references (default: the target side of --split)")
    compare.add_argument("--split", default="test_2016_flickr", help="the split the systems translate and are "
                         "scored on (the first system's data; Multi30k de-en with --hyp files only)")
    compare.add_argument("--beam", type=positive_int, default=5, help="beam size (1 = greedy)")
    compare.add_argument("--length-penalty", type=non_negative_float, default=None)
    compare.add_argument("--batch-size", type=positive_int, default=128)
    compare.add_argument("--checkpoint", default="best")
    compare.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    compare.add_argument("--pair", type=pair, default=None, metavar="SRC-TGT",
                         help="compare on one direction (a multilingual system needs it): its test files, each "
                              "system translating it")
    _add_engine_arg(compare)
    compare.add_argument("--paired-bs-n", type=positive_int, default=1000, metavar="N", help="bootstrap resamples")
    compare.add_argument("--paired-ar-n", type=positive_int, default=10000, metavar="N",
                         help="approximate randomization trials")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")


def _add_summarize(sub) -> None:
    summarize = sub.add_parser("summarize", help="mean and standard deviation of test BLEU / chrF over runs (seeds)")
    summarize.add_argument("runs", nargs="+", metavar="RUN_DIR", help="runs of one config, e.g. runs/x-seed*")
    summarize.add_argument("--split", default="test_2016_flickr")
    summarize.add_argument("--beam", type=positive_int, default=5, help="the beam of the scores (1 = greedy)")
    summarize.add_argument("--batch-size", type=positive_int, default=128)
    summarize.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    summarize.add_argument("--json", action="store_true", help="print the summary as JSON")


def _add_import(sub) -> None:
    imp = sub.add_parser("import", help="a Marian (OPUS-MT) model folder in the Hugging Face layout -> a run")
    imp.add_argument("folder", metavar="HF_FOLDER",
                     help="config.json, model.safetensors, source.spm, target.spm, vocab.json (e.g. from "
                          "`huggingface-cli download Helsinki-NLP/opus-mt-de-en --local-dir opus-mt-de-en`)")
    imp.add_argument("-o", "--output", required=True, metavar="RUN_DIR", help="the run directory to write")
    imp.add_argument("--src-lang", default=None, help="source language (default: tokenizer_config.json's)")
    imp.add_argument("--tgt-lang", default=None, help="target language (default: tokenizer_config.json's)")
    imp.add_argument("--overwrite", action="store_true", help="replace the run RUN_DIR holds")


def _raised_by_attnmt(err: BaseException) -> bool:
    """True when `err` comes from a `raise` statement in attnmt's own code: an explicit check of
    an argument. A ValueError from torch, numpy or a builtin (even one called by attnmt) is not."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or not str(tb.tb_frame.f_globals.get("__name__", "")).startswith("attnmt."):
        return False
    return linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).lstrip().startswith("raise ")


def _os_message(err: OSError) -> str:
    if err.filename is None:
        return str(err)
    reason = err.strerror or str(err)
    return f"{err.filename}: {reason}" if err.filename2 is None else f"{err.filename} -> {err.filename2}: {reason}"


def _refuse_ignored_options(args: argparse.Namespace) -> None:
    """Options that would be accepted and then ignored are refused."""
    if args.command == "train" and args.resume:
        ignored = [name for name, value in (("CONFIG", args.config), ("--run-dir", args.run_dir)) if value]
        if ignored:
            raise AttnmtError(f"--resume continues the run in {args.resume} with its saved config: "
                              f"drop {' and '.join(ignored)}")


def _refuse_nul(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """No file name (nor any other value) can hold a NUL character; the os functions would raise
    a bare ValueError on it, so it is refused here, naming the argument, for every verb."""
    for action in _verb_parser(parser, args)._actions:
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and "\x00" in v for v in values):
            raise AttnmtError(f"argument {argparse._get_action_name(action)}: contains a NUL character")


def _verb_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The sub-parser of the verb `args` were parsed by ('data stats' included)."""
    for dest in ("command", "data_command"):
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[getattr(args, dest)]
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            break
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    name = "data stats" if args.command == "data" else args.command
    module_name, func_name = COMMANDS[name].split(":")
    try:
        _refuse_nul(parser, args)
        _refuse_ignored_options(args)
        if getattr(args, "device", None) is not None:  # refuse a device this machine lacks before loading
            from attnmt.devices import resolve_device

            resolve_device(args.device, key="--device")
        func = getattr(importlib.import_module(module_name), func_name)
        return int(func(args) or 0)
    except AttnmtError as err:
        print(f"attnmt {name}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `attnmt translate ... | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as err:
        if args.verbose:
            raise
        print(f"attnmt {name}: error: {_os_message(err)}", file=sys.stderr)
        return 2
    except ValueError as err:
        if args.verbose or not _raised_by_attnmt(err):
            raise
        print(f"attnmt {name}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attnmt {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

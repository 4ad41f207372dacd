"""`attnmt data stats`: the options -> a `DataConfig` -> `data.stats.compute_stats`, printed as a
table, with what preparing the training data read, kept and dropped by each filter."""

from __future__ import annotations

import argparse

from attnmt.commands.arguments import add_data_args
from attnmt.config import DataConfig, config_from_dict, load_config
from attnmt.direction import names as direction_names
from attnmt.errors import ConfigError, DataError

HELP = "corpus statistics per split"


# config key -> the `attnmt data stats` option that sets it
FLAGS = {"data.src_lang": "--src-lang", "data.tgt_lang": "--tgt-lang", "data.spm_vocab_size": "--vocab-size",
         "data.min_freq": "--min-freq", "data.tokenizer": "--tokenizer", "data.lowercase": "--lowercase"}


def data_config(args: argparse.Namespace) -> DataConfig:
    """The `DataConfig` that the options describe (or that `--config` holds), validated as in training."""
    from attnmt.data.stats import own_data_spec

    options = {"--corpus": args.corpus, "--valid": args.valid, "--test": args.test, "--src-lang": args.src_lang,
               "--tgt-lang": args.tgt_lang, "--tokenizer": args.tokenizer, "--vocab-size": args.vocab_size,
               "--min-freq": args.min_freq}
    given = [flag for flag, value in options.items() if value is not None] + (["--lowercase"] if args.lowercase else [])
    if args.config:
        if given:
            raise DataError(f"--config takes the data settings from the config; drop {', '.join(given)}")
        return load_config(args.config).data
    defaults = DataConfig()
    tokenizer = args.tokenizer or defaults.tokenizer
    src_lang, tgt_lang = args.src_lang or defaults.src_lang, args.tgt_lang or defaults.tgt_lang
    data = {"src_lang": src_lang, "tgt_lang": tgt_lang, "tokenizer": tokenizer, "lowercase": args.lowercase,
            "spm_vocab_size": args.vocab_size or defaults.spm_vocab_size,
            "min_freq": args.min_freq or defaults.min_freq}
    corpus = args.corpus or "multi30k"
    if corpus == "multi30k":
        if args.valid or args.test:
            raise DataError("--valid and --test name own data; Multi30k has its splits (use --splits)")
    else:
        spec = own_data_spec(corpus, src_lang, tgt_lang, valid=args.valid, test=args.test)
        data.update(corpus="files", train=spec.train, valid=spec.valid, test=spec.test)
    try:
        return config_from_dict({"data": data}, source="options").data
    except ConfigError as err:  # name the option the user typed, not the config key it fills
        message = str(err).removeprefix("options: ")
        for key, flag in FLAGS.items():
            message = message.replace(key, flag)
        raise DataError(message) from None


def add_args(parser: argparse.ArgumentParser) -> None:
    add_data_args(parser)
    parser.add_argument("--splits", nargs="+", default=None, help="splits to show (default: train val test)")


def run(args: argparse.Namespace) -> int:
    """Print the statistics table of `attnmt data stats`; returns the exit code."""
    from attnmt.data.stats import compute_stats, format_counts, format_table

    d = data_config(args)
    stats = compute_stats(d, args.splits)
    corpus = "multi30k" if d.corpus == "multi30k" else ", ".join(c.path for c in d.train_corpora())
    tokenizer = d.tokenizer
    if d.tokenizer == "sentencepiece":
        tokenizer += f" ({d.spm_model_type}, {d.spm_vocab_size} pieces{', joint' if d.spm_joint else ''})"
    languages = direction_names(d.directions())
    print(f"corpus {corpus} {languages}, tokenizer {tokenizer}"
          f"{', lowercased' if d.lowercase else ''}; vocab built on train with min_freq={d.min_freq}"
          f"{f', max_vocab={d.max_vocab}' if d.max_vocab else ''}")
    print(format_table(stats.rows))
    if any(row.split == "train" for row in stats.rows):
        print()
        print(format_counts(stats))
    return 0

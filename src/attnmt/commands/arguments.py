"""The argument types and options that several verbs share; argparse checks them while parsing.

Caps of the library (beam, length penalty) come from decoding.py; the MAX_* below are the CLI's own.
"""

from __future__ import annotations

import argparse
import os

from attnmt.decoding import MAX_BEAM, MAX_LENGTH_PENALTY

# --------------------------------------------------------------------------- argument types
# argparse turns a ValueError/ArgumentTypeError from these into `attnmt VERB: error: argument X: ...`.

def _parse(text: str, cast: type, what: str):
    """`cast(text)`, or the argparse error that says `text` is not `what`."""
    try:
        return cast(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None


def positive_int(text: str) -> int:
    """An integer >= 1 (beam sizes, batch sizes, counts)."""
    value = _parse(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be a positive integer (1 or more)")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (e.g. a top-k where 0 means all)."""
    value = _parse(text, int, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be 0 or more")
    return value


def positive_float(text: str) -> float:
    """A finite float > 0 (temperatures, waiting times)."""
    value = _parse(text, float, "a number")
    if not 0 < value < float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value


def non_negative_float(text: str) -> float:
    """A finite float >= 0 (length penalties)."""
    value = _parse(text, float, "a number")
    if not value >= 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return value


def bounded(check, *, low: int | float | None = None, high: int | float | None = None):
    """`check`, then refuse values below `low` or above `high` (decoding.py's caps and the ones
    below), so that no value reaches the library that hangs it or overflows."""
    def parse(text: str):
        value = check(text)
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"{text} must be at least {low:g}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{text} must be at most {high:g}" if isinstance(high, float)
                                             else f"{text} must be at most {high}")
        return value
    parse.__name__ = check.__name__
    return parse


# Caps of the CLI's own (the decoding ones are decoding.py's, the same in the Python API and the service).
MAX_WAIT_MS = 60_000.0     # serve --max-wait-ms: longer, a lone request waits as if the server hung
MAX_VOCAB_SIZE = 1_000_000  # data stats --vocab-size: sentencepiece takes at most 2**31 - 1
MAX_SHARD_LINES = 1_000_000  # translate/score --shard-lines: a shard's outputs are held in memory
MAX_THREADS = 1024          # translate/score --threads (the same cap as train.num_threads)
MAX_WORKERS = 64            # translate/evaluate --workers: each one holds a copy of the model
MAX_PREPARE_WORKERS = 1024  # prepare --workers (the same cap as data.workers)

beam_size = bounded(positive_int, high=MAX_BEAM)
length_penalty = bounded(non_negative_float, high=MAX_LENGTH_PENALTY)


def index_int(text: str) -> int:
    """An integer index; negative ones count from the end (Transformer layers and heads)."""
    return _parse(text, int, "an integer index")


IMAGE_FORMATS = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps")


def image_path(text: str) -> str:
    """An output file whose suffix names an image format matplotlib writes."""
    if os.path.splitext(text)[1].lower() not in IMAGE_FORMATS:
        raise argparse.ArgumentTypeError(f"{text!r}: the file name must end in one of {', '.join(IMAGE_FORMATS)}")
    return text


def _add_data_args(p: argparse.ArgumentParser) -> None:
    """The data settings of `attnmt data stats`; unset ones take the config defaults (config.DataConfig)."""
    p.add_argument("--config", default=None, help="take every data setting from this config (file or packaged name)")
    p.add_argument("--corpus", default=None, help="'multi30k' (default), or own data as data.train names it: a path "
                   "prefix (data/train reads data/train.de, data/train.en), a folder holding train.<lang>, or a .tsv")
    p.add_argument("--valid", default=None, help="own validation data, as data.valid (default: found next to train)")
    p.add_argument("--test", default=None, help="own test data, as data.test (default: found next to train)")
    p.add_argument("--src-lang", default=None, help="default: de")
    p.add_argument("--tgt-lang", default=None, help="default: en")
    p.add_argument("--tokenizer", choices=["moses", "sentencepiece"], default=None, help="default: moses")
    p.add_argument("--lowercase", action="store_true", help="lowercase all text (as data.lowercase)")
    p.add_argument("--vocab-size", type=bounded(positive_int, high=MAX_VOCAB_SIZE), default=None,
                   help=f"sentencepiece pieces, at most {MAX_VOCAB_SIZE} (default: 8000)")
    p.add_argument("--min-freq", type=positive_int, default=None, help="minimum token frequency in the vocabulary "
                   "(default: 1, as data.min_freq)")


def _add_shard_args(p: argparse.ArgumentParser) -> None:
    """translate / score from a file into a file, or under torchrun: in resumable shards (sharding.py)."""
    p.add_argument("--shard-lines", type=bounded(positive_int, high=MAX_SHARD_LINES), default=None, metavar="N",
                   help="with -i FILE -o FILE (and under torchrun): work in shards of N lines (default 10000), kept "
                        "in OUT.shards/ until OUT is written, so a killed job resumes where it stopped")
    p.add_argument("--threads", type=bounded(positive_int, high=MAX_THREADS), default=None, metavar="N",
                   help="torch CPU threads (default: torch's choice; under torchrun, the CPUs shared among the "
                        "ranks of a node)")


def _add_workers_arg(p: argparse.ArgumentParser) -> None:
    """translate / evaluate: native decoding in N processes (workers.py)."""
    p.add_argument("--workers", type=bounded(positive_int, high=MAX_WORKERS), default=1, metavar="N",
                   help=f"decode in N worker processes (1..{MAX_WORKERS}, at most the CPUs usable), each with its own copy of the model and "
                        "its torch threads (translate: --threads; default: the CPUs shared among them); native engine on a CPU, "
                        "one process (not under torchrun). Default 1: on 2 cores, 2 workers decoded 1.09-1.17x faster "
                        "but start ~2 s later, so they win only past a few thousand sentences (docs/performance.md)")


def language(text: str) -> str:
    """A language code as a multilingual model names its languages (de, fra, pt_BR)."""
    from attnmt.config import LANG_CODE

    if not LANG_CODE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a language code (de, en, fra, pt_BR, ...)")
    return text


def pair(text: str) -> str:
    """A direction SRC-TGT (de-en), or 'all'."""
    if text != "all" and not (len(text.split("-")) == 2 and all(map(_is_language, text.split("-")))):
        raise argparse.ArgumentTypeError(f"{text!r} is not a direction like de-en, nor 'all'")
    return text


def _is_language(text: str) -> bool:
    try:
        return bool(language(text))
    except argparse.ArgumentTypeError:
        return False


def _add_language_args(p: argparse.ArgumentParser) -> None:
    """A multilingual model's direction (translate, score)."""
    p.add_argument("--source-lang", type=language, default=None,
                   help="the input's language (a multilingual model: checked against its directions)")
    p.add_argument("--target-lang", type=language, default=None,
                   help="the language to write (a multilingual model that writes several needs it)")


def _add_engine_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["native", "ctranslate2"], default="native",
                   help="native: RUN_DIR is a training run; ctranslate2: RUN_DIR is a folder from `attnmt export`")


def seed_list(text: str) -> list[int]:
    """Distinct integers separated by commas: `--seeds 1,2,3`."""
    seeds = [_parse(part.strip(), int, "an integer") for part in text.split(",")]
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r} repeats a seed")
    return seeds


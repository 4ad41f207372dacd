"""The argument types and options that several verbs share; argparse checks them while parsing.

Every bounded number's range is bounds.py's, the same that the config, the library and the service take.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from attnmt.bounds import BEAM, DECODING_WORKERS, LENGTH_PENALTY, SHARD_LINES, THREADS, VOCAB, Bound
from attnmt.direction import Direction, check_language
from attnmt.errors import AttnmtError

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


def bounded(bound: Bound):
    """The argument type of a value in `bound` (bounds.py: the same range as the config, the
    library and the service take), so that no value reaches the library that hangs it or overflows."""
    if bound.integer:
        check = positive_int if bound.low == 1 else non_negative_int
    else:
        check = positive_float if bound.low_open or bound.low > 0 else non_negative_float

    def parse(text: str):
        value = check(text)
        if value < bound.low:
            raise argparse.ArgumentTypeError(f"{text} must be at least {bound.low:g}")
        if value > bound.high:
            raise argparse.ArgumentTypeError(f"{text} must be at most {bound.high:g}" if isinstance(bound.high, float)
                                             else f"{text} must be at most {bound.high}")
        return value
    parse.__name__ = check.__name__
    return parse


beam_size = bounded(BEAM)
length_penalty = bounded(LENGTH_PENALTY)


# --------------------------------------------------------------------------- decoding options
# Every verb that decodes declares its options here and builds one DecodingOptions from them
# (decoding/options.py): what the user does not give stays None, the model's own (its search
# section), whatever the verb.

# argparse's name of each option -> the DecodingOptions field it sets
DECODING_ARGS = {"beam": "beam_size", "length_penalty": "length_penalty", "batch_size": "batch_size",
                 "n_best": "n_best", "sampling_topk": "sampling_topk", "sampling_temperature": "sampling_temperature",
                 "seed": "seed", "layer": "layer", "head": "head", "replace_unk": "replace_unk",
                 "alignments": "alignments", "split_sentences": "split_sentences", "source_lang": "source_lang",
                 "target_lang": "target_lang", "min_confidence": "min_confidence",
                 "below_confidence": "below_confidence"}


def add_decoding_args(p: argparse.ArgumentParser, *, batch_size: int = 64) -> None:
    """--beam, --length-penalty and --batch-size, which every decoding verb takes; unset, the
    beam and the penalty are the model's (its config's search section)."""
    p.add_argument("--beam", type=beam_size, default=None,
                   help=f"beam size (1 = greedy; at most {BEAM.high}; default: the model's search.beam_size, "
                        f"1 when sampling)")
    p.add_argument("--length-penalty", type=length_penalty, default=None,
                   help="GNMT length penalty alpha (default: the model's search.length_penalty)")
    p.add_argument("--batch-size", type=positive_int, default=batch_size, help=f"sentences per batch (default {batch_size})")


def decoding_options(args: argparse.Namespace, **given):
    """The DecodingOptions of the decoding options a verb declared (DECODING_ARGS), and `given`.

    Raises:
        AttnmtError: options that do not go together (--n-best over --beam, sampling with a beam),
            naming them.
    """
    from attnmt.decoding.options import DecodingOptions
    from attnmt.errors import AttnmtError

    fields = {field: getattr(args, name) for name, field in DECODING_ARGS.items() if hasattr(args, name)}
    try:
        return DecodingOptions(**{**fields, **given})
    except ValueError as err:
        raise AttnmtError(str(err)) from None


def index_int(text: str) -> int:
    """An integer index; negative ones count from the end (Transformer layers and heads)."""
    return _parse(text, int, "an integer index")


IMAGE_FORMATS = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps")


def image_path(text: str) -> str:
    """An output file whose suffix names an image format matplotlib writes."""
    if os.path.splitext(text)[1].lower() not in IMAGE_FORMATS:
        raise argparse.ArgumentTypeError(f"{text!r}: the file name must end in one of {', '.join(IMAGE_FORMATS)}")
    return text


def ensemble_paths(spec: str) -> list[str]:
    """The folders a model argument names (compare's SYSTEM, distill's TEACHER, serve's MODEL):
    itself, or its '+'-joined parts, an ensemble (runs/a+runs/b). A folder whose own name has a
    '+' is itself.

    Empty parts are dropped (`runs/a++runs/b+` is two runs).

    Raises:
        AttnmtError: an empty argument, or '+'s that name no run at all (`+`, `++`): one line
            (issue 66 group G: `attnmt distill +` raised IndexError).
    """
    if "+" in spec and not Path(spec).exists():
        parts = [part for part in spec.split("+") if part.strip()]
        if not parts:
            raise AttnmtError(f"{spec!r}: names no run; an ensemble is runs joined by '+' (runs/a+runs/b)")
        return parts
    if not spec.strip():
        raise AttnmtError("an empty name where a run (or runs joined by '+') was expected")
    return [spec]


def add_data_args(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--vocab-size", type=bounded(VOCAB), default=None,
                   help=f"sentencepiece pieces, at most {VOCAB.high} (default: 8000)")
    p.add_argument("--min-freq", type=positive_int, default=None, help="minimum token frequency in the vocabulary "
                   "(default: 1, as data.min_freq)")


def add_shard_args(p: argparse.ArgumentParser) -> None:
    """translate / score from a file into a file, or under torchrun: in resumable shards (sharding.py)."""
    p.add_argument("--shard-lines", type=bounded(SHARD_LINES), default=None, metavar="N",
                   help="with -i FILE -o FILE (and under torchrun): work in shards of N lines (default 10000), kept "
                        "in OUT.shards/ until OUT is written, so a killed job resumes where it stopped")
    p.add_argument("--threads", type=bounded(THREADS), default=None, metavar="N",
                   help="torch CPU threads (default: torch's choice; under torchrun, the CPUs shared among the "
                        "ranks of a node)")


def add_workers_arg(p: argparse.ArgumentParser) -> None:
    """translate / evaluate: native decoding in N processes (workers.py)."""
    p.add_argument("--workers", type=bounded(DECODING_WORKERS), default=1, metavar="N",
                   help=f"decode in N worker processes (1..{DECODING_WORKERS.high}, at most the CPUs usable), each with its own copy of the model and "
                        "its torch threads (translate: --threads; default: the CPUs shared among them); native engine on a CPU, "
                        "one process (not under torchrun). Default 1: on 2 cores, 2 workers decoded 1.09-1.17x faster "
                        "but start ~2 s later, so they win only past a few thousand sentences (docs/performance.md)")


def language(text: str) -> str:
    """A language code as a multilingual model names its languages (de, fra, pt_BR)."""
    return check_language(text, "", error=argparse.ArgumentTypeError)


def direction(text: str) -> Direction:
    """A direction SRC-TGT (de-en)."""
    return Direction.parse(text, "", error=argparse.ArgumentTypeError)


def direction_or_all(text: str) -> Direction | str:
    """A direction SRC-TGT (de-en), or 'all'."""
    return text if text == "all" else direction(text)


def add_language_args(p: argparse.ArgumentParser) -> None:
    """A multilingual model's direction (translate, score)."""
    p.add_argument("--source-lang", type=language, default=None,
                   help="the input's language (a multilingual model: checked against its directions; "
                        "left out, each text's is found by the model's lexicons)")
    p.add_argument("--target-lang", type=language, default=None,
                   help="the language to write (a multilingual model that writes several needs it)")


def add_engine_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["native", "ctranslate2"], default="native",
                   help="native: RUN_DIR is a training run; ctranslate2: RUN_DIR is a folder from `attnmt export`")


def seed_list(text: str) -> list[int]:
    """Distinct integers separated by commas: `--seeds 1,2,3`."""
    seeds = [_parse(part.strip(), int, "an integer") for part in text.split(",")]
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r} repeats a seed")
    return seeds


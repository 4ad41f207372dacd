"""The `attnmt` command line: `attnmt VERB ...`, one module of attnmt.commands per verb (COMMANDS).

Each verb's module holds its one-line HELP, `add_args(parser)` and `run(args) -> int`; this module
only builds the parser from them, dispatches, and turns user errors into one clear line on
stderr, `attnmt VERB: error: ...`, and exit code 2:

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
import linecache
import logging
import os
import sys

from attnmt.commands import (attention, average, calibrate, compare, data_stats, demo, distill, evaluate, export,
                             import_, prepare, score, serve, summarize, train, translate)
from attnmt.errors import AttnmtError

# verb -> its module, in the order of `attnmt --help`; a two-word verb is a sub-command of a group (GROUPS).
COMMANDS = {
    "data stats": data_stats,
    "prepare": prepare,
    "train": train,
    "evaluate": evaluate,
    "translate": translate,
    "score": score,
    "export": export,
    "attention": attention,
    "average": average,
    "demo": demo,
    "serve": serve,
    "compare": compare,
    "summarize": summarize,
    "import": import_,
    "distill": distill,
    "calibrate": calibrate,
}
GROUPS = {"data": "inspect corpora"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnmt", description="Attention-based neural machine translation.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    groups = {}
    for name, module in COMMANDS.items():
        group, _, verb = name.rpartition(" ")
        if group and group not in groups:
            groups[group] = sub.add_parser(group, help=GROUPS[group]).add_subparsers(dest=f"{group}_command",
                                                                                     required=True)
        module.add_args((groups[group] if group else sub).add_parser(verb, help=module.HELP))
    return parser


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
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the verb's parser (`attnmt translate: error: ...`), as its other errors are
        _verb_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    name = "data stats" if args.command == "data" else args.command
    try:
        _refuse_nul(parser, args)
        _refuse_ignored_options(args)
        if getattr(args, "device", None) is not None:  # refuse a device this machine lacks before loading
            from attnmt.devices import resolve_device

            resolve_device(args.device, key="--device")
        return int(COMMANDS[name].run(args) or 0)
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

"""The command line's verbs, one module each: parsed arguments in, typed library calls out.

Each module has `run(args) -> int` (the exit code); `attnmt.cli` builds the parser and dispatches.
Nothing below this folder ever sees an argparse object. A new verb: a module here, its parser in
cli.py, its line in cli.COMMANDS.
"""

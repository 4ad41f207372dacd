"""The command line's verbs, one module each: parsed arguments in, typed library calls out.

Each verb's module has `HELP` (its line in `attnmt --help`), `add_args(parser)` and
`run(args) -> int` (the exit code); `attnmt.cli` lists the modules, builds the parser and
dispatches. A new verb: a module here, imported by cli.py with its line in COMMANDS. Every verb
module is imported to build the parser, so it imports torch (and what loads it) inside `run`,
never at the top: `attnmt --help` stays fast. Nothing below this folder ever sees an argparse object.
"""

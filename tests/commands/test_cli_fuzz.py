"""Fuzzing the command line: generated values for every option of every verb (read from the
parser itself, so a new option is fuzzed without a change here) give exit 0 or exit 2 with one
`attnmt VERB: error: ...` line, never a traceback (issue 24, "fuzzing is the method").

Numbers are huge, negative, nan, inf, hex, with underscores or in other scripts; strings are any
text; paths are missing, folders, files of the wrong kind or a real run. Valid values run for
real on a copy of the toy run, except the three jobs too long for a test, which are stubbed where
the command hands over to the library: training (`training.train`, which `attnmt train` and the
demo call), serving (uvicorn's `Server.run`) and a distillation's stages (`distillation.stages._run`,
after its refusals).

    ATTNMT_FUZZ=deep pytest tests/commands/test_cli_fuzz.py tests/test_text_fuzz.py   # the deeper profile
"""

import argparse
import io
import shutil
import sys
import types

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from attnmt.cli import build_parser, main

from support.fuzzing import fuzz  # tests/support/fuzzing.py: the shared profiles


# ----------------------------------------------------------------------------- generated values

NUMBERS = st.one_of(
    st.integers(-3, 20).map(str),
    st.integers(-2**80, 2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "-nan", "inf", "-inf", "1e308", "-1e308", "1e-300", "1e999", "-0", "0.0", "0x10",
                     "1_000", "", " 3", "3 ", "٣", "1" * 5000, "2.5", "1e3", "16", "17", "65536", "4294967296"]),
)
TEXT = st.text(max_size=20)
# {run}: a copy of the toy run; {corpus}: the toy corpus prefix; {config}: the toy config
PATH_NAMES = ["{run}", "{run}", "{tmp}/missing", "{tmp}/missing/deeper", "{tmp}", "{run}/config.json",
              "{corpus}", "{corpus}.de", "{config}", "/dev/null", "{tmp}/out.txt", "{tmp}/out.png", "best", "last",
              "average", "test", "valid", "train", "{run}/checkpoints", "out.svg", "a.png"]
PATHS = st.sampled_from(PATH_NAMES)


def option_values(action: argparse.Action) -> st.SearchStrategy[list[str]]:
    """Generated command-line words for one option (or positional) of the parser."""
    if action.nargs == 0:  # a switch
        return st.just([action.option_strings[0]])
    if action.choices:
        value = st.one_of(st.sampled_from(sorted(action.choices)), TEXT)
    elif action.type not in (None, str) and getattr(action.type, "__name__", "") != "image_path":
        value = st.one_of(NUMBERS, NUMBERS, TEXT)
    else:
        value = st.one_of(PATHS, PATHS, TEXT)
    if action.nargs in ("+", "*"):
        return st.lists(value, min_size=1, max_size=3).map(
            lambda values: [action.option_strings[0], *values] if action.option_strings else values)
    if not action.option_strings:
        real = {"run_dir": "{run}", "config": "{config}"}.get(action.dest)
        if real:  # mostly the real run or config, so that valid values run for real
            value = st.one_of(st.just(real), st.just(real), st.just(real), value)
        return value.map(lambda v: [v])
    if action.dest == "overrides":  # --set KEY=VALUE
        value = st.builds(lambda key, v: f"{key}={v}", st.sampled_from(
            ["train.epochs", "train.lr", "train.max_minutes", "model.emb_dim", "search.beam_size", "x.y", "train"]),
            st.one_of(NUMBERS, TEXT))
    return value.map(lambda v: [f"{action.option_strings[0]}={v}"])  # `--flag=VALUE`: a value that starts with - too


def verb_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each verb ('data stats' included) -> its sub-parser."""
    def subparsers(parser):
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    verbs = dict(subparsers(build_parser()))
    data = verbs.pop("data")
    verbs.update({f"data {name}": p for name, p in subparsers(data).items()})
    return verbs


VERBS = verb_parsers()


@st.composite
def command_lines(draw, verb: str) -> list[str]:
    """The verb, its positionals, its required options, and up to four other options."""
    parser = VERBS[verb]
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    required = [a for a in actions if not a.option_strings or a.required]
    optional = [a for a in actions if a.option_strings and not a.required]
    chosen = draw(st.lists(st.sampled_from(optional), unique_by=lambda a: a.dest, max_size=4)) if optional else []
    words = verb.split(" ")
    for action in required + chosen:
        words += draw(option_values(action))
    if verb == "data stats" and not any(w.startswith(("--corpus=", "--config=")) for w in words):
        words.append("--corpus={corpus}")  # the default, Multi30k, takes 10 s a call
    return words


# ----------------------------------------------------------------------------- the property

@pytest.fixture(scope="module")
def places(toy_run, tmp_path_factory):
    """A copy of the toy run (the fuzzer may write into it) beside the toy corpus and config."""
    base = tmp_path_factory.mktemp("cli_fuzz")
    shutil.copytree(toy_run, base / "run")
    return {"run": base / "run", "corpus": toy_run.parent / "toy" / "train", "config": toy_run.parent / "toy.yaml",
            "tmp": base / "work"}


@pytest.fixture
def stubbed(monkeypatch, places):
    """Stubs for the jobs too long for a test: training and serving."""
    import uvicorn

    import attnmt.training

    def train(cfg, run_dir, **_):
        return types.SimpleNamespace(run_dir=run_dir, epochs=0, seconds=0.0, best={})

    def serve(self, *args, **kwargs):
        self.started = True

    import attnmt.distillation.stages

    monkeypatch.setattr(attnmt.training, "train", train)
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    monkeypatch.setattr(attnmt.distillation.stages, "_run", lambda *args, **kwargs: {"rows": [], "signature": {}})
    places["tmp"].mkdir(exist_ok=True)
    monkeypatch.chdir(places["tmp"])  # relative paths the fuzzer invents land here


def run_cli(argv: list[str], capsys, monkeypatch, stdin: bytes = b"Hund katze .\n\nrot\n") -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    return code, capsys.readouterr().err


def check_outcome(verb: str, argv: list[str], code: int, err: str) -> None:
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code == 2:
        lines = [line for line in err.splitlines() if line.startswith(f"attnmt {verb}: error: ")]
        assert len(lines) == 1, (argv, err)


@pytest.mark.parametrize("verb", sorted(VERBS))
@fuzz(ci=25, deep=400)
@given(data=st.data())
def test_every_verb_exits_0_or_2_with_one_line(verb, data, places, stubbed, capsys, monkeypatch):
    argv = [_place(w, places) for w in data.draw(command_lines(verb), label="argv")]
    code, err = run_cli(argv, capsys, monkeypatch)
    check_outcome(verb, argv, code, err)
    event(f"exit {code}" + (" (argparse)" if "usage: " in err else ""))


def _place(word: str, places: dict) -> str:
    """Fill in {run}, {tmp}, ... (only the placeholders: generated text keeps its braces)."""
    for name, path in places.items():
        word = word.replace("{" + name + "}", str(path))
    return word


@pytest.mark.parametrize("argv", [
    # what fuzzing found, kept as examples
    ["translate", "{run}", "--seed=1180591620717411303424", "--sampling-topk=0"],
    ["translate", "{run}", "--length-penalty=1e308"],
    ["translate", "{run}", "--sampling-temperature=1e-300", "--sampling-topk=0"],
    ["translate", "{run}", "--sampling-topk=1180591620717411303424"],
    ["data", "stats", "--corpus={corpus}", "--tokenizer=sentencepiece", "--vocab-size=2147483648"],
    ["translate", "{run}", "--beam=1", "-i={tmp}"],
    ["score", "{run}", "-i={run}", "-r={run}"],
    # a NUL character in a path: ValueError "embedded null byte" from the os functions (deep profile)
    ["average", "{run}", "-o={tmp}/a\x00b"],
    ["demo", "--run-dir=runs/\x00"],
    ["score", "{run}", "-i=a\x00", "-r={corpus}.de"],
    ["translate", "{run}", "-i=\x00"],
    ["translate", "\x00"],
    ["train", "{config}", "--run-dir=a\x00"],
])
def test_found_by_fuzzing(argv, places, stubbed, capsys, monkeypatch):
    verb = "data stats" if argv[0] == "data" else argv[0]
    argv = [_place(w, places) for w in argv]
    code, err = run_cli(argv, capsys, monkeypatch)
    check_outcome(verb, argv, code, err)
    if "\x00" in "".join(argv):
        assert code == 2 and "contains a NUL character" in err, err

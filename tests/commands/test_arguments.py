"""Bounds on every numeric option: absurd values are refused at once with one line naming the
flag (the CLI) or a ValueError naming the argument (the library), never a hang or a traceback
(issue 24 items 3, 11 and 17)."""

import re
import sys
import time

import pytest

from attnmt.cli import main
from attnmt.bounds import BEAM, DECODING_SEED, LENGTH_PENALTY, SAMPLING_TEMPERATURE, SAMPLING_TOPK
from attnmt.decoding.options import DecodingOptions

MAX_BEAM, MAX_LENGTH_PENALTY, MAX_SEED = BEAM.high, LENGTH_PENALTY.high, DECODING_SEED.high
MIN_SAMPLING_TEMPERATURE, MAX_SAMPLING_TEMPERATURE, MAX_SAMPLING_TOPK = (SAMPLING_TEMPERATURE.low, SAMPLING_TEMPERATURE.high,
                                                                         SAMPLING_TOPK.high)

HUGE = str(2**70)

# (argv after the run directory or verb, the one error line expected)
REFUSED = [
    ("translate {rnn} --beam 100000", r"argument --beam: 100000 must be at most 16"),
    ("translate {rnn} --beam 1000000", r"argument --beam: 1000000 must be at most 16"),
    ("translate {rnn} --beam 17", r"argument --beam: 17 must be at most 16"),
    ("translate {rnn} --n-best 17", r"argument --n-best: 17 must be at most 16"),
    ("translate {rnn} --length-penalty 1e308", r"argument --length-penalty: 1e308 must be at most 10"),
    ("translate {rnn} --length-penalty 10.5", r"argument --length-penalty: 10.5 must be at most 10"),
    ("translate {rnn} --length-penalty inf", r"argument --length-penalty: inf must be a finite number >= 0"),
    ("translate {rnn} --sampling-temperature 1e-300 --sampling-topk 0",
     r"argument --sampling-temperature: 1e-300 must be at least 0.01"),
    ("translate {rnn} --sampling-temperature 1e300 --sampling-topk 0",
     r"argument --sampling-temperature: 1e300 must be at most 100"),
    ("translate {rnn} --sampling-temperature nan", r"argument --sampling-temperature: nan must be a finite number"),
    ("translate {rnn} --seed " + HUGE + " --sampling-topk 0", r"argument --seed: " + HUGE + r" must be at most 4294967295"),
    ("translate {rnn} --seed -1 --sampling-topk 0", r"argument --seed: -1 must be 0 or more"),
    ("translate {rnn} --seed x", r"argument --seed: 'x' is not an integer"),
    ("translate {rnn} --sampling-topk " + HUGE, r"argument --sampling-topk: " + HUGE + r" must be at most 1048576"),
    ("evaluate {rnn} --beam 17", r"argument --beam: 17 must be at most 16"),
    ("evaluate {rnn} --length-penalty 1e308", r"argument --length-penalty: 1e308 must be at most 10"),
    ("attention {rnn} Hund --beam 100000", r"argument --beam: 100000 must be at most 16"),
    ("serve {rnn} --beam 17", r"argument --beam: 17 must be at most 16"),
    ("serve {rnn} --max-wait-ms 1e308", r"argument --max-wait-ms: 1e308 must be at most 60000"),
    ("serve {rnn} --file-limit-kb 1025", r"argument --file-limit-kb: 1025 must be at most 1000"),
    ("serve {rnn} --files-expire-minutes 1e308", r"argument --files-expire-minutes: 1e308 must be at most 10080"),
    ("serve {rnn} --files-expire-minutes 0", r"argument --files-expire-minutes: 0 must be a finite number > 0"),
    ("serve {rnn} --max-files " + HUGE, r"argument --max-files: " + HUGE + r" must be at most 100000"),
    ("serve {rnn} --max-sentences 0", r"argument --max-sentences: 0 must be a positive integer"),
    ("data stats --tokenizer sentencepiece --vocab-size " + HUGE, r"argument --vocab-size: " + HUGE + r" must be at most 1000000"),
]

# Huge values that need no bound: each ends in a clear result or one line (kept here so that a
# change which makes them hang or crash is caught).
HARMLESS = [
    ("translate {rnn} --batch-size " + HUGE, 0),
    ("attention {rnn} Hund --layer " + HUGE, 2),
    ("attention {rnn} Hund --head -" + HUGE, 2),
    ("average {rnn} --last " + HUGE + " -o {tmp}/avg.safetensors", 0),
    ("serve {rnn} --port " + HUGE, 2),
    ("data stats --corpus {corpus} --min-freq " + HUGE, 2),  # data.min_freq's bound (config.py) names the flag
]


@pytest.mark.parametrize("argv,message", REFUSED, ids=[argv for argv, _ in REFUSED])
def test_absurd_numbers_are_refused_with_one_line_naming_the_flag(argv, message, toy_run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("Hund .\n"))
    verb = "data stats" if argv.startswith("data") else argv.split(" ")[0]
    start = time.perf_counter()
    try:
        code = main(argv.format(rnn=toy_run).split(" "))
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert time.perf_counter() - start < 30
    assert code == 2 and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"attnmt {verb}: error: ")]
    assert len(lines) == 1, err
    assert re.search(message, lines[0]), lines[0]


@pytest.mark.parametrize("argv,expected", HARMLESS, ids=[argv for argv, _ in HARMLESS])
def test_huge_values_that_need_no_bound(argv, expected, toy_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("Hund .\n"))
    argv = argv.format(rnn=toy_run, tmp=tmp_path, corpus=toy_run.parent / "toy" / "train")
    assert main(argv.split(" ")) == expected
    assert "Traceback" not in capsys.readouterr().err


def test_the_cli_caps_are_the_servers():
    from attnmt.server import schemas, settings

    assert MAX_BEAM == 16
    fields = schemas.V1TranslateRequest.model_fields
    assert fields["length_penalty"].metadata[-1].le == MAX_LENGTH_PENALTY
    assert fields["beam_size"].metadata[-1].le == fields["n_best"].metadata[-1].le == MAX_BEAM
    assert settings.ServeSettings(beam_size=MAX_BEAM).beam_size == MAX_BEAM
    with pytest.raises(ValueError, match=rf"beam_size={MAX_BEAM + 1} must be in 1\.\.{MAX_BEAM}"):
        settings.ServeSettings(beam_size=MAX_BEAM + 1)


@pytest.mark.parametrize("beam", [2, MAX_BEAM])
def test_the_largest_beam_still_translates(toy_run, capsys, monkeypatch, beam):
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("Hund katze .\n"))
    assert main(["translate", str(toy_run), "--beam", str(beam), "--n-best", str(beam)]) == 0
    assert capsys.readouterr().out.count("\n") == beam + 1  # beam lines and an empty one


@pytest.mark.parametrize("values", [
    dict(sampling_topk=0, sampling_temperature=MIN_SAMPLING_TEMPERATURE, seed=0, beam_size=1),
    dict(sampling_topk=MAX_SAMPLING_TOPK, sampling_temperature=MAX_SAMPLING_TEMPERATURE, seed=MAX_SEED, beam_size=1),
    dict(length_penalty=MAX_LENGTH_PENALTY, beam_size=MAX_BEAM, n_best=MAX_BEAM),
    dict(length_penalty=0.0, beam_size=2),
])
def test_the_library_takes_values_at_the_bounds(toy_run, values):
    from attnmt.translator import Translator

    results = Translator.load(toy_run, device="cpu").translate(["Hund katze .", ""], **values)
    assert len(results) == 2


# ------------------------------------------------------------------------ the library: DecodingOptions

GOOD = dict(beam_size=5, n_best=1, sampling_topk=1, sampling_temperature=1.0, length_penalty=None, seed=None)


@pytest.mark.parametrize("change,message", [
    (dict(beam_size=100_000), r"beam_size=100000 must be in 1\.\.16"),
    (dict(beam_size=0), r"beam_size=0 must be in 1\.\.16"),
    (dict(beam_size=2.5), r"beam_size=2\.5 must be an integer"),
    (dict(beam_size=True), r"beam_size=True must be an integer"),
    (dict(n_best=6), r"n_best=6 must be between 1 and beam_size=5"),
    (dict(length_penalty=1e308), r"length_penalty=1e\+308 must be in 0\.\.10"),
    (dict(length_penalty=float("nan")), r"length_penalty=nan must be in 0\.\.10"),
    (dict(length_penalty=float("inf")), r"length_penalty=inf must be in 0\.\.10"),
    (dict(length_penalty=-0.5), r"length_penalty=-0\.5 must be in 0\.\.10"),
    (dict(sampling_temperature=1e-300), r"sampling_temperature=1e-300 must be in 0\.01\.\.100"),
    (dict(sampling_temperature=float("nan")), r"sampling_temperature=nan must be in 0\.01\.\.100"),
    (dict(sampling_temperature=0.0), r"sampling_temperature=0\.0 must be in 0\.01\.\.100"),
    (dict(beam_size=1, sampling_topk=2**70), r"sampling_topk=1180591620717411303424 must be in 0\.\.1048576"),
    (dict(beam_size=1, sampling_topk=-1), r"sampling_topk=-1 must be in 0\.\.1048576"),
    (dict(seed=2**70), r"seed=1180591620717411303424 must be in 0\.\.4294967295"),
    (dict(seed=-1), r"seed=-1 must be in 0\.\.4294967295"),
    (dict(seed=1.5), r"seed=1\.5 must be an integer"),
])
def test_decoding_options_name_the_argument(change, message):
    with pytest.raises(ValueError, match=message):
        DecodingOptions(**{**GOOD, **change})


@pytest.mark.parametrize("change,name", [
    (dict(beam_size=100_000), "beam_size"), (dict(beam_size=1_000_000), "beam_size"),
    (dict(length_penalty=1e308), "length_penalty"),
    (dict(beam_size=1, sampling_topk=0, sampling_temperature=1e-300), "sampling_temperature"),
    (dict(beam_size=1, sampling_topk=0, seed=2**70), "seed"), (dict(beam_size=1, sampling_topk=2**70), "sampling_topk"),
])
def test_the_python_api_refuses_at_once(toy_run, change, name):
    """The Translator's keywords become DecodingOptions, checked at once: no hang, no allocator or overflow error."""
    from attnmt.translator import Translator

    translator = Translator.load(toy_run, device="cpu")
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"^{name}="):
        translator.translate(["Hund katze ."] * 3, **change)
    assert time.perf_counter() - start < 5

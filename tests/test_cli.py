"""The CLI end to end on tiny generated files: train -> evaluate -> translate -> attention -> average."""

import json
import re
import subprocess
import sys

import pytest

from attnmt.cli import main
from attnmt.errors import AttnmtError

from support import toy


def test_help_runs_as_module():
    out = subprocess.run([sys.executable, "-m", "attnmt", "--help"], capture_output=True, text=True, check=True)
    assert "train" in out.stdout and "translate" in out.stdout


@pytest.mark.learned
def test_train_evaluate_translate_attention(tmp_path, toy_config, capsys, monkeypatch):
    run_dir = tmp_path / "run"
    assert main(["train", str(toy_config), "--run-dir", str(run_dir), "--set", "train.epochs=6"]) == 0
    for name in ("config.json", "vocab.src.json", "vocab.tgt.json", "tokenizers.json", "best.json",
                 "last.json", "metrics.jsonl", "train_state.json"):
        assert (run_dir / name).is_file(), name
    epochs = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    epochs = [r for r in epochs if r["event"] == "epoch"]
    assert len(epochs) == 6 and epochs[-1]["val_loss"] < epochs[0]["val_loss"]
    capsys.readouterr()

    assert main(["evaluate", str(run_dir), "--split", "test", "--beam", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == 40 and report["signature"].startswith("nrefs:1")
    assert report["bleu"] > 50, report  # the word-for-word task is learned

    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("Hund katze .\n\n   \nBaum blau groß .\n"))
    assert main(["translate", str(run_dir), "--beam", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[1] == "" and lines[2] == ""
    assert lines[0].lower().startswith("dog cat")

    (tmp_path / "in.txt").write_text("Hund .\nKatze .\n")
    assert main(["translate", str(run_dir), "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt"),
                 "--beam", "1"]) == 0
    assert len((tmp_path / "out.txt").read_text().splitlines()) == 2

    png = tmp_path / "att.png"
    assert main(["attention", str(run_dir), "Hund katze haus .", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert main(["evaluate", str(run_dir), "--split", "test", "--checkpoint", "average"]) == 2
    assert "attnmt average" in capsys.readouterr().err
    assert main(["average", str(run_dir), "--last", "3"]) == 0
    assert (run_dir / "average.json").is_file()
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), "--split", "test", "--beam", "3", "--checkpoint", "average"]) == 0
    assert json.loads(capsys.readouterr().out)["bleu"] > 50


def test_user_errors_exit_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  heads: many\n")
    assert main(["train", str(bad), "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml: model.heads must be int" in err and "Traceback" not in err
    assert main(["evaluate", str(tmp_path / "nothing")]) == 2
    assert "config.json" in capsys.readouterr().err


def test_resume_of_a_folder_without_a_run_names_the_missing_file(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path), "--set", "train.epochs=3"]) == 2
    assert "config.json" in capsys.readouterr().err


# ----------------------------------------------------------------------------- bad values, every verb
# One row per bad value: (argv, regex the one error line must match after "attnmt VERB: error: ").
# argv is split on spaces after filling in the placeholders:
#   {rnn}          a trained toy RNN run (tests/conftest.py: toy_run)
#   {transformer}  a tiny Transformer run (trained once, only when a row uses it)
#   {config}       a toy config file;  {corpus} the toy corpus folder;  {tmp} an empty folder
# Add a verb's rows under its name: every verb of the parser must have some (see the test below).
BAD_VALUES: dict[str, list[tuple[str, str]]] = {
    "prepare": [
        ("prepare {config} --workers 0", r"argument --workers: 0 must be a positive integer"),
        ("prepare {config} --set data.max_len=0", r"data.max_len=0 must be positive"),
        ("prepare {config} --set data.max_len_ratio=.nan", r"data.max_len_ratio=nan must be a finite number"),
        ("prepare {config} --set data.train=[]", r"data.train must be a non-empty list"),
        ("prepare {config} --set data.train=[{{\"path\":\"x\",\"weight\":-1}}]", r"data.train\[0\].weight=-1.0 must be a number in \(0, 1000\]"),
        ("prepare {config} --set data.train={tmp}/nothing", r"nothing.de: file not found"),
        ("prepare nothing.yaml", r"nothing.yaml: config file not found"),
    ],
    "data stats": [
        ("data stats --vocab-size 0", r"argument --vocab-size: 0 must be a positive integer"),
        ("data stats --min-freq x", r"argument --min-freq: 'x' is not an integer"),
        ("data stats --tokenizer bpe", r"argument --tokenizer: invalid choice: 'bpe'"),
        ("data stats --corpus {tmp}/nothing", r"nothing"),
        ("data stats --src-lang xx", r"^attnmt data stats: error: --src-lang='xx': Multi30k has de, en, fr, cs$"),
        ("data stats --src-lang en", r"--src-lang and --tgt-lang are both 'en'"),
        ("data stats --corpus {corpus} --splits test_2017_mscoco", r"test_2017_mscoco"),
    ],
    "train": [
        ("train", r"train needs a CONFIG"),
        ("train multi30k_lstm", r"multi30k_lstm: config file not found, and not the name of a packaged config"),
        ("train {config} --set train.lr", r"override 'train.lr' must look like section.key=value"),
        ("train {config} --set train.epochs=0", r"toy.yaml: train.epochs=0 must be positive"),
        ("train {config} --set model.arch=transformer --set model.d_model=16 --set model.heads=2 "
         "--set train.teacher_forcing=0.5", r"train.teacher_forcing=0.5 applies to model.arch='rnn' only"),
        ("train {config} --set train.device=gpu", r"train.device='gpu' must be auto, cpu, cuda, cuda:N or mps"),
        ("train {config} --set train.device=cuda:99 --run-dir {tmp}/r", r"train.device='cuda:99' but"),
        ("train --resume {tmp}/nothing", r"nothing: no config.json; is it a run directory"),
        ("train {config} --resume {rnn}", r"--resume continues the run in .* with its saved config: drop CONFIG$"),
        ("train --resume {rnn} --run-dir {tmp}", r"drop --run-dir$"),
        ("train {config} --run-dir {config}", r"toy.yaml: File exists"),
        ("train {config} --seeds 1,x", r"argument --seeds: 'x' is not an integer"),
        ("train {config} --seeds 2,1,2", r"argument --seeds: '2,1,2' repeats a seed"),
        ("train --resume {rnn} --seeds 1,2", r"--seeds starts new runs and cannot be combined with --resume"),
        ("train {config} --seeds 1,2 --set train.seed=3", r"--seeds sets train.seed for each run: drop --set train.seed"),
    ],
    "evaluate": [
        ("evaluate {rnn} --beam 0", r"argument --beam: 0 must be a positive integer"),
        ("evaluate {rnn} --beam x", r"argument --beam: 'x' is not an integer"),
        ("evaluate {rnn} --batch-size 0", r"argument --batch-size: 0 must be a positive integer"),
        ("evaluate {rnn} --length-penalty -1", r"argument --length-penalty: -1 must be a finite number >= 0"),
        ("evaluate {rnn} --length-penalty nan", r"argument --length-penalty: nan must be a finite number"),
        ("evaluate {rnn} --device cuda:99", r"--device='cuda:99' but"),
        ("evaluate {rnn} --device mps:0", r"--device='mps:0' must be auto, cpu, cuda, cuda:N or mps"),
        ("evaluate {rnn} --split test_2017_mscoco", r"unknown split 'test_2017_mscoco'"),
        ("evaluate {rnn} --checkpoint average", r"run `attnmt average"),
        ("evaluate {tmp}/nothing", r"nothing: no config.json; is it a run directory written by `attnmt train`"),
        ("evaluate {rnn} {tmp}/nothing", r"nothing: no config.json; is it a run directory"),
    ],
    "translate": [
        ("translate {rnn} --min-confidence -1", r"argument --min-confidence: -1 must be a finite number >= 0"),
        ("translate {rnn} --beam 0", r"argument --beam: 0 must be a positive integer"),
        ("translate {rnn} --beam -2", r"argument --beam: -2 must be a positive integer"),
        ("translate {rnn} --batch-size 0", r"argument --batch-size: 0 must be a positive integer"),
        ("translate {rnn} --device cuda:99", r"--device='cuda:99' but"),
        ("translate {rnn} -i {tmp}/missing.txt", r"missing.txt: No such file or directory"),
        ("translate {rnn} -o {tmp}/no/such/folder/out.txt", r"out.txt: No such file or directory"),
        ("translate {rnn} -o {tmp}", r"Is a directory"),
        ("translate {tmp}/nothing", r"nothing: no config.json; is it a run directory"),
        ("translate {rnn} --checkpoint {tmp}/none.safetensors", r"none.safetensors"),
        ("translate {rnn} --n-best 0", r"argument --n-best: 0 must be a positive integer"),
        ("translate {rnn} --beam 2 --n-best 3", r"n_best=3"),
        ("translate {rnn} --engine onnx", r"argument --engine: invalid choice: 'onnx'"),
        ("translate {rnn} --engine ctranslate2", r"not a CTranslate2 export"),
        ("translate {rnn} --sampling-topk -1", r"argument --sampling-topk: -1 must be 0 or more"),
        ("translate {rnn} --sampling-temperature 0", r"argument --sampling-temperature: 0 must be a finite number > 0"),
        ("translate {rnn} --sampling-topk 5 --beam 4", r"beam"),
        ("translate {rnn} {rnn} --engine ctranslate2", r"an ensemble of 2 models needs the native engine"),
    ],
    "attention": [
        ("attention {rnn} Hund --layer 1", r"layer/head selection needs a Transformer model"),
        ("attention {rnn} Hund --head 0", r"layer/head selection needs a Transformer model"),
        ("attention {rnn} Hund --layer x", r"argument --layer: 'x' is not an integer index"),
        ("attention {rnn} Hund --head 1.5", r"argument --head: '1.5' is not an integer index"),
        ("attention {transformer} Hund --layer 9", r"layer=9 out of range"),
        ("attention {transformer} Hund --head 5", r"head=5 out of range"),
        ("attention {rnn} Hund --beam 0", r"argument --beam: 0 must be a positive integer"),
        ("attention {rnn} Hund -o {tmp}/a.xyz", r"argument -o/--output: .*a.xyz': the file name must end in one of"),
        ("attention {rnn} Hund -o {config}/a.png", r"toy.yaml"),
        ("attention {tmp}/nothing Hund", r"nothing: no config.json; is it a run directory"),
        ("attention {rnn} x -o {tmp}/a.png --beam 1 --layer", r"argument --layer: expected one argument"),
    ],
    "import": [
        ("import {tmp}/nothing -o {tmp}/out", r"nothing: not a folder \(download one with `huggingface-cli download"),
        ("import {tmp} -o {tmp}/out", r"config.json: not found \(is .* a Marian model folder"),
        ("import {config} -o {tmp}/out", r"toy.yaml: not an Argos package \(a .argosmodel is a zip archive; this is "
                                         r"not one\) and not a folder"),
        ("import {tmp}", r"the following arguments are required: -o/--output"),
        ("import {tmp} -o {tmp}/out --src-lang", r"argument --src-lang: expected one argument"),
    ],
    "average": [
        ("average {rnn} --last 0", r"argument --last: 0 must be a positive integer"),
        ("average {rnn} --last -1", r"argument --last: -1 must be a positive integer"),
        ("average {rnn} --last x", r"argument --last: 'x' is not an integer"),
        ("average {tmp} --last 2", r"no validated checkpoints \(checkpoints/epoch_\*.safetensors, step_\*.safetensors\) to average"),
    ],
    "demo": [
        ("demo --config multi30k_lstm", r"multi30k_lstm: config file not found"),
        ("demo --run-dir {rnn}", r"not empty and was not made by `attnmt demo`"),
        ("demo --run-dir {config}", r"is a file, not a folder"),
    ],
    "score": [
        ("score {rnn}", r"the following arguments are required: -i/--input, -r/--reference"),
        ("score {rnn} -i {tmp}/no.txt -r {tmp}/no.txt", r"no.txt"),
        ("score {rnn} -i {config} -r {config} --batch-size 0", r"argument --batch-size: 0 must be a positive integer"),
        ("score {rnn} -i {config} -r {config} --engine onnx", r"argument --engine: invalid choice: 'onnx'"),
    ],
    "export": [
        ("export {rnn} -o {tmp}/out", r"RNN"),
        ("export {transformer} --quantization int4", r"argument --quantization: invalid choice: 'int4'"),
        ("export {transformer} --attention-layer x", r"argument --attention-layer: 'x' is not an integer index"),
        ("export {tmp}/nothing", r"nothing"),
        ("export {transformer} --vocab-map --vocab-map-top-k 0", r"argument --vocab-map-top-k: 0 must be a positive"),
        ("export {transformer} --vocab-map --format hf", r"--vocab-map apply to --format ctranslate2 only"),
    ],
    "distill": [
        ("distill {rnn}", r"distill needs a TEACHER and -o DIR \(or --resume DIR\)$"),
        ("distill {rnn} -o {tmp}/d --filter-share 1", r"argument --filter-share: 1.0 must be in \[0, 1\)"),
        ("distill {rnn} -o {tmp}/d --original-weight -1", r"argument --original-weight: -1 must be a finite number >= 0"),
        ("distill {rnn} -o {tmp}/d --max-minutes nan", r"argument --max-minutes: nan must be a finite number > 0"),
        ("distill {rnn} -o {tmp}/d --beam 0", r"argument --beam"),
        ("distill {rnn} -o {tmp}/d --student {tmp}/none.yaml", r"none.yaml: config file not found"),
        ("distill {rnn} -o {tmp}/d --student {config} --set data.tgt_lang=fr", r"names de-fr, which the teacher"),
        ("distill {rnn} -o {config} --student {config}", r"toy.yaml: exists and is not a folder"),
        ("distill {tmp}/nothing -o {tmp}/d --student {config}", r"nothing: no config.json"),
        ("distill --resume {tmp}", r"not a distillation \(no distill.json\)"),
        ("distill --resume {tmp} --set train.lr=1", r"drop --set$"),
        ("distill {rnn} -o {tmp}/d --redo export", r"--redo works with --resume DIR$"),
        ("distill {rnn}+{rnn} -o {tmp}/d --student {config} --workers 100", r"argument --workers"),
    ],
    "compare": [
        ("compare {rnn}", r"compare needs at least two systems"),
        ("compare {rnn} {rnn} --beam 0", r"argument --beam: 0 must be a positive integer"),
        ("compare {rnn} {rnn} --paired-bs-n 0", r"argument --paired-bs-n: 0 must be a positive integer"),
        ("compare {rnn} --hyp {config}", r"toy.yaml has \d+ lines, the references \(test_2016_flickr of .*\) 40$"),
        ("compare --hyp {config} --hyp {config} --ref {tmp}/missing.txt", r"missing.txt: cannot read"),
        ("compare {rnn} {tmp}/nothing --beam 1", r"nothing: no config.json; is it a run directory"),
        ("compare {rnn}+{rnn} {rnn} --engine ctranslate2", r"an ensemble of 2 models needs the native engine"),
        ("compare {rnn} {rnn} --ref {config}", r"toy.yaml has \d+ lines, the sources of test_2016_flickr 40"),
    ],
    "summarize": [
        ("summarize {tmp}/nothing", r"nothing: no config.json; is it a run directory"),
        ("summarize {rnn} --beam 0", r"argument --beam: 0 must be a positive integer"),
    ],
    "calibrate": [
        ("calibrate {tmp}/nothing", r"nothing: no config.json; is it a run directory"),
        ("calibrate {rnn} --src {config}", r"give both --src and --ref"),
        ("calibrate {rnn} --src {config} --ref {tmp}/missing.txt", r"missing.txt: cannot read"),
        ("calibrate {rnn} --beam 0", r"argument --beam: 0 must be a positive integer"),
        ("calibrate {rnn} --src {config} --ref {config}", r"calibrating needs at least 100 held-out sentences"),
        ("calibrate {rnn} --split nosuch", r"nosuch"),
    ],
    "serve": [  # each fails before the server starts
        ("serve {rnn} --engine ctranslate2", r"not a CTranslate2 export"),
        ("serve {rnn} --port x", r"argument --port: 'x' is not an integer"),
        ("serve {rnn} --port 70000", r"port=70000 must be in 0..65535"),
        ("serve {tmp}", r"no config.json; is it a run directory"),
        ("serve {rnn} --max-batch-sentences 0", r"argument --max-batch-sentences: 0 must be a positive integer"),
        ("serve {rnn} --max-wait-ms -1", r"argument --max-wait-ms: -1 must be a finite number >= 0"),
        ("serve {rnn} --max-texts 0", r"argument --max-texts: 0 must be a positive integer"),
        ("serve {rnn} --beam 0", r"argument --beam: 0 must be a positive integer"),
        ("serve {rnn} --min-confidence 2", r"argument --min-confidence: 2 must be at most 1"),
        ("serve {rnn} --device cuda:99", r"--device='cuda:99' but"),
        ("serve {rnn}+{rnn} --engine ctranslate2", r"an ensemble of 2 models needs the native engine"),
        ("serve {rnn} {rnn}", r"both translate de -> en: serve one model per pair"),
    ],
}


@pytest.fixture(scope="session")
def toy_transformer_run(tmp_path_factory, toy_run):
    """A tiny Transformer run (one short epoch: its weights do not matter, only its shape)."""
    base = tmp_path_factory.mktemp("toy_transformer")
    config = toy_run.parent / "toy.yaml"  # the toy config next to the RNN run (tests/conftest.py: toy_run)
    overrides = ["model.arch=transformer", "model.d_model=16", "model.heads=2", "model.ff_dim=16",
                 "model.enc_layers=1", "model.dec_layers=2", "train.epochs=1", "data.train_subset=32",
                 "train.eval_max_sentences=4"]
    argv = ["train", str(config), "--run-dir", str(base / "run")]
    assert main(argv + toy.sets(overrides)) == 0
    return base / "run"


@pytest.mark.parametrize("verb,argv,message", [pytest.param(verb, argv, message, id=argv)
                                               for verb, rows in BAD_VALUES.items() for argv, message in rows])
def test_bad_values_give_one_error_line_and_exit_2(verb, argv, message, request, tmp_path, toy_config,
                                                  toy_corpus, capsys, monkeypatch):
    places = {"tmp": tmp_path / "empty", "config": toy_config, "corpus": toy_corpus}
    places["tmp"].mkdir()
    for name, fixture in (("rnn", "toy_run"), ("transformer", "toy_transformer_run")):
        if "{" + name + "}" in argv:
            places[name] = request.getfixturevalue(fixture)
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("Hund .\n"))
    capsys.readouterr()
    try:
        code = main(argv.format(**places).split(" "))
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith(f"attnmt {verb}: error: ")]
    assert len(lines) == 1, err
    assert re.search(message, lines[0]), lines[0]


def test_argument_types():
    import argparse

    from attnmt.commands.arguments import (image_path, index_int, non_negative_float, non_negative_int, positive_float,
                                          positive_int)

    assert (positive_int("3"), non_negative_int("0"), index_int("-1")) == (3, 0, -1)
    assert (positive_float("0.5"), non_negative_float("0"), image_path("a/b.PNG")) == (0.5, 0.0, "a/b.PNG")
    for check, text in [(positive_int, "0"), (positive_int, "2.5"), (non_negative_int, "-1"), (index_int, "x"),
                        (positive_float, "0"), (positive_float, "inf"), (positive_float, "nan"),
                        (non_negative_float, "-0.1"), (non_negative_float, "nan"), (image_path, "a.txt"),
                        (image_path, "png")]:
        with pytest.raises(argparse.ArgumentTypeError):
            check(text)


def test_a_model_argument_names_one_folder_or_an_ensemble(tmp_path):
    from attnmt.commands.arguments import ensemble_paths

    assert ensemble_paths("runs/a") == ["runs/a"]
    assert ensemble_paths("runs/a+runs/b") == ["runs/a", "runs/b"]
    assert ensemble_paths("runs/a++runs/b+") == ["runs/a", "runs/b"]
    plus = tmp_path / "de+en"  # a folder whose own name has a '+' is that folder
    plus.mkdir()
    assert ensemble_paths(str(plus)) == [str(plus)]


def test_every_verb_has_bad_value_rows():
    from attnmt.cli import COMMANDS

    assert set(COMMANDS) <= set(BAD_VALUES), f"add rows for {sorted(set(COMMANDS) - set(BAD_VALUES))}"


def test_the_parser_is_built_without_torch():
    """`attnmt --help` imports every verb module to build the parser: none may load torch at its top."""
    code = "import sys, attnmt.cli; attnmt.cli.build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bad_value_in_a_real_process_has_no_traceback(toy_run):
    out = subprocess.run([sys.executable, "-m", "attnmt", "translate", str(toy_run), "--beam", "0"],
                         capture_output=True, text=True, input="Hund .\n")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines()[-1] == "attnmt translate: error: argument --beam: 0 must be a positive integer (1 or more)"


def test_a_bug_keeps_its_traceback(monkeypatch, tmp_path):
    """Only user errors become one line: a ValueError from outside attnmt's checks is a bug."""
    import attnmt.commands.average

    def buggy(args):
        return int("not a number")  # raised in this test module, not by an attnmt check

    monkeypatch.setattr(attnmt.commands.average, "run", buggy)
    with pytest.raises(ValueError, match="invalid literal"):
        main(["average", str(tmp_path)])


def test_a_builtin_error_inside_attnmt_code_keeps_its_traceback(monkeypatch, tmp_path):
    """A ValueError that attnmt code did not `raise` itself (here int() fails) is a bug too."""
    import attnmt.commands.average

    source = tmp_path / "fake.py"
    source.write_text("def buggy(args):\n    return int('not a number')\n")
    namespace = {"__name__": "attnmt.fake"}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    monkeypatch.setattr(attnmt.commands.average, "run", namespace["buggy"])
    with pytest.raises(ValueError, match="invalid literal"):
        main(["average", str(tmp_path)])


def test_verbose_shows_the_traceback_of_a_user_error(toy_run):
    with pytest.raises(ValueError, match="needs a Transformer"):
        main(["-v", "attention", str(toy_run), "Hund", "--layer", "0"])


# ----------------------------------------------------------------------------- demo run directory

def test_demo_refuses_a_real_run_and_leaves_it_intact(toy_run, capsys):
    before = sorted(p.relative_to(toy_run) for p in toy_run.rglob("*"))
    assert main(["demo", "--run-dir", str(toy_run)]) == 2
    assert "was not made by `attnmt demo`" in capsys.readouterr().err
    assert sorted(p.relative_to(toy_run) for p in toy_run.rglob("*")) == before


def test_demo_replaces_only_its_own_folder(tmp_path):
    from attnmt.commands.demo import DEMO_MARKER, prepare_run_dir

    fresh = tmp_path / "a" / "demo"
    prepare_run_dir(fresh)  # a new folder: made and marked
    assert [p.name for p in fresh.iterdir()] == [DEMO_MARKER]
    (fresh / "metrics.jsonl").write_text("{}\n")
    (fresh / "checkpoints").mkdir()
    prepare_run_dir(fresh)  # the demo's own earlier run: replaced
    assert [p.name for p in fresh.iterdir()] == [DEMO_MARKER]

    empty = tmp_path / "empty"
    empty.mkdir()
    prepare_run_dir(empty)
    assert (empty / DEMO_MARKER).is_file()

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "metrics.jsonl").write_text("{}\n")  # looks like a run, but no demo made it
    with pytest.raises(AttnmtError, match="not made by `attnmt demo`"):
        prepare_run_dir(mine)
    assert (mine / "metrics.jsonl").read_text() == "{}\n"


# --------------------------------------------------------------------------- seeds, summaries, comparisons, ensembles

def test_train_seeds_writes_one_run_per_seed(toy_seed_runs):
    for seed, run in enumerate(toy_seed_runs, start=1):
        assert run.name == f"run-seed{seed}"
        assert json.loads((run / "config.json").read_text())["train"]["seed"] == seed
    weights = [(run / "checkpoints" / "epoch_002.safetensors").read_bytes() for run in toy_seed_runs]
    assert weights[0] != weights[1]


def test_summarize_reports_mean_and_sd_over_seeds(toy_seed_runs, capsys):
    import statistics

    from attnmt.translator import Translator

    runs = [str(run) for run in toy_seed_runs]
    capsys.readouterr()
    assert main(["summarize", *runs, "--split", "test", "--beam", "3", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    reports = [Translator.load(run, device="cpu").evaluate("test", beam_size=3) for run in runs]
    for key in ("bleu", "chrf"):
        values = [r[key] for r in reports]
        assert summary[key]["values"] == values
        assert summary[key]["mean"] == pytest.approx(statistics.mean(values))
        assert summary[key]["sd"] == pytest.approx(statistics.stdev(values))
    assert [r["source"] for r in summary["runs"]] == ["evaluated now"] * 2
    assert main(["summarize", *runs, "--split", "test", "--beam", "3"]) == 0  # now from the kept reports
    table = capsys.readouterr().out
    assert table.count("eval_test_beam3.json") == 2
    assert f"{statistics.mean(r['bleu'] for r in reports):.2f} ± " in table


def test_compare_runs_ensembles_and_translation_files(toy_seed_runs, tmp_path, capsys):
    import sacrebleu

    first, second = (str(run) for run in toy_seed_runs)
    test = toy_seed_runs[0].parent / "toy" / "test"
    outputs = {"1": tmp_path / "one.txt", "1+2": tmp_path / "ensemble.txt"}
    assert main(["translate", first, "-i", f"{test}.de", "-o", str(outputs["1"]), "--beam", "3"]) == 0
    assert main(["translate", first, second, "-i", f"{test}.de", "-o", str(outputs["1+2"]), "--beam", "3"]) == 0
    capsys.readouterr()
    assert main(["compare", first, f"{first}+{second}", "--split", "test", "--beam", "3", "--json",
                 "--paired-ar-n", "1000"]) == 0
    from_runs = json.loads(capsys.readouterr().out)
    assert from_runs["systems"] == [first, f"{first}+{second}"] and from_runs["sentences"] == 40
    refs = f"{test}.en"
    assert main(["compare", "--hyp", str(outputs["1"]), "--hyp", str(outputs["1+2"]), "--ref", refs, "--json",
                 "--paired-ar-n", "1000"]) == 0
    from_files = json.loads(capsys.readouterr().out)
    assert from_files["scores"] == from_runs["scores"] and from_files["paired"] == from_runs["paired"]
    references = (toy_seed_runs[0].parent / "toy" / "test.en").read_text().splitlines()
    hyps = [outputs[k].read_text().splitlines() for k in ("1", "1+2")]
    direct = [sacrebleu.corpus_bleu(h, [references]).score for h in hyps]
    assert from_runs["scores"]["BLEU"] == pytest.approx(direct)
    paired = from_runs["paired"][0]["BLEU"]
    assert paired["difference"] == pytest.approx(direct[1] - direct[0])
    assert paired["ci_low"] <= paired["difference"] <= paired["ci_high"]
    assert 0 < paired["p_bootstrap"] <= 1 and 0 < paired["p_randomization"] <= 1
    assert main(["compare", first, first, "--split", "test", "--beam", "3", "--paired-ar-n", "1000"]) == 0
    table = capsys.readouterr().out
    assert "baseline" in table and "BLEU: nrefs:1|bs:1000|seed:12345" in table
    assert re.search(r"\+0\.00 +\[\+0\.00, \+0\.00\] +1\.0000 +1\.0000", table), table


def test_every_verb_decodes_at_the_models_own_beam_unless_told(toy_run, tmp_path, capsys, monkeypatch):
    """One default rule (DecodingOptions.with_defaults): a run whose config says search.beam_size: 1
    (a student that decodes greedily) is decoded greedily by translate, evaluate, the document path
    and the library alike; --beam overrides it."""
    from attnmt.translator import Translator

    greedy = toy.edited_copy(toy_run, tmp_path / "greedy-run", search={"beam_size": 1})
    translator = Translator.load(greedy, device="cpu")
    sources = ["Hund katze rot .", "Mann frau kind ball wasser blau ."]
    assert translator.decoding_options().beam_size == 1
    (tmp_path / "in.de").write_text("\n".join(sources) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["evaluate", str(greedy), "--split", "test"]) == 0
    assert json.loads(capsys.readouterr().out)["beam"] == 1
    assert (greedy / "eval_test_beam1.json").is_file()
    assert main(["evaluate", str(greedy), "--split", "test", "--beam", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["beam"] == 3
    for beam in (None, 3):
        out = tmp_path / f"out-{beam}.en"
        argv = ["translate", str(greedy), "-i", str(tmp_path / "in.de"), "-o", str(out), "--n-best", "1"]
        assert main(argv + ([] if beam is None else ["--beam", str(beam)])) == 0
        expected = [r.text for r in translator.translate(sources, beam_size=beam or 1)]
        assert out.read_text(encoding="utf-8").splitlines() == expected
    with pytest.raises(ValueError, match="n_best=2 must be between 1 and beam_size=1"):
        translator.translate(sources, n_best=2)  # the model's beam is 1: two alternatives cannot be

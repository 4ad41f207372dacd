"""`attnmt distill` on the toy tasks: the stages' outputs (checked against the teacher used
directly), resumption after a stop between stages and in the middle of one (same outputs as a run
never stopped), damaged outputs refused, the table printed, a multilingual teacher."""

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("ctranslate2")

from support import toy  # noqa: E402
from attnmt.cli import main  # noqa: E402

TRAIN_PAIRS = 200  # data.train_subset: the teacher translates this many training sources
COMMON = ["--beam", "2", "--shard-lines", "50", "--filter-share", "0.1", "--original-weight", "0.5"]


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("distill")


@pytest.fixture(scope="module")
def teacher(base):
    """A tiny Transformer on the copy task (3 epochs: good enough to be distilled, seconds)."""
    config = toy.write_config(base / "copy.yaml", "copy", "transformer", epochs=3, batch_size=32, beam_size=5,
                              train=dict(log_every=100, eval_max_sentences=8, num_threads=1))
    assert main(["train", str(config), "--run-dir", str(base / "teacher")]) == 0
    return base / "teacher"


@pytest.fixture(scope="module")
def student_config(base, teacher):
    """A tiny student (2 encoder layers, 1 decoder layer) over the teacher's corpus."""
    path = base / "student.yaml"
    path.write_text(toy.config_text(base / "copy", "transformer", epochs=2, batch_size=32, beam_size=1,
                                    data=dict(train_subset=TRAIN_PAIRS),
                                    model=dict(enc_layers=2, dec_layers=1),
                                    train=dict(log_every=100, eval_max_sentences=8, num_threads=1,
                                               save_every_steps=3)))
    return path


@pytest.fixture(scope="module")
def reference(base, teacher, student_config):
    """One distillation never stopped, and what it printed."""
    import io
    from contextlib import redirect_stdout

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["distill", str(teacher), "--student", str(student_config), "-o", str(base / "ref"), *COMMON]) == 0
    return base / "ref", out.getvalue()


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_stage_outputs_are_the_teachers(reference, teacher):
    from attnmt.translator import Translator

    folder, _ = reference
    sources = _lines(folder / "data" / "train0.de")
    assert sources == _lines(teacher.parent / "copy" / "train.de")[:TRAIN_PAIRS]
    outputs = _lines(folder / "teacher" / "train0.en")
    direct = Translator.load(teacher)
    assert outputs == [r.text for r in direct.translate(sources, beam_size=2)]
    # the filter: the 10% of pairs with the highest per-token cross-entropy under forced decoding
    scored = direct.score(sources, outputs)
    ce = [-r.log_prob / r.num_tokens for r in scored]
    worst = sorted(range(len(ce)), key=lambda i: -ce[i])[:TRAIN_PAIRS // 10]
    dropped = [int(x) for x in _lines(folder / "filter" / "train0.dropped")]
    assert sorted(dropped) == sorted(i + 1 for i in worst)
    kept = [i for i in range(len(sources)) if i not in set(worst)]
    assert _lines(folder / "corpus" / "train0.de") == [sources[i] for i in kept]
    assert _lines(folder / "corpus" / "train0.en") == [outputs[i] for i in kept]
    student = json.loads((folder / "student.json").read_text())
    assert student["data"]["train"] == [
        {"path": str(folder / "corpus" / "train0"), "weight": 1.0, "pair": None},
        {"path": str(folder / "data" / "train0"), "weight": 0.5, "pair": None}]
    assert student["data"]["train_subset"] is None
    state = json.loads((folder / "distill.json").read_text())
    assert [s for s in state["stages"] if state["stages"][s]["done"]] == ["teacher", "filter", "corpus", "student",
                                                                       "export", "evaluate"]
    assert state["stages"]["corpus"]["prepared_pairs"] == len(kept) + len(sources)
    for name, record in state["files"].items():  # every record matches its file
        assert _sha(folder / name) == record["sha256"], name
    assert (folder / "student-ct2-int8" / "vmap.txt").is_file()


def test_the_table_is_printed(reference):
    folder, printed = reference
    report = json.loads((folder / "report.json").read_text())
    systems = [row["system"] for row in report["rows"]]
    # the teacher at its beam (2 here) and at the student's (1): what the student has to beat
    assert systems == ["teacher teacher", "teacher teacher", "student int8", "student int8 + vmap"]
    assert [row["beam"] for row in report["rows"]] == [2, 1, 1, 1]
    head = printed.splitlines()[0].split()
    assert head[:5] == ["pair", "system", "engine", "beam", "BLEU"] and head[-2:] == ["sent/s", "MB"]
    rows = [line for line in printed.splitlines() if line.startswith("de-en ")]
    assert len(rows) == 4
    # the scores are sacreBLEU's on the files the stages wrote
    import sacrebleu
    from attnmt.translator import Translator

    refs = _lines(folder / "data" / "test.en")
    bleu = sacrebleu.corpus_bleu(_lines(folder / "teacher" / "test.en"), [refs]).score
    assert report["rows"][0]["BLEU"] == pytest.approx(bleu, abs=0.01)
    assert f"{bleu:.2f}" in rows[0]
    greedy = _lines(folder / "teacher" / "test-beam1.en")
    direct = Translator.load(folder.parent / "teacher")  # the teacher's greedy output, made here independently
    assert greedy == [r.text for r in direct.translate(_lines(folder / "data" / "test.de"), beam_size=1)]
    assert report["rows"][1]["BLEU"] == pytest.approx(sacrebleu.corpus_bleu(greedy, [refs]).score, abs=0.01)
    for row in report["rows"][1:]:
        assert row["dBLEU"] == pytest.approx(row["BLEU"] - report["rows"][0]["BLEU"], abs=0.02)
        assert row["sentences_per_s"] > 0 and 0 <= row["p_ar"] <= 1
    best = json.loads((folder.parent / "teacher" / "best.json").read_text())["file"]
    assert report["rows"][0]["megabytes"] == pytest.approx((folder.parent / "teacher" / best).stat().st_size / 1e6,
                                                           abs=0.01)


def test_resume_after_stops_between_and_inside_stages_gives_the_same_outputs(base, teacher, student_config,
                                                                               reference, monkeypatch):
    """Stopped inside the teacher's shards, inside the filter's, between corpus and student, inside
    the student's training (after its first epoch's state) and inside the export: each --resume
    goes on, and the outputs are those of the run never stopped."""
    import attnmt.distillation.stages as stages
    import attnmt.training.loop as loop
    from attnmt.sharding import run_shards

    folder = base / "stopped"

    class Stop(Exception):
        pass

    left = {"shards": 2}  # shards (teacher's and filter's, in order) done before the next one stops

    def shards_then_stop(job, work):
        def counted(columns):
            if left["shards"] == 0:
                raise Stop("inside the shards")
            left["shards"] -= 1
            return work(columns)
        run_shards(job, counted)

    monkeypatch.setattr(stages, "run_shards", shards_then_stop)
    monkeypatch.chdir(base)  # started as `-o stopped` here; resumed from another folder once the corpus is made
    with pytest.raises(Stop):  # teacher: 2 of 4 shards of train0 done
        main(["distill", str(teacher), "--student", str(student_config), "-o", "stopped", *COMMON])
    assert len(list((folder / "teacher" / "train0.en.shards").glob("shard-*.txt"))) == 2
    left["shards"] = 2 + 1  # the teacher's last 2 shards, the filter's first; its second stops
    with pytest.raises(Stop):
        main(["distill", "--resume", "stopped"])
    state = json.loads((folder / "distill.json").read_text())
    assert state["stages"]["teacher"]["done"] and not state["stages"]["filter"].get("done")
    assert len(list((folder / "filter" / "train0.ce.shards").glob("shard-*.txt"))) == 1
    monkeypatch.setattr(stages, "run_shards", run_shards)

    def stop(*args, **kwargs):
        raise Stop("between stages")
    monkeypatch.setattr(stages, "stage_student", stop)
    with pytest.raises(Stop):
        main(["distill", "--resume", "stopped"])
    monkeypatch.undo()  # and back in the folder the tests started in
    state = json.loads((folder / "distill.json").read_text())
    assert state["stages"]["corpus"]["done"] and not state["stages"].get("student", {}).get("done")

    real_epoch = loop.Trainer._run_epoch

    def first_epoch_only(self, epoch):
        if epoch == 2:
            raise Stop("inside the student's training")
        return real_epoch(self, epoch)
    monkeypatch.setattr(loop.Trainer, "_run_epoch", first_epoch_only)
    with pytest.raises(Stop):
        main(["distill", "--resume", str(folder)])
    monkeypatch.undo()
    assert (folder / "student" / "train_state.json").is_file()
    first_epoch = folder / "student" / "checkpoints" / "epoch_001.safetensors"
    written = (first_epoch.stat().st_ino, first_epoch.stat().st_mtime_ns)  # resumed, not trained again

    import attnmt.engines.ctranslate2_export as export

    def broken_export(*args, **kwargs):
        raise Stop("inside the export")
    monkeypatch.setattr(export, "export_run", broken_export)
    with pytest.raises(Stop):
        main(["distill", "--resume", str(folder)])
    monkeypatch.undo()
    assert main(["distill", "--resume", str(folder)]) == 0
    assert (first_epoch.stat().st_ino, first_epoch.stat().st_mtime_ns) == written

    ref, _ = reference
    for name in ("data/train0.de", "teacher/train0.en", "teacher/test.en", "teacher/test-beam1.en", "filter/train0.ce",
                 "filter/train0.dropped", "corpus/train0.de", "corpus/train0.en", "student-ct2-int8/vmap.txt"):
        assert _sha(folder / name) == _sha(ref / name), name
    best = json.loads((ref / "student" / "best.json").read_text())["file"]
    from attnmt.checkpoint import recorded_digest

    # the student trained exactly alike: the same tensors (the digest of them saved in the file's metadata)
    assert recorded_digest(folder / "student" / best) == recorded_digest(ref / "student" / best)
    rows = json.loads((folder / "report.json").read_text())["rows"]
    ref_rows = json.loads((ref / "report.json").read_text())["rows"]
    assert [(r["BLEU"], r["chrF"]) for r in rows] == [(r["BLEU"], r["chrF"]) for r in ref_rows]


@pytest.fixture
def damaged(base, reference, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(reference[0], folder)
    return folder


def test_a_changed_stage_output_is_refused(damaged, capsys):
    path = damaged / "teacher" / "train0.en"
    lines = _lines(path)
    lines[5] = "something else"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["distill", "--resume", str(damaged), "--redo", "corpus"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: changed since stage 'teacher' wrote it" in err
    assert f"--resume {damaged} --redo teacher" in err
    assert "Traceback" not in err


def test_a_cut_or_missing_output_is_refused(damaged, capsys):
    (damaged / "student-ct2-int8" / "vmap.txt").unlink()
    assert main(["distill", "--resume", str(damaged), "--redo", "evaluate"]) == 2
    assert "vmap.txt: missing (stage 'export' wrote it)" in capsys.readouterr().err
    path = damaged / "corpus" / "train0.en"
    path.write_text("".join(line + "\n" for line in _lines(path)[:-3]), encoding="utf-8")
    assert main(["distill", "--resume", str(damaged), "--redo", "student"]) == 2
    assert "has 177 lines, stage 'corpus' wrote 180" in capsys.readouterr().err


def test_a_damaged_state_file_is_refused(damaged, capsys):
    state = json.loads((damaged / "distill.json").read_text())
    state["settings"]["beam"] = "five"
    state["settings"]["colour"] = 1
    (damaged / "distill.json").write_text(json.dumps(state))
    assert main(["distill", "--resume", str(damaged)]) == 2
    assert "distill.json: settings.colour: unknown setting" in capsys.readouterr().err
    (damaged / "distill.json").write_text("{")
    assert main(["distill", "--resume", str(damaged)]) == 2
    assert "distill.json: corrupted JSON" in capsys.readouterr().err


def test_folders_that_are_not_distillations_are_left_alone(tmp_path, teacher, student_config, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["distill", str(teacher), "--student", str(student_config), "-o", str(mine)]) == 2
    assert "is not empty and is not a distillation" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    assert main(["distill", "--resume", str(mine)]) == 2
    assert "not a distillation (no distill.json)" in capsys.readouterr().err
    assert main(["distill", "--resume", str(tmp_path / "nowhere")]) == 2
    assert not (tmp_path / "nowhere").exists()
    assert main(["distill", str(teacher), "--resume", str(mine)]) == 2
    assert "drop TEACHER" in capsys.readouterr().err


def test_a_direction_the_teacher_lacks_is_refused(tmp_path, teacher, student_config, capsys):
    assert main(["distill", str(teacher), "--student", str(student_config), "-o", str(tmp_path / "d"),
                 "--set", "data.tgt_lang=fr"]) == 2
    err = capsys.readouterr().err
    assert "data.src_lang / data.tgt_lang names de-fr, which the teacher" in err and "it has de-en" in err
    assert not (tmp_path / "d").exists()


def test_out_of_time_stops_and_says_how_to_go_on(tmp_path, teacher, student_config, capsys):
    assert main(["distill", str(teacher), "--student", str(student_config), "-o", str(tmp_path / "d"),
                 "--max-minutes", "1e-9"]) == 2
    err = capsys.readouterr().err
    assert "the time budget (--max-minutes 1e-09) ran out in stage 'teacher'" in err
    assert f"attnmt distill --resume {tmp_path / 'd'} --max-minutes M" in err


def test_the_commands_stage_names_are_the_librarys():
    from attnmt.commands.distill import FILTER_NAMES, STAGE_NAMES
    from attnmt.distillation import STAGES
    from attnmt.distillation.state import FILTERS

    assert STAGE_NAMES == STAGES and FILTER_NAMES == FILTERS


def test_a_multilingual_teacher_gives_one_student_of_its_directions(tmp_path, capsys):
    pairs = ["de-en", "de-fr"]
    config = toy.write_multilingual_config(tmp_path / "multi.yaml", epochs=2, pairs=pairs, train_size=60)
    assert main(["train", str(config), "--run-dir", str(tmp_path / "teacher")]) == 0
    import yaml

    from attnmt.translator import Translator

    student = yaml.safe_load(config.read_text())
    student["model"].update(enc_layers=1, dec_layers=1)
    student["train"].update(epochs=1)
    (tmp_path / "student.yaml").write_text(yaml.safe_dump(student))
    capsys.readouterr()
    assert main(["distill", str(tmp_path / "teacher"), "--student", str(tmp_path / "student.yaml"),
                 "-o", str(tmp_path / "d"), "--beam", "2"]) == 0
    printed = capsys.readouterr().out
    folder = tmp_path / "d"
    report = json.loads((folder / "report.json").read_text())
    assert [(r["pair"], r["system"].split()[0]) for r in report["rows"]] == [
        (p, s) for p in pairs for s in ("teacher", "teacher", "student", "student")]  # teacher: beam 2, then 1
    assert sum(line.startswith(("de-en ", "de-fr ")) for line in printed.splitlines()) == 8
    assert _lines(folder / "teacher" / "test-de-fr-beam1.fr") == [
        r.text for r in Translator.load(tmp_path / "teacher").translate(
            _lines(folder / "data" / "test-de-fr.de"), beam_size=1, source_lang="de", target_lang="fr")]
    trained = json.loads((folder / "student.json").read_text())["data"]
    assert [(c["path"].rsplit("/", 1)[1], c["pair"]) for c in trained["train"]] == [
        ("train0-de-en", "de-en"), ("train1-de-fr", "de-fr")]
    multi = Translator.load(tmp_path / "teacher")
    sources = _lines(folder / "data" / "train1-de-fr.de")
    assert _lines(folder / "teacher" / "train1-de-fr.fr") == [
        r.text for r in multi.translate(sources, beam_size=2, source_lang="de", target_lang="fr")]
    student_run = Translator.load(folder / "student")
    assert [str(d) for d in student_run.directions] == pairs


@pytest.mark.slow
def test_a_killed_process_resumes_to_the_same_outputs(base, teacher, student_config, reference, tmp_path):
    """SIGKILL (a subprocess past its timeout) in the middle of the teacher's translation."""
    folder = tmp_path / "killed"
    command = [sys.executable, "-m", "attnmt", "distill", str(teacher), "--student", str(student_config),
               "-o", str(folder), *COMMON]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list((folder / "teacher" / "train0.en.shards").glob("shard-*.txt")):
        time.sleep(0.05)
    process.kill()
    process.wait()
    assert not (folder / "distill.json").is_file() or not json.loads(
        (folder / "distill.json").read_text())["stages"].get("teacher", {}).get("done")
    assert subprocess.run([sys.executable, "-m", "attnmt", "distill", "--resume", str(folder)],
                          capture_output=True).returncode == 0
    ref, _ = reference
    for name in ("teacher/train0.en", "corpus/train0.en", "student-ct2-int8/vmap.txt"):
        assert _sha(folder / name) == _sha(ref / name), name
    assert not math.isnan(json.loads((folder / "report.json").read_text())["rows"][1]["BLEU"])


def test_the_student_configs_own_time_bound_holds_under_a_larger_budget(tmp_path, teacher, student_config):
    """--max-minutes gives the student what the other stages leave, but never more than the
    student config's own train.max_minutes (how a distilled and a reference student get equal time)."""
    d = tmp_path / "d"
    assert main(["distill", str(teacher), "--student", str(student_config), "-o", str(d), "--beam", "2",
                 "--max-minutes", "30", "--set", "train.max_minutes=0.25"]) == 0
    trained = json.loads((d / "student" / "config.json").read_text())["train"]["max_minutes"]
    assert trained == 0.25


def test_a_student_shrunk_from_its_teacher_is_distilled(tmp_path, teacher, student_config):
    """`--set train.init_from=TEACHER` with fewer decoder layers: the student stage starts from the
    teacher's weights (its first decoder layer, the student's only one) and the rest runs as usual."""
    from safetensors.torch import load_file

    d = tmp_path / "d"
    assert main(["distill", str(teacher), "--student", str(student_config), "-o", str(d), "--beam", "2",
                 "--set", f"train.init_from={teacher}", "--set", "train.lr=1e-9"]) == 0
    saved = json.loads((d / "student" / "config.json").read_text())
    assert saved["train"]["init_from"] == str(teacher.resolve()) and saved["model"]["dec_layers"] == 1
    teacher_weights = load_file(str(teacher / json.loads((teacher / "best.json").read_text())["file"]))
    student_weights = load_file(str(d / "student" / json.loads((d / "student" / "best.json").read_text())["file"]))
    assert sorted(student_weights) == sorted(n for n in teacher_weights if not n.startswith("decoder_layers.1."))
    for name, tensor in student_weights.items():  # lr 1e-9: what it started from
        assert (tensor - teacher_weights[name]).abs().max() < 1e-5, name
    assert json.loads((d / "report.json").read_text())["rows"][-1]["BLEU"] > 0


# ---- issue 66: redo leaves a resumable state, settings type-checked, the teacher never written into

def test_redo_teacher_on_a_finished_distillation_resumes_to_the_same_outputs(damaged, reference, capsys):
    """`--redo teacher` forgot student_config.json (recorded under the teacher stage) and broke
    the distillation for good; now every stage is made again, and resuming after it finds
    everything done. The teacher translates alike and the student trains anew to the same tensors."""
    from attnmt.checkpoint import recorded_digest

    ref, _ = reference
    assert main(["distill", "--resume", str(damaged), "--redo", "teacher"]) == 0
    assert main(["distill", "--resume", str(damaged)]) == 0  # resumable after it: everything done
    capsys.readouterr()
    state = json.loads((damaged / "distill.json").read_text())
    assert all(state["stages"][stage]["done"] for stage in state["stages"])
    assert state["files"]["student_config.json"]["stage"] == "start"
    for name in ("teacher/train0.en", "corpus/train0.en", "teacher/test.en"):
        assert _sha(damaged / name) == _sha(ref / name), name
    best = json.loads((ref / "student" / "best.json").read_text())["file"]
    assert recorded_digest(damaged / "student" / best) == recorded_digest(ref / "student" / best)


def test_redo_student_trains_it_anew(damaged, capsys):
    """A redone student starts over (it resumed the finished training, which then did nothing)."""
    log = damaged / "student" / "metrics.jsonl"
    first = damaged / "student" / "checkpoints" / "epoch_001.safetensors"
    os.utime(first, ns=(0, 0))  # marked: trained anew, it is written again
    assert main(["distill", "--resume", str(damaged), "--redo", "student"]) == 0
    capsys.readouterr()
    state = json.loads((damaged / "distill.json").read_text())
    assert state["stages"]["student"]["done"] and "restart" not in state["stages"]["student"]
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events == ["start", "epoch", "epoch", "end"], events
    assert first.stat().st_mtime_ns != 0  # the first epoch trained again (it was resumed, finished, doing nothing)


def test_the_filter_by_confidence_drops_the_pairs_the_calibrated_teacher_trusts_least(base, teacher, student_config,
                                                                                    capsys):
    """--filter-by confidence: each pair's confidence is the teacher's map of its forced decoding's
    features; at beam 1 these are the greedy search's own (the same tokens, log-probabilities and
    attention; a lone hypothesis), so the search path gives the expected figures independently."""
    from attnmt.run_dir import RunDir
    from attnmt.translator import Translator

    calibrated = base / "calibrated-teacher"
    shutil.copytree(teacher, calibrated)
    uncalibrated = ["distill", str(teacher), "--student", str(student_config), "-o", str(base / "by-conf-refused"),
                    "--beam", "1", "--filter-share", "0.1", "--filter-by", "confidence"]
    assert main(uncalibrated) == 2
    assert "has no calibration: run `attnmt calibrate" in capsys.readouterr().err
    assert not (base / "by-conf-refused").exists()
    copy, held = teacher.parent / "copy", base / "held-out"  # calibrated on pairs the filter does not see
    held.mkdir()
    for side in ("de", "en"):
        (held / f"pairs.{side}").write_text("\n".join(_lines(copy / f"train.{side}")[TRAIN_PAIRS:]) + "\n")
    assert main(["calibrate", str(calibrated), "--src", str(held / "pairs.de"), "--ref", str(held / "pairs.en"),
                 "--beam", "1"]) == 0
    folder = base / "by-confidence"
    assert main(["distill", str(calibrated), "--student", str(student_config), "-o", str(folder), "--beam", "1",
                 "--shard-lines", "50", "--filter-share", "0.1", "--filter-by", "confidence"]) == 0
    capsys.readouterr()
    sources = _lines(folder / "data" / "train0.de")
    direct = Translator.load(calibrated)
    found = direct.translate(sources, beam_size=1)
    assert _lines(folder / "teacher" / "train0.en") == [r.text for r in found]
    calibration = RunDir(calibrated).calibration()
    expected = [(r.confidence, calibration.predicted_chrf(direct.confidence_features(r))) for r in found]
    written = [tuple(-float(v) for v in line.split("\t")) for line in _lines(folder / "filter" / "train0.confidence")]
    assert len(written) == len(expected)
    compared = 0
    for (c, p), (want_c, want_p), result in zip(written, expected, found):
        if result.at_length_bound:  # cut by the search; scored as given, it ends with <eos>: other features
            continue
        assert p == pytest.approx(want_p, abs=1e-3)
        assert c == pytest.approx(want_c, abs=1e-3 * calibration.slope / 4 + 1e-9)  # the curve's steepest: slope / 4
        compared += 1
    assert compared > TRAIN_PAIRS // 2
    worst = sorted(range(len(written)), key=lambda i: (written[i], i))[:TRAIN_PAIRS // 10]
    assert sorted(int(x) for x in _lines(folder / "filter" / "train0.dropped")) == sorted(i + 1 for i in worst)
    assert json.loads((folder / "distill.json").read_text())["settings"]["filter_by"] == "confidence"


@pytest.mark.parametrize("key, value, message", [
    ("batch_size", "x", "settings.batch_size='x' must be an integer"),
    ("beam", 0, "settings.beam=0 must be in 1..16"),
    ("shard_lines", True, "settings.shard_lines=True must be an integer"),
    ("filter_share", "0.1", "settings.filter_share='0.1' must be a number"),
    ("quantization", "int3", "settings.quantization='int3': expected one of"),
    ("filter_by", "bleu", "settings.filter_by='bleu': expected one of"),
    ("teacher", "runs/a", "settings.teacher: expected a list"),
    ("checkpoint", None, "settings.checkpoint: expected a name or file"),
])
def test_a_setting_of_the_wrong_type_is_one_line_naming_it(damaged, capsys, key, value, message):
    """distill.json with "batch_size": "x" raised TypeError on resume (a traceback, exit 1)."""
    state = json.loads((damaged / "distill.json").read_text())
    state["settings"][key] = value
    (damaged / "distill.json").write_text(json.dumps(state))
    assert main(["distill", "--resume", str(damaged)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"distill.json: {message}" in err, err


@pytest.mark.parametrize("spec", ["+", "++", " + "])
def test_a_plus_without_a_run_on_a_side_is_one_line(tmp_path, capsys, spec):
    """`attnmt distill +` raised IndexError."""
    assert main(["distill", spec, "-o", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "names no run; an ensemble is runs joined by '+'" in err
    assert not (tmp_path / "d").exists()


def test_a_distillation_inside_its_teacher_is_refused(teacher, student_config, capsys):
    """`-o TEACHER/sub` (or a folder under checkpoints/) wrote a whole distillation inside the run
    it reads: only "not empty" was checked."""
    empty = teacher / "checkpoints" / "empty"
    empty.mkdir()
    try:
        for output in (teacher / "sub", empty, teacher):
            assert main(["distill", str(teacher), "--student", str(student_config), "-o", str(output)]) == 2
            err = capsys.readouterr().err
            assert f"{output}: is inside the teacher {teacher}" in err or f"{output}: holds the teacher" in err, err
        assert not (teacher / "sub").exists() and not any(empty.iterdir())
    finally:
        empty.rmdir()

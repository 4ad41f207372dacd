"""Smoke test of benchmarks/speed/bench_distill.py on toy exports: it runs, prints its columns
(teacher, student, student + vmap) and its BLEU is sacreBLEU's on the systems' own translations."""

import json

import pytest

pytest.importorskip("ctranslate2")

from support import toy  # noqa: E402
from attnmt.cli import main as attnmt  # noqa: E402
from benchmarks.speed import bench_distill  # noqa: E402


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """A toy Transformer trained one epoch, exported twice: as the teacher (int8) and as the
    student (int8 with its vocabulary map)."""
    base = tmp_path_factory.mktemp("bench_distill")
    config = toy.write_config(base / "toy.yaml", "copy", "transformer", epochs=1, batch_size=32,
                              train=dict(eval_max_sentences=4, num_threads=1))
    assert attnmt(["train", str(config), "--run-dir", str(base / "run")]) == 0
    assert attnmt(["export", str(base / "run"), "-o", str(base / "teacher"), "--quantization", "int8"]) == 0
    assert attnmt(["export", str(base / "run"), "-o", str(base / "student"), "--quantization", "int8",
                   "--vocab-map"]) == 0
    return base


def test_prints_the_speed_columns_and_bleu(exports, capsys):
    import sacrebleu

    from attnmt import Translator

    src, ref = exports / "toy" / "test.de", exports / "toy" / "test.en"
    report_path = exports / "bench.json"
    assert bench_distill.main(["--teacher", str(exports / "teacher"), "--student", str(exports / "student"),
                               "--src", str(src), "--ref", str(ref), "--rounds", "1",
                               "--json", str(report_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["system", "engine", "beam", "vmap", "sentences", "median_s", "sent/s", "tok/s",
                                  "x", "teacher", "BLEU", "chrF"]
    assert [line.split()[:2] for line in printed[2:5]] == [["teacher", "ctranslate2"], ["student", "ctranslate2"],
                                                          ["student", "+"]]
    rows = json.loads(report_path.read_text())["results"]
    assert [(r["system"], r["beam"], r["vmap"], r["sentences"]) for r in rows] == [
        ("teacher", 5, False, 40), ("student", 1, False, 40), ("student + vmap", 1, True, 40)]
    assert rows[0]["vs_teacher"] == 1.0 and all(r["sentences_per_s"] > 0 for r in rows)
    sources, refs = src.read_text().splitlines(), ref.read_text().splitlines()
    teacher = [r.text for r in Translator.load(exports / "teacher", engine="ctranslate2").translate(sources, beam_size=5)]
    assert rows[0]["bleu"] == pytest.approx(sacrebleu.corpus_bleu(teacher, [refs]).score, abs=0.01)


def test_a_student_without_a_map_is_refused(exports, capsys):
    assert bench_distill.main(["--teacher", str(exports / "teacher"), "--student", str(exports / "teacher"),
                               "--src", "x", "--ref", "y", "--json", ""]) == 2
    assert "has no vmap.txt: export the student with --vocab-map" in capsys.readouterr().err


def test_an_ensemble_teacher_decodes_natively(exports, capsys):
    """runs/a+runs/b as the teacher: the native engine's ensemble. An ensemble of a model with
    itself averages equal probabilities, so its translations are the single model's."""
    import sacrebleu

    from attnmt import Translator

    src, ref = exports / "toy" / "test.de", exports / "toy" / "test.en"
    run = exports / "run"
    report_path = exports / "bench-ensemble.json"
    assert bench_distill.main(["--teacher", f"{run}+{run}", "--teacher-checkpoint", "last", "--student",
                               str(exports / "student"), "--src", str(src), "--ref", str(ref), "--rounds", "1",
                               "--json", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    teacher_row = report["results"][0]
    assert (teacher_row["system"], teacher_row["engine"], teacher_row["beam"]) == ("teacher", "native", 5)
    assert report["settings"]["teacher_checkpoint"] == "last"
    sources, refs = src.read_text().splitlines(), ref.read_text().splitlines()
    single = [r.text for r in Translator.load(run, checkpoint="last").translate(sources, beam_size=5)]
    assert teacher_row["bleu"] == pytest.approx(sacrebleu.corpus_bleu(single, [refs]).score, abs=0.01)


def test_a_multilingual_pair_is_timed_on_its_own_test_files(tmp_path, capsys):
    """--pair de-fr: a multilingual teacher and student translate the de-fr test files, told the
    direction; the BLEU is sacreBLEU's on what the student writes into French. Without --pair a
    multilingual student is refused, naming its directions."""
    import sacrebleu

    from attnmt import Translator

    pairs = ["de-en", "de-fr"]
    config = toy.write_multilingual_config(tmp_path / "multi.yaml", epochs=1, pairs=pairs, train_size=60)
    assert attnmt(["train", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    assert attnmt(["export", str(tmp_path / "run"), "-o", str(tmp_path / "student"), "--quantization", "int8",
                   "--vocab-map"]) == 0
    common = ["--teacher", str(tmp_path / "run"), "--teacher-checkpoint", "last", "--student",
              str(tmp_path / "student"), "--split", "test", "--rounds", "1"]
    assert bench_distill.main(common + ["--json", ""]) == 2
    assert "is multilingual: name the direction to time with --pair SRC-TGT (de-en, de-fr)" in capsys.readouterr().err

    report_path = tmp_path / "bench.json"
    assert bench_distill.main(common + ["--pair", "de-fr", "--json", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    assert report["settings"]["pair"] == "de-fr"
    sources = (tmp_path / "multi" / "test.de").read_text(encoding="utf-8").splitlines()
    refs = (tmp_path / "multi" / "test.fr").read_text(encoding="utf-8").splitlines()
    student = Translator.load(tmp_path / "student", engine="ctranslate2")
    student.engine.use_vmap = False
    texts = [r.text for r in student.translate(sources, beam_size=1, source_lang="de", target_lang="fr")]
    row = report["results"][1]
    assert (row["system"], row["sentences"]) == ("student", len(sources))
    assert row["bleu"] == pytest.approx(sacrebleu.corpus_bleu(texts, [refs]).score, abs=0.01)

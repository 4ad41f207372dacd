"""Smoke tests of benchmarks/quality/ and benchmarks/speed/serve_models.py: each runs on a little
data and reports what the test can check by itself."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import toy
from benchmarks.quality import alignment_toy, constraints_multi30k, langid_multi30k, moses_before_bpe
from benchmarks.quality.alignment_toy import accuracy, gold
from benchmarks.speed import serve_models


def test_langid_reports_accuracy_per_word_cut(multi30k_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    out = tmp_path / "langid.json"
    assert langid_multi30k.main(["--sentences", "5", "--words", "0", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["identifier"], r["words"], r["sentences"]) for r in rows] == [("py3langid", 0, 20), ("py3langid", 1, 20)]
    for row in rows:  # the overall accuracy is the mean of the four languages' (5 sentences each)
        assert row["accuracy"] == pytest.approx(sum(row["per_language"].values()) / 4, abs=1e-4)
    assert rows[0]["accuracy"] >= 0.9  # whole Multi30k sentences are easy
    assert langid_multi30k.main(["--words", "-1"]) == 2
    assert langid_multi30k.main(["--identifiers", "lexicon"]) == 2  # whose lexicons: --run RUN


def test_langid_by_a_runs_lexicons_reads_text_typed_another_way(multi30k_dir, tmp_path, monkeypatch):
    """`--identifiers lexicon --run RUN`: a multilingual run's lexicons (here counted on the first 2,000
    training captions of each language), the sentences typed as robustness.py varies them."""
    from attnmt.data.corpus import multi30k_path, read_lines
    from attnmt.data.lexicon import Lexicon, Lexicons

    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    langs = ("de", "fr", "en")
    Lexicons({lang: Lexicon.from_sentences(s.split() for s in read_lines(multi30k_path("train", lang))[:2000])
              for lang in langs}).save(tmp_path)
    out = tmp_path / "langid.json"
    assert langid_multi30k.main(["--identifiers", "lexicon", "--run", str(tmp_path), "--langs", *langs,
                                 "--typed", "clean", "uppercase", "--sentences", "20", "--words", "0",
                                 "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["typed"], r["sentences"]) for r in rows] == [("clean", 60), ("uppercase", 60)]
    assert all(row["accuracy"] >= 0.95 for row in rows), rows


class _Pieces:
    """A stand-in subword model: text -> the pieces given."""

    def __init__(self, pieces):
        self.pieces = pieces

    def tokenize(self, text):
        return self.pieces


def test_moses_before_bpe_pieces_without_boundaries_by_hand():
    cut = moses_before_bpe.pieces_without_boundaries
    assert cut(_Pieces(["\u2581a", "\u2581man", "\u2581", "."]), "") == ("a", "man", ".")
    assert cut(_Pieces(["\u2581a", "\u2581man", "\u2581."]), "") == ("a", "man", ".")


def test_moses_before_bpe_counts_by_hand(tmp_path):
    """Two sentences a language: one Moses gives back ("sits." -> "sits ." -> "sits."), one it
    cannot (a space before the full stop is lost), counted by hand."""
    texts = {"en": ["A man sits.", "a dog runs ."], "de": ["Ein Mann sitzt.", "ein Hund rennt ."]}
    rows = moses_before_bpe.compare(texts, vocab_size=60, lowercase=True, cache_dir=tmp_path)
    assert [r["lang"] for r in rows] == ["en", "de"]
    for row in rows:
        assert row["sentences"] == 2 and row["moses_round_trip"] == 0.5
        assert row["words_per_sentence"] == 3.5 and row["moses_tokens_per_sentence"] == 4.0
    # the subword columns, recomputed here from the two models compare() trained (found in its cache
    # folders) and the sentences, lowercased and Moses-tokenized as the script says (before: a value's
    # own range, 0 <= same_pieces <= 1, which no computation fails)
    import sentencepiece as spm

    from attnmt.data.tokenizers import MosesTokenizer

    models = {name: [spm.SentencePieceProcessor(model_file=str(path)) for path in (tmp_path / name).glob("*.model")]
              for name in ("raw", "moses")}
    assert all(len(found) == 1 for found in models.values()), models

    def pieces(name, text):
        return tuple(p for p in (piece.replace("\u2581", "") for piece in models[name][0].encode(text, out_type=str)) if p)

    for row in rows:
        raw = [s.lower() for s in texts[row["lang"]]]
        moses = [" ".join(MosesTokenizer(row["lang"]).tokenize(s)) for s in raw]
        by_raw, by_moses = [pieces("raw", s) for s in raw], [pieces("moses", s) for s in moses]
        assert row["pieces_per_sentence_raw"] == round(sum(map(len, by_raw)) / 2, 2)
        assert row["pieces_per_sentence_moses"] == round(sum(map(len, by_moses)) / 2, 2)
        assert row["same_pieces"] == sum(a == b for a, b in zip(by_raw, by_moses)) / 2


def test_moses_before_bpe_runs_on_multi30k(multi30k_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    out = tmp_path / "moses.json"
    assert moses_before_bpe.main(["--sentences", "300", "--vocab-size", "500", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["lang"], r["sentences"]) for r in rows] == [("en", 300), ("de", 300)]
    assert all(r["moses_round_trip"] > 0.9 for r in rows)  # captions are plain text
    assert "the same pieces in" in capsys.readouterr().out
    for bad in (["--pair", "en"], ["--pair", "en-en"], ["--vocab-size", "5"], ["--sentences", "0"]):
        assert moses_before_bpe.main(bad) == 2, bad
    capsys.readouterr()
    assert moses_before_bpe.main(["--pair", "en-xx", "--json", ""]) == 2  # Multi30k has no xx: one line, named
    err = capsys.readouterr().err
    assert "moses_before_bpe: error:" in err and "'xx'" in err and "Traceback" not in err


def test_alignment_gold_and_accuracy_by_hand():
    assert gold("copy", 3, 3) == [(0, 0), (1, 1), (2, 2)]
    assert gold("reversal", 3, 3) == [(2, 0), (1, 1), (0, 2)]
    assert accuracy([[(0, 0), (2, 1)]], [[(0, 0), (1, 1)]]) == 0.5


@pytest.mark.slow
def test_alignment_toy_runs(capsys):
    assert alignment_toy.main(["--epochs", "1"]) == 0
    out = capsys.readouterr().out
    assert "copy:" in out and "reversal:" in out and "diagonal baseline" in out


def test_serve_models_measures_one_then_two_models(toy_run, tmp_path):
    """The toy run and a copy relabelled en -> de (a server serves one model per pair)."""
    out = tmp_path / "serve.json"
    flipped = tmp_path / "flipped"
    subprocess.run(["cp", "-r", str(toy_run), str(flipped)], check=True)
    config = json.loads((flipped / "config.json").read_text())
    config["data"]["src_lang"], config["data"]["tgt_lang"] = "en", "de"
    (flipped / "config.json").write_text(json.dumps(config))
    (flipped / "checksums.json").unlink()
    assert serve_models.main([str(toy_run), str(flipped), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [r["models"] for r in rows] == [1, 2] and all(r["rss_mib"] > 50 and r["ready_s"] > 0 for r in rows)


def test_every_quality_script_runs_as_a_file():
    for script in sorted(Path(langid_multi30k.__file__).parent.glob("*.py")):
        if script.name == "__init__.py":
            continue
        done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd="/")
        assert done.returncode == 0 and "usage" in done.stdout, (script, done.stderr)


def test_constraints_are_drawn_from_the_reference_by_hand():
    drawn = constraints_multi30k.draw_constraints(["A big dog runs over the green grass .", "Hi ."], 2, seed=1)
    assert len(drawn[0]) == 2 and set(drawn[0]) <= {"runs", "over", "green", "grass"} and drawn[1] == []
    assert constraints_multi30k.coverage(["the green grass", "x"], [["green", "dogs"], []]) == 0.5


def test_constraints_script_covers_every_constraint(toy_run, tmp_path, capsys):
    out = tmp_path / "c.json"
    assert constraints_multi30k.main([str(toy_run), "--split", "test", "--sentences", "10", "--beam", "3",
                                      "--json", str(out)]) == 0
    rows = {r["decoding"]: r for r in json.loads(out.read_text())["results"]}
    assert rows["constrained"]["coverage"] == 1.0 and rows["unconstrained"]["sentences"] == 10
    assert constraints_multi30k.main([str(toy_run), "--beam", "1"]) == 2


def test_vocab_sweep_trains_each_size_and_compares_with_the_configs_own(tmp_path, capsys):
    """Two joint sentencepiece sizes of a tiny Transformer, side by side: each run's subword model
    has its size (read back with sentencepiece), each trained its two epochs in its own process,
    and each row's test difference is its BLEU minus the baseline's (the config's own size)."""
    import sentencepiece as spm

    from support import toy
    from benchmarks.quality import vocab_sweep

    config = toy.write_config(tmp_path / "toy.yaml", "copy", "transformer", epochs=2,
                              data=dict(tokenizer="sentencepiece", spm_vocab_size=70, spm_joint=True),
                              model=dict(share_embeddings=True, tie_embeddings=True), train=dict(num_threads=1))
    out, report_path = tmp_path / "sweep", tmp_path / "sweep.json"
    argv = ["--out", str(out), "--config", str(config), "--sizes", "50,70", "--minutes", "5", "--set",
            "train.epochs=2", "--beam", "2", "--val-split", "valid", "--test-split", "test", "--json", str(report_path)]
    assert vocab_sweep.main(argv) == 0
    report = json.loads(report_path.read_text())
    assert report["settings"]["baseline"] == 70
    rows = {row["size"]: row for row in report["results"]}
    assert sorted(rows) == [50, 70]
    for size, row in rows.items():
        models = list((out / f"vocab-{size}").glob("*.model"))
        assert len(models) == 1 and spm.SentencePieceProcessor(model_file=str(models[0])).get_piece_size() == size
        assert row["exit"] == 0 and row["cpu_s"] > 0 and row["epochs"] == 2 and len(row["val_greedy"]) == 2
        assert row["best_complete"] and row["best_val_greedy"] == max(row["val_greedy"])
        assert 0 <= row["val_bleu"] <= 100 and 0 <= row["test_bleu"] <= 100
    assert "test_bleu_vs_baseline" not in rows[70]
    assert rows[50]["test_bleu_vs_baseline"]["difference"] == pytest.approx(
        rows[50]["test_bleu"] - rows[70]["test_bleu"], abs=0.011)
    assert "| 50 |" in capsys.readouterr().out
    assert vocab_sweep.main(["--out", str(out), "--sizes", "50"]) == 2  # one size is no sweep
    # a second sweep into the same folder is refused before it starts, naming the run; its log is kept
    log = (out / "vocab-50.log").read_text()
    assert vocab_sweep.main(argv) == 2
    assert "already holds a run" in capsys.readouterr().err and (out / "vocab-50.log").read_text() == log
    # --no-train scores what is there; a missing run is named
    assert vocab_sweep.main(["--out", str(tmp_path / "none"), "--config", str(config), "--sizes", "50,70",
                             "--no-train", "--json", ""]) == 2
    assert "vocab-50" in capsys.readouterr().err


def test_robustness_variants_are_what_their_names_say():
    from benchmarks.quality import robustness

    source = ["Ein Mann fährt auf der Straße.", "Zwei Hunde spielen im Schnee!"]
    found = robustness.variants(source, seed=1)
    assert found["lowercase"][0] == "ein mann fährt auf der straße." and found["uppercase"][1].startswith("ZWEI")
    assert found["no_final_punct"] == ["Ein Mann fährt auf der Straße", "Zwei Hunde spielen im Schnee"]
    assert found["doubled_spaces"][0] == "Ein  Mann  fährt  auf  der  Straße."
    assert found["no_diacritics"][0] == "Ein Mann fahrt auf der Strasse." and found["eszett_ss"][0].endswith("Strasse.")
    for typed, clean in zip(found["typo"], source):  # one word, two adjacent letters swapped
        changed = [(a, b) for a, b in zip(clean.split(), typed.split()) if a != b]
        assert len(changed) == 1 and sorted(changed[0][0]) == sorted(changed[0][1]) and changed[0][0] != changed[0][1]
    for typed, clean in zip(found["repeated_letter"], source):
        assert len(typed) == len(clean) + 2
    assert robustness.variants(source, seed=1) == found  # the same for every model
    assert robustness.short_input_passes("Two dogs.", "zwei Hunde", [["two"], ["dogs"]])
    assert not robustness.short_input_passes("Two dogs are playing in the snow with a ball.", "zwei Hunde",
                                             [["two"], ["dogs"]])  # too long: a caption around them
    assert not robustness.short_input_passes("Two cats.", "zwei Hunde", [["two"], ["dogs"]])


def test_robustness_reports_every_variant_and_the_short_inputs(toy_run, tmp_path, capsys):
    from benchmarks.quality import robustness

    out = tmp_path / "r.json"
    assert robustness.main([str(toy_run), "--split", "test", "--limit", "12", "--beam", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    rows = {r["variant"]: r for r in report["results"] if r["kind"] == "variant"}
    assert set(rows) == set(robustness.variants(["x"])) and rows["clean"]["bleu_ratio"] in (1.0, None)
    assert rows["lowercase"]["scored"] == "lowercased" and rows["typo"]["scored"] == "cased"
    short, = [r for r in report["results"] if r["kind"] == "short_inputs"]
    assert short["inputs"] == len(robustness.SHORT_INPUTS) and 0 <= short["passed"] <= short["inputs"]


@pytest.mark.learned
def test_robustness_measures_one_direction_of_a_multilingual_model(multilingual_run, toy_run, tmp_path):
    """`--pair fr-en --unnamed`: the direction's own held-out pairs, each call naming the target only
    (the source found by the run's lexicons; that this reads as a named call does is
    tests/data/test_languages.py's); no hand-written short inputs (they are German -> English);
    `--pair` refused for a bilingual run."""
    from benchmarks.quality import robustness

    out = tmp_path / "r.json"
    assert robustness.main([str(multilingual_run), "--split", "test", "--pair", "fr-en", "--unnamed", "--limit", "8",
                            "--beam", "1", "--pieces", "4", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["settings"]["pair"] == "fr-en" and report["settings"]["unnamed"] is True
    assert [r["kind"] for r in report["results"]] == ["variant"] * len(robustness.variants(["x"])) + ["held_out_pieces"]
    pieces = report["results"][-1]["examples"]
    assert pieces and all(w in toy.WORDS["fr"] for p in pieces for w in p["input"].split())  # the French side
    assert all(w in toy.WORDS["en"] for p in pieces for w in p["reference"].split())
    assert report["results"][0]["chrf"] > 40, report["results"][0]  # 70.3 (seed 1): the model read French
    with pytest.raises(SystemExit, match="--pair and --unnamed are for a multilingual model"):
        robustness.main([str(toy_run), "--split", "test", "--pair", "de-en", "--limit", "2"])


def test_truecasing_scores_words_as_written_by_hand():
    from benchmarks.quality.truecasing import score

    assert score(["Ein Mann läuft.", "Zwei hunde"], ["Ein Mann Läuft.", "Zwei hunde"]) == {
        "words_right": 0.8, "words_wrong": 1, "sentences_right": 0.5}


def test_truecasing_compares_both_readers_on_multi30k(multi30k_dir, tmp_path, monkeypatch, capsys):
    from benchmarks.quality import truecasing

    monkeypatch.setenv("ATTNMT_DATA", str(multi30k_dir))
    out = tmp_path / "truecasing.json"
    assert truecasing.main(["--json", str(out)]) == 0
    rows = {(r["typed"], r["reader"]): r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {(t, r) for t in ("lowercase", "uppercase")
                         for r in ("Moses truecaser (sacremoses)", "attnmt lexicon")}
    assert all(0.9 < r["words_right"] <= 1 for r in rows.values())  # both read most words back as written
    assert rows["lowercase", "attnmt lexicon"]["words_right"] >= 0.975  # 98.1% on 2026-12-02 (counts, no model)


def test_reverse_scores_read_the_source_given_its_translation(toy_run):
    """benchmarks/quality/confidence.py --reverse: the toy run (de->en) is here the reverse model of
    an en->de one, so it scores each English 'source' given its German 'translation': the right
    source scores far higher than another sentence's; a pair it cannot score gets the least of the
    others."""
    from attnmt.decoding.results import ScoreResult
    from attnmt.translator import Translator
    from benchmarks.quality.confidence import reverse_scores

    back = Translator.load(toy_run)
    german, english = ["Hund rot haus .", "Katze blau ."], ["Dog red house .", "Cat blue ."]
    right, wrong = reverse_scores(back, german, english), reverse_scores(back, german, english[::-1])
    assert all(r > w + 1.0 for r, w in zip(right, wrong)), (right, wrong)

    class Unscored:  # a pair the model could not score (no tokens) beside two it could
        def score(self, sources, targets):
            return [ScoreResult([], [], -2.0, 2), ScoreResult([], [], 0.0, 0), ScoreResult([], [], -9.0, 3)]

    assert reverse_scores(Unscored(), ["a", "", "c"], ["x", "y", "z"]) == [-1.0, -3.0, -3.0]


def test_confidence_with_a_reverse_model_reports_both_maps(toy_run, tmp_path, capsys):
    from benchmarks.quality import confidence

    out = tmp_path / "c.json"
    assert confidence.main([str(toy_run), "--reverse", str(toy_run), "--split", "test", "--beam", "2",
                            "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    maps = {r["map"]: r for r in results if r["kind"] == "map"}
    assert set(maps) == {"without", "with reverse_logprob"}
    assert "reverse_logprob" in maps["with reverse_logprob"]["weights"] and "reverse_logprob" not in maps["without"]["weights"]
    feature, = [r for r in results if r["kind"] == "feature"]
    assert feature["reverse_seconds"] > 0 and "reverse" in capsys.readouterr().out

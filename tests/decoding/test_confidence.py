"""Confidence (decoding/confidence.py, calibration.py, attnmt calibrate): the logistic curve and the
quality figures against independent computations, a map read back equal to the one written, a
damaged one refused by name, and models made unsure on purpose (random weights, an input in
another language) less confident than a trained one on its own data."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import toy

from attnmt.calibration import quality_of
from attnmt.cli import main
from attnmt.data.phrases import Phrases
from attnmt.decoding.confidence import CALIBRATION_FILE, FEATURES, Calibration, _logistic, adequacy
from attnmt.errors import AttnmtError, DataError


def test_the_logistic_curve_is_the_penalized_maximum_likelihood_and_finds_a_known_curve():
    rng = np.random.default_rng(5)
    x = rng.normal(50, 12, 40_000)  # a predicted chrF
    good = (rng.random(len(x)) < 1 / (1 + np.exp(-(0.2 * x - 10)))).astype(float)
    slope, intercept = _logistic(x, good)
    assert slope == pytest.approx(0.2, rel=0.05) and intercept == pytest.approx(-10, rel=0.05)
    # stationary: the log-likelihood's gradient plus the unit penalty on the standardized slope, in plain floats
    center, spread = statistics.fmean(x), statistics.pstdev(x)
    a, b = slope * spread, intercept + slope * center
    p = [1 / (1 + math.exp(-(a * (v - center) / spread + b))) for v in x]
    assert abs(sum((pi - g) * (v - center) / spread for pi, g, v in zip(p, good, x)) + a) < 1e-6
    assert abs(sum(pi - g for pi, g in zip(p, good))) < 1e-6
    separable = np.array([0.0, 0.0, 1.0, 1.0])
    assert 0 < _logistic(np.array([1.0, 2.0, 3.0, 4.0]), separable)[0] < 10  # finite, for the penalty
    assert _logistic(np.array([4.0, 3.0, 2.0, 1.0]), separable) == (0.0, 0.0)  # backwards: no signal, the rate
    assert _logistic(np.array([1.0, 2.0]), np.array([1.0, 1.0]))[0] == 0.0


def test_the_curve_sees_the_regression_as_on_unseen_sentences():
    """Features that say nothing of chrF: a regression fitted on 40 sentences and ten features finds
    some pattern in its own sentences all the same; its out-of-fold predictions find none, so the
    curve stays flat at the rate of good (a half), where one fitted in-sample would spread."""
    rng = np.random.default_rng(7)
    rows = [{name: float(rng.normal()) for name in FEATURES} for _ in range(40)]
    chrf = [float(rng.normal(50, 10)) for _ in rows]
    calibration = Calibration.fit(rows, chrf)
    confidences = [calibration.confidence(r) for r in rows]
    assert max(confidences) - min(confidences) < 0.2 and abs(statistics.mean(confidences) - 0.5) < 0.1
    in_sample = np.array([calibration.predicted_chrf(r) for r in rows])
    good = (np.array(chrf) >= calibration.threshold).astype(float)
    slope, intercept = _logistic(in_sample, good)
    spread = 1 / (1 + np.exp(-(slope * in_sample + intercept)))
    assert spread.max() - spread.min() > 0.4


def test_adequacy_is_the_share_of_table_words_whose_translation_the_output_holds():
    table = Phrases({"hund": [("dog", 3), ("the dog", 2)], "katze": [("cat", 2)], "ein": [("a", 5)],
                     "rote ball": [("red ball", 2)], "und": [(",", 2)]})
    # with entries: ein (a: held), hund (dog: held), katze (cat: not held); "und"'s only translation
    # holds no word, "eine" has none, "rote ball" is no one-word entry
    source = ["\u2581Ein", "\u2581Hu", "nd", "\u2581und", "\u2581eine", "\u2581Kat", "ze", "\u2581rote", "."]
    output = ["\u2581A", "\u2581do", "g", "\u2581and", "\u2581a", "\u2581mouse", "."]
    assert adequacy(source, output, table) == pytest.approx(2 / 3)
    assert adequacy("Ein Hund und eine Katze .".split(), "The dog and a cat .".split(), table) == 1.0  # word tokens
    assert adequacy("Ein Hund .".split(), "Two cats .".split(), table) == 0.0
    assert adequacy("Ein Hund .".split(), "The cat .".split(), table) == 0.0  # "the" of "the dog" alone: no translation
    assert adequacy("Zwei Mäuse .".split(), "Two mice .".split(), table) == 1.0  # no word of the table: nothing to miss
    assert adequacy(source, output, None) == 1.0


@settings(max_examples=300, deadline=None)
@given(tokens=st.lists(st.text(alphabet="\u2581aZß9_-'\u2019.,", min_size=1, max_size=6), max_size=8))
def test_plain_words_are_those_of_the_tokens_words(tokens):
    """The words adequacy reads: PLAIN's matches in each word the tokens make (grouped by
    alignment.token_words: a subword model's pieces when any token has the word mark, each joined
    without the mark), lower-cased, in order; and token_texts gives those words."""
    from attnmt.data.phrases import PLAIN
    from attnmt.decoding.alignment import token_texts, token_words
    from attnmt.decoding.confidence import _plain_words

    subword = any("\u2581" in t for t in tokens)
    grouped: dict[int, str] = {}
    for token, word in zip(tokens, token_words(tokens, subword)):
        grouped[word] = grouped.get(word, "") + (token.replace("\u2581", "") if subword else token)
    words = [grouped[k] for k in sorted(grouped)]
    assert token_texts(tokens, subword) == words
    assert _plain_words(tokens) == [w.lower() for text in words for w in PLAIN.findall(text)]


def _rows(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rows = [{name: float(rng.normal()) for name in FEATURES} for _ in range(n)]
    chrf = [50 + 10 * r["mean_logprob"] - 5 * r["unknown_source"] + float(rng.normal(0, 2)) for r in rows]
    return rows, chrf


def test_a_fitted_map_ranks_by_the_features_that_predict_chrf_and_is_a_probability():
    rows, chrf = _rows(400)
    calibration = Calibration.fit(rows, chrf)
    weights = dict(zip(calibration.features, calibration.weights))
    assert weights["mean_logprob"] > 5 and weights["unknown_source"] < -2  # the generating weights' signs and sizes
    assert max(abs(w) for k, w in weights.items() if k not in ("mean_logprob", "unknown_source")) < 1
    confidences = [calibration.confidence(r) for r in rows]
    assert all(0 <= c <= 1 for c in confidences)
    assert statistics.correlation(confidences, chrf) > 0.8
    assert calibration.threshold == pytest.approx(statistics.median(chrf))


def test_quality_figures_against_independent_computations():
    rows, chrf = _rows(300, seed=1)
    calibration = Calibration.fit(rows, chrf)
    c = [calibration.confidence(r) for r in rows]
    q = quality_of(c, chrf, calibration.threshold)
    assert q["pearson"] == pytest.approx(statistics.correlation(c, chrf), abs=1e-4)
    good = [y >= calibration.threshold for y in chrf]
    gaps = {}
    for conf, g in zip(c, good):
        gaps.setdefault(min(int(conf * 10), 9), []).append((conf, g))
    ece = sum(abs(statistics.mean(p for p, _ in v) - statistics.mean(g for _, g in v)) * len(v)
              for v in gaps.values()) / len(c)
    assert q["ece"] == pytest.approx(ece, abs=1e-4)
    least = sorted(range(len(c)), key=lambda i: c[i])[:30]
    worst = set(sorted(range(len(chrf)), key=lambda i: chrf[i])[:75])
    assert q["least_tenth_in_worst_quarter"] == pytest.approx(sum(i in worst for i in least) / 30, abs=1e-4)


def test_a_map_read_back_equals_the_one_written_and_a_damaged_one_is_refused_by_name(tmp_path):
    rows, chrf = _rows(100)
    calibration = Calibration.fit(rows, chrf)
    calibration.save(tmp_path)
    back = Calibration.load(tmp_path / CALIBRATION_FILE)
    assert [back.confidence(r) for r in rows] == [calibration.confidence(r) for r in rows]
    assert back.features == calibration.features and back.threshold == calibration.threshold
    raw = json.loads((tmp_path / CALIBRATION_FILE).read_text())
    for damage, message in [(lambda r: r.update(format="x"), "not an attnmt calibration"),
                            (lambda r: r.update(features=["mean_logprob", "nonsense"]), "features must name"),
                            (lambda r: r["weights"].pop(), f"weights must be a list of {len(FEATURES)}"),
                            (lambda r: r["mean"].__setitem__(0, "a"), "mean must be a list"),
                            (lambda r: r.update(slope=-0.1), "slope must not be negative"),
                            (lambda r: r.pop("intercept"), "intercept must be a finite number"),
                            (lambda r: r.update(threshold=None), "threshold must be a finite number"),
                            (lambda r: r["low"].pop(), f"low must be a list of {len(FEATURES)}"),
                            (lambda r: r.update(low=r["high"], high=r["low"]), "low must not exceed high")]:
        broken = json.loads(json.dumps(raw))
        damage(broken)
        (tmp_path / CALIBRATION_FILE).write_text(json.dumps(broken))
        with pytest.raises(DataError, match=message):
            Calibration.load(tmp_path / CALIBRATION_FILE)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=15)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(["format", "features", "mean", "scale", "weights", "bias", "slope",
                                                   "intercept", "threshold", "sentences", "low", "high", "steps_x",
                                                   "steps_y"]), st.none() | JSON), min_size=1, max_size=3))
def test_any_damage_to_a_map_is_refused_by_name_or_read_as_a_probability(tmp_path, changes):
    """A key removed (None) or given any JSON value: the file is read, and every confidence is a
    probability, or it is refused with a DataError naming it; nothing else escapes."""
    rows, chrf = _rows(60, seed=2)
    raw = _saved(Calibration.fit(rows, chrf), tmp_path)
    for key, value in changes:
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    path = tmp_path / CALIBRATION_FILE
    path.write_text(json.dumps(raw))
    try:
        calibration = Calibration.load(path)
    except DataError as refused:
        assert str(path) in str(refused)
        return
    assert all(0.0 <= calibration.confidence(r) <= 1.0 for r in rows[:5])


def test_a_map_of_format_1_is_read_with_its_isotonic_steps(tmp_path):
    """A model calibrated before the curve keeps its map: the step of the last breakpoint at or below
    the predicted chrF (the first step's value below it)."""
    rows, chrf = _rows(100)
    raw = json.loads(json.dumps({**{k: v for k, v in _saved(Calibration.fit(rows, chrf), tmp_path).items()
                                    if k not in ("slope", "intercept")},
                                 "format": "attnmt-calibration/1", "steps_x": [40.0, 50.0, 60.0],
                                 "steps_y": [0.1, 0.5, 0.9]}))
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps(raw))
    old = Calibration.load(tmp_path / CALIBRATION_FILE)
    for row in rows:
        predicted = old.predicted_chrf(row)
        expected = 0.9 if predicted >= 60 else 0.5 if predicted >= 50 else 0.1
        assert old.confidence(row) == expected
    old.save(tmp_path)  # written back as it was read
    assert json.loads((tmp_path / CALIBRATION_FILE).read_text()) == raw
    raw["steps_y"] = [0.5, 0.1, 0.9]
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps(raw))
    with pytest.raises(DataError, match="the steps must be non-decreasing probabilities"):
        Calibration.load(tmp_path / CALIBRATION_FILE)


def _saved(calibration, folder) -> dict:
    calibration.save(folder)
    return json.loads((folder / CALIBRATION_FILE).read_text())


def test_a_feature_beyond_the_fits_range_reads_as_its_edge():
    """Every translation of a fit has a margin >= 0; with a negative weight on it (chrF falling as
    it grows), an n-best alternative's negative margin would raise its predicted chrF the further
    it trails. Read at the fit's edge instead: as a tie. A file without the ranges is not clamped."""
    rng = np.random.default_rng(3)
    rows = [{name: float(rng.normal()) for name in FEATURES} for _ in range(300)]
    for row in rows:
        row["beam_margin"] = abs(row["beam_margin"])
    chrf = [50 - 8 * r["beam_margin"] + 10 * r["mean_logprob"] + float(rng.normal(0, 2)) for r in rows]
    calibration = Calibration.fit(rows, chrf)
    assert dict(zip(calibration.features, calibration.weights))["beam_margin"] < -4
    edge = min(r["beam_margin"] for r in rows)
    trailing = dict(rows[0], beam_margin=-3.0)
    assert calibration.predicted_chrf(trailing) == pytest.approx(calibration.predicted_chrf(dict(rows[0],
                                                                                              beam_margin=edge)))
    old = Calibration(*[getattr(calibration, f) for f in ("features", "mean", "scale", "weights", "bias", "threshold",
                                                          "sentences", "slope", "intercept")])
    assert old.predicted_chrf(trailing) > calibration.predicted_chrf(trailing) + 20  # 8 x 3 over the edge's


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    base = tmp_path_factory.mktemp("confidence")
    config = toy.write_config(base / "toy.yaml", epochs=6)
    assert main(["train", str(config), "--run-dir", str(base / "run")]) == 0
    return base


def test_an_unsure_model_is_less_confident_than_a_trained_one_on_its_own_data(trained):
    from support.toy import make_random_run

    from attnmt.translator import Translator

    sources = (trained / "toy" / "test.de").read_text(encoding="utf-8").splitlines()
    own = Translator.load(trained / "run", device="cpu")
    on_own = [r.confidence for r in own.translate(sources, beam_size=2)]
    english = (trained / "toy" / "test.en").read_text(encoding="utf-8").splitlines()
    on_english = [r.confidence for r in own.translate(english, beam_size=2)]  # the wrong language in
    random = Translator.load(make_random_run(trained / "random"), device="cpu")
    on_random = [r.confidence for r in random.translate(sources, beam_size=2)]
    assert all(0 <= c <= 1 for c in on_own + on_english + on_random)
    assert statistics.mean(on_own) > statistics.mean(on_english) + 0.05
    assert statistics.mean(on_own) > statistics.mean(on_random) + 0.05


def test_each_alternative_has_its_own_confidence(trained):
    from attnmt.translator import Translator

    translator = Translator.load(trained / "run", device="cpu")  # uncalibrated: the mean token probability
    for result in translator.translate(["Hund katze rot .", "Mann frau haus ."], beam_size=4, n_best=4):
        assert len(result.alternatives) == 4 and result.alternatives[0].confidence == result.confidence
        for alt in result.alternatives:
            assert len(alt.token_log_probs) == len(alt.tokens) + 1  # each ended with <eos>
            assert alt.confidence == pytest.approx(math.exp(statistics.mean(alt.token_log_probs)), rel=1e-6)
        assert len({round(a.confidence, 9) for a in result.alternatives}) > 1  # each its own, not the best's


def test_attnmt_calibrate_keeps_the_map_with_the_model(trained, tmp_path, capsys):
    import shutil

    from attnmt.run_dir import RunDir
    from attnmt.translator import Translator

    run = tmp_path / "run"  # a copy: this test damages it at the end
    shutil.copytree(trained / "run", run)
    src, ref = trained / "toy" / "train.de", trained / "toy" / "train.en"
    before = Translator.load(run, device="cpu").translate(["Hund katze rot ."], beam_size=2)[0]
    assert not before.confidence_calibrated
    capsys.readouterr()
    assert main(["calibrate", str(run), "--src", str(src), "--ref", str(ref), "--beam", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == 600 and set(report["cross_validated"]) >= {"pearson", "ece", "reliability"}
    assert CALIBRATION_FILE in json.loads((run / "checksums.json").read_text())
    after = Translator.load(run, device="cpu").translate(["Hund katze rot ."], beam_size=2)[0]
    assert after.confidence_calibrated and 0 <= after.confidence <= 1
    assert after.confidence == RunDir(run).calibration().confidence(
        Translator.load(run, device="cpu").confidence_features(after))
    unsure = Translator.load(run, device="cpu").translate(["Hund katze rot ."], beam_size=3, n_best=3)[0]
    assert unsure.alternatives[0].confidence == unsure.confidence
    for rank in (1, 2):  # an alternative: the map of its own features (its tokens, score, place in the beam)
        features = Translator.load(run, device="cpu").confidence_features(unsure, rank)
        assert features["beam_margin"] <= 0 and unsure.alternatives[rank].confidence == \
            RunDir(run).calibration().confidence(features)
    paragraph = Translator.load(run, device="cpu").translate(["Hund katze. Rot blau."], beam_size=2,
                                                             split_sentences=True)[0]
    parts = Translator.load(run, device="cpu").translate(["Hund katze.", "Rot blau."], beam_size=2)
    assert paragraph.confidence == min(p.confidence for p in parts)  # as sure as its least sure sentence
    (run / CALIBRATION_FILE).write_text((run / CALIBRATION_FILE).read_text().replace('"threshold"', '"threshold" '))
    with pytest.raises(AttnmtError, match=f"{CALIBRATION_FILE}: corrupted or changed"):
        Translator.load(run, device="cpu")


def test_below_min_confidence_the_source_or_nothing_is_given_with_a_warning(trained):
    from attnmt.translator import Translator

    translator = Translator.load(trained / "run", device="cpu")
    texts = ["Hund katze rot .", "Mann frau ."]
    plain = translator.translate(texts, beam_size=2)
    kept = translator.translate(texts, beam_size=2, min_confidence=0.0)
    assert [r.text for r in kept] == [r.text for r in plain] and not any(r.withheld for r in kept)
    withheld = translator.translate(texts, beam_size=2, min_confidence=1.0)
    assert [r.text for r in withheld] == texts and all(r.withheld for r in withheld)
    assert all("is below min_confidence=1: the source is given instead" in r.warnings[-1] for r in withheld)
    empty = translator.translate(texts, beam_size=2, min_confidence=1.0, below_confidence="empty")
    assert [r.text for r in empty] == ["", ""] and [r.tokens for r in empty] == [r.tokens for r in plain]
    with pytest.raises(ValueError, match=r"min_confidence=1\.5 must be in 0\.\.1"):
        translator.translate(texts, min_confidence=1.5)


def test_translate_min_confidence_writes_the_source_and_says_so(trained, tmp_path, capsys):
    lines = ["Hund katze rot .", "Mann frau ."]
    (tmp_path / "in.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.en"
    capsys.readouterr()
    assert main(["translate", str(trained / "run"), "-i", str(tmp_path / "in.de"), "-o", str(out), "--beam", "2",
                 "--min-confidence", "1", "--report"]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == lines
    err = capsys.readouterr().err
    assert "the line 'Hund katze rot .'" in err and "is below min_confidence=1: the source is given instead" in err
    with pytest.raises(SystemExit) as refused:
        main(["translate", str(trained / "run"), "--min-confidence", "2"])
    assert refused.value.code == 2 and "argument --min-confidence: 2 must be at most 1" in capsys.readouterr().err

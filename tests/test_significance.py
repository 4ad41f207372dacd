"""attnmt.significance: the paired tests (through sacreBLEU) against independent computations on
small hand-made test sets, and the seed spread against the statistics module."""

import statistics

import numpy as np
import pytest
import sacrebleu

from attnmt.significance import compare_systems, seed_spread

SEED = 12345  # sacreBLEU's default (SACREBLEU_SEED)

REFS = ["a dog runs on the grass .", "two men play football in a park .", "a woman reads a book .",
        "the children swim in the lake .", "a man rides a red bike .", "a cat sleeps on the sofa .",
        "three girls sing on a stage .", "a boy throws a ball to his dog .", "people walk in the rain .",
        "an old man sits on a bench .", "a chef cooks in a small kitchen .", "two dogs play in the snow ."]
# a little off on every sentence, and badly off on every sentence
GOOD = [r.replace(" a ", " the ", 1) if " a " in r else r.replace("the ", "a ", 1) for r in REFS]
BAD = [" ".join(r.split()[:2]) + " is here ." for r in REFS]


@pytest.fixture(autouse=True)
def default_seed(monkeypatch):
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)


def bleu(hyps, refs) -> float:
    return sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score


def test_identical_systems_give_p_one_and_an_interval_around_zero():
    found = compare_systems([("a", GOOD), ("b", list(GOOD))], REFS, randomization_trials=1000)
    for result in found.paired[0].values():
        assert result.difference == 0
        assert result.p_bootstrap == 1.0 and result.p_randomization == 1.0
        assert result.ci_low <= 0 <= result.ci_high


@pytest.mark.parametrize("better_second", [True, False])
def test_a_system_better_on_every_sentence_is_significant(better_second):
    systems = [("bad", BAD), ("good", GOOD)] if better_second else [("good", GOOD), ("bad", BAD)]
    found = compare_systems(systems, REFS)
    for name, result in found.paired[0].items():
        assert result.p_bootstrap < 0.01 and result.p_randomization < 0.01, name
        assert (result.ci_low > 0) if better_second else (result.ci_high < 0), name
        assert result.ci_low <= result.difference <= result.ci_high


def test_scores_and_differences_are_sacrebleus_corpus_scores():
    found = compare_systems([("bad", BAD), ("good", GOOD), ("refs", REFS)], REFS, bootstrap_samples=100,
                            randomization_trials=100)
    assert found.systems == ["bad", "good", "refs"] and found.sentences == len(REFS)
    assert found.scores["BLEU"] == pytest.approx([bleu(BAD, REFS), bleu(GOOD, REFS), 100.0])
    chrf = [sacrebleu.corpus_chrf(h, [REFS]).score for h in (BAD, GOOD, REFS)]
    assert found.scores["chrF2"] == pytest.approx(chrf)
    for i, hyps in enumerate((GOOD, REFS), start=1):
        assert found.paired[i - 1]["BLEU"].difference == pytest.approx(bleu(hyps, REFS) - bleu(BAD, REFS))
    assert "tok:13a" in found.signatures["BLEU"]["score"] and "bs:100" in found.signatures["BLEU"]["bootstrap"]
    assert "ar:100" in found.signatures["chrF2"]["randomization"]


def mixed_systems():
    """Two systems each better on some sentences, so that the tests are not degenerate."""
    first = [g if i % 3 else b for i, (g, b) in enumerate(zip(GOOD, BAD))]
    second = [b if i % 4 == 1 else g for i, (g, b) in enumerate(zip(GOOD, BAD))]
    return first, second


def test_bootstrap_interval_and_p_value_match_a_direct_resampling():
    """Koehn's paired bootstrap by hand: corpus_bleu on each resample of sentence indices (drawn as
    sacreBLEU draws them), the interval at the 2.5% / 97.5% order statistics, and sacreBLEU's
    p-value rule (centered absolute differences counted above the observed one)."""
    first, second, n = *mixed_systems(), 200
    found = compare_systems([("1", first), ("2", second)], REFS, bootstrap_samples=n, randomization_trials=100)
    idxs = np.random.default_rng(SEED).choice(len(REFS), size=(n, len(REFS)), replace=True)
    diffs = []
    for sample in idxs:
        refs = [REFS[i] for i in sample]
        diffs.append(bleu([second[i] for i in sample], refs) - bleu([first[i] for i in sample], refs))
    diffs = np.array(diffs)
    observed = bleu(second, REFS) - bleu(first, REFS)
    result = found.paired[0]["BLEU"]
    ordered = np.sort(diffs)
    assert (result.ci_low, result.ci_high) == pytest.approx((ordered[n // 40], ordered[n - n // 40 - 1]), abs=1e-4)
    centered = np.abs(diffs) - np.abs(diffs).mean()
    assert result.p_bootstrap == pytest.approx((np.sum(centered > abs(observed)) + 1) / (n + 1))


def test_randomization_p_value_matches_a_direct_shuffle():
    """Approximate randomization by hand: swap each sentence's two translations with probability
    1/2 (the swaps drawn as sacreBLEU draws them) and count |BLEU difference| above the observed one."""
    first, second, n = *mixed_systems(), 300
    found = compare_systems([("1", first), ("2", second)], REFS, bootstrap_samples=100, randomization_trials=n)
    swaps = np.random.default_rng(SEED).integers(2, size=(n, len(REFS)), dtype=bool)
    observed = abs(bleu(second, REFS) - bleu(first, REFS))
    above = 0
    for swap in swaps:
        a = [f if s else g for f, g, s in zip(first, second, swap)]
        b = [g if s else f for f, g, s in zip(first, second, swap)]
        above += abs(bleu(a, REFS) - bleu(b, REFS)) > observed + 1e-9
    assert found.paired[0]["BLEU"].p_randomization == pytest.approx((above + 1) / (n + 1))


def test_misuse_is_refused():
    with pytest.raises(ValueError, match="at least two systems"):
        compare_systems([("a", GOOD)], REFS)
    with pytest.raises(ValueError, match="b: 11 translations for 12 references"):
        compare_systems([("a", GOOD), ("b", GOOD[:-1])], REFS)


def test_seed_spread_is_the_mean_and_sample_standard_deviation():
    reports = [{"bleu": 36.1, "chrf": 60.2}, {"bleu": 35.2, "chrf": 59.9}, {"bleu": 37.0, "chrf": 61.0}]
    spread = seed_spread(reports)
    for key in ("bleu", "chrf"):
        values = [r[key] for r in reports]
        assert spread[key].mean == pytest.approx(statistics.mean(values))
        assert spread[key].sd == pytest.approx(statistics.stdev(values))
        assert (spread[key].n, spread[key].values) == (3, values)
    assert seed_spread(reports[:1])["bleu"].sd is None
    with pytest.raises(ValueError, match="report 2 has no finite 'chrf'"):
        seed_spread([{"bleu": 1, "chrf": 2}, {"bleu": 1}])

"""The word links that data/fragments.py cuts pieces by, and the association scores of
data/cooccurrence.py they rest on. Expected scores are computed here from each 2x2 table of
sentences, in plain Python; expected links from how the corpus was written.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from attnmt.data import fragments
from attnmt.data.cooccurrence import count_cooccurrence
from attnmt.data.fragments import Fragments


def g2_by_hand(both: int, src: int, tgt: int, n: int) -> float:
    """Dunning's G^2 = 2 sum O ln(O / E) over the four cells (E from the margins), 0 when the
    two co-occur no more often than chance."""
    observed = [[both, src - both], [tgt - both, n - src - tgt + both]]
    rows, cols = [src, n - src], [tgt, n - tgt]
    total = sum(2 * o * math.log(o * n / (rows[i] * cols[j]))
                for i in range(2) for j in range(2) if (o := observed[i][j]) > 0)
    return total if both * n > src * tgt else 0.0


def test_dice_and_the_log_likelihood_ratio_are_those_of_each_pairs_table():
    rng = random.Random(3)
    pairs = [(rng.sample(range(6), rng.randint(1, 4)), rng.sample(range(5), rng.randint(1, 4))) for _ in range(40)]
    counts = count_cooccurrence([(np.array(s), np.array(t)) for s, t in pairs], 6, 5)
    assert counts.sentences == 40
    dice, g2 = counts.dice(), counts.log_likelihood_ratio()
    for k, (s, t) in enumerate(zip(counts.src.tolist(), counts.tgt.tolist())):
        both = sum(s in a and t in b for a, b in pairs)
        src, tgt = sum(s in a for a, _ in pairs), sum(t in b for _, b in pairs)
        assert counts.both[k] == both
        assert dice[k] == pytest.approx(2 * both / (src + tgt), rel=1e-12)
        assert g2[k] == pytest.approx(g2_by_hand(both, src, tgt, 40), rel=1e-9, abs=1e-12)
    assert (g2 > 0).any() and (g2 == 0).any()  # both kinds of pair were drawn


FILLERS = {"hund": "dog", "katze": "cat", "ball": "ball", "baum": "tree", "haus": "house"}


def corpus() -> list[tuple[list[str], list[str]]]:
    """"blue" in 100 of 1,000 pairs: with "blau" in 95, with "blaues" in 5 ("der blaues": its only
    pairs); "zufall" in 4 pairs, with "the", which every pair holds; each other word has one
    translation."""
    rng = random.Random(7)
    pairs = []
    for number in range(1000):
        word = rng.choice(sorted(FILLERS))
        src, tgt = ["der", word], ["the", FILLERS[word]]
        if number < 5:
            src, tgt = ["der", "blaues"], ["the", "blue"]
        elif number < 100:
            src.insert(1, "blau")
            tgt.insert(1, "blue")
        if 150 <= number < 154:
            src.append("zufall")
        pairs.append((src, tgt))
    return pairs


def test_a_rare_form_of_a_frequent_translation_is_linked_by_its_likelihood_ratio(monkeypatch):
    pairs = corpus()
    table = Fragments.from_pairs(pairs)
    assert 2 * 5 / (5 + 100) < fragments.MIN_DICE  # Dice alone would leave "blaues" unlinked,
    assert g2_by_hand(5, 5, 100, 1000) >= fragments.MIN_LLR  # its likelihood ratio does not
    src, tgt = ["der", "blaues"], ["the", "blue"]
    assert (1, 1) in table.links(src, tgt)
    assert table.phrases(pairs).translations("blaues") == ["blue"]
    assert table.phrases(pairs).translations("blaues hund") == ["blue dog"]  # known pieces, in order
    # "zufall" meets "the" in every one of its pairs, as every word does: no association, no link
    assert all(i != 2 for i, _ in table.links(["der", "hund", "zufall"], ["the", "dog"]))
    assert table.phrases(pairs).translations("zufall") == []

    monkeypatch.setattr(fragments, "MIN_LLR", math.inf)  # without the fallback: no link, no phrase
    strict = Fragments.from_pairs(pairs)
    assert (1, 1) not in strict.links(src, tgt)
    assert strict.phrases(pairs).translations("blaues") == []

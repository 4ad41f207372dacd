"""Sentence boundaries in text without sentence marks (data/boundaries.py), and rule 5 of
data/sentences.py that uses them: a paragraph of a synthetic grammar's sentences, typed without
marks, split at the joins it was built with; punctuated text split exactly as by the rules alone;
a lexicon.json without the counts read and not splitting; spans that keep every word of any
text; a 100 kB text in work bounded by its length."""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from attnmt.data import boundaries as boundaries_module
from attnmt.data.boundaries import MAX_WORDS, WORD, BoundaryStats, segment
from attnmt.data.lexicon import LEXICON_FILE, Lexicon
from attnmt.data.sentences import split_sentences
from attnmt.errors import DataError

sys.path.insert(0, str(Path(__file__).parent))
from support.sentence_cases import HARD_CASES  # noqa: E402

# a grammar of two sentence shapes; "hund" ends sentences of the second and is inside the first's
FIRST = [["ein", "der"], ["mann", "hund", "junge"], ["läuft", "springt", "schläft"],
         ["im park", "am strand", "auf der wiese"]]
SECOND = [["zwei", "drei"], ["frauen", "kinder"], ["sehen", "rufen"], ["einen hund", "eine katze"]]
MARKED_END = re.compile(r"[.!?\u2026][\"'\u201c\u201d\u00bb)\]]*$")  # a sentence that ends with its mark
CORPUS = [" ".join(words) for shape in (FIRST, SECOND) for words in itertools.product(*shape)]
STATS = BoundaryStats.from_sentences(s + " ." for s in CORPUS)  # sentences written with their marks


def paragraph_of(sentences: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """Sentences joined by one space, and where each one lies: the spans a reader would find."""
    spans, position = [], 0
    for sentence in sentences:
        spans.append((position, position + len(sentence)))
        position += len(sentence) + 1
    return " ".join(sentences), spans


def test_the_counts_are_the_corpus_counts():
    assert STATS.sentences == len(CORPUS) == 54 + 16
    assert STATS.starts["zwei"] == 8 and STATS.ends["hund"] == 8 and "hund" not in STATS.starts
    assert STATS.pairs["der"]["hund"] == 9  # "der hund ..." (9) and never "der wiese" but "auf der wiese" (18)
    assert STATS.pairs["der"]["wiese"] == 18
    assert STATS.lengths[5] == 36 + 16 and STATS.lengths[6] == 18  # "auf der wiese": six words


def test_a_paragraph_without_marks_splits_at_the_joins_it_was_built_with():
    # every 5th sentence of the corpus: 14 sentences, of both shapes, in an order the corpus never had
    sentences = CORPUS[::5]
    text, expected = paragraph_of(sentences)
    assert STATS.split(text) == expected
    assert split_sentences(text, "de", STATS) == expected
    assert split_sentences(text, "de") == [(0, len(text))]  # the rules alone: one block


def test_a_gap_scores_a_boundary_where_the_corpus_has_one():
    assert STATS.gap("hund", "zwei") > 0      # a sentence ends with "hund", one begins with "zwei"
    assert STATS.gap("hund", "läuft") < 0     # "hund läuft": inside a sentence
    assert STATS.gap("der", "hund") < STATS.gap("hund", "der")


def test_counts_of_lines_without_marks_do_not_split():
    """A model trained on unpunctuated lines reads such text as its sentences: no boundary is made up."""
    unmarked = BoundaryStats.from_sentences(CORPUS)
    assert unmarked.marked == 0 and STATS.marked == STATS.sentences
    text, _ = paragraph_of(CORPUS[::5])
    assert unmarked.split(text) == [(0, len(text))]


def test_counts_of_words_in_any_order_carry_no_evidence_and_do_not_split():
    """Every order of four words: each word begins, ends and fills the middle of sentences equally
    often, so a sentence's ends say nothing of where one ends (a divergence of exactly 0)."""
    shuffled = BoundaryStats.from_sentences(" ".join(p) + " ." for p in itertools.permutations("ab cd ef gh".split()))
    assert shuffled.evidence == pytest.approx(0.0, abs=1e-12) and not shuffled.splits
    assert STATS.evidence > 1.0 and STATS.splits
    text = " ".join(["ab cd ef gh"] * 10)
    assert shuffled.split(text) == [(0, len(text))]


def test_a_sentence_is_not_cut_and_a_blank_text_has_none():
    assert STATS.split("  der junge springt auf der wiese ") == [(2, 33)]
    assert STATS.split(" \t ") == [] and STATS.split("") == []


def test_punctuated_text_splits_exactly_as_by_the_rules():
    """Every sentence that ends with its mark and is no longer than the longest training sentence
    (here 64 words) stays as the rules found it."""
    counts = BoundaryStats.from_sentences([s + " ." for s in CORPUS] + [" ".join(CORPUS[:12]) + " ."])
    assert counts.longest == 8 * 5 + 4 * 6  # twelve sentences, four of them "... auf der wiese"
    checked = 0
    for lang, cases in HARD_CASES.items():
        for text, _ in cases:
            rules = split_sentences(text, lang)
            if all(MARKED_END.search(text[a:b]) for a, b in rules):
                assert split_sentences(text, lang, counts) == rules, text
                checked += 1
    assert checked >= 40
    for text in ["Ein Mann fährt Fahrrad. Eine Frau liest ein Buch im Park. Zwei Kinder spielen mit einem Ball.",
                 "ein hund läuft. zwei katzen schlafen. drei kinder spielen!"]:
        assert split_sentences(text, "de", counts) == split_sentences(text, "de")


def test_a_run_without_marks_that_ends_with_one_is_split_when_longer_than_any_training_sentence():
    text, expected = paragraph_of(CORPUS[::5])
    text += " usw."
    expected[-1] = (expected[-1][0], len(text))
    assert split_sentences(text, "de") == [(0, len(text))]
    assert split_sentences(text, "de", STATS) == expected


def test_a_lexicon_saved_before_the_counts_loads_and_does_not_split(tmp_path):
    old = {"format": "attnmt-lexicon/1", "alphabet": "adehnru", "capital_starts": True,
           "forms": {"der": ["der", 3], "hund": ["Hund", 2]}}
    (tmp_path / LEXICON_FILE).write_text(json.dumps(old))
    lexicon = Lexicon.load(tmp_path / LEXICON_FILE)
    assert lexicon.boundaries is None and lexicon.forms["hund"] == ("Hund", 2)
    text, _ = paragraph_of(CORPUS[::5])
    assert split_sentences(text, "de", lexicon.boundaries) == [(0, len(text))]


def test_a_lexicon_keeps_its_counts_and_damaged_ones_are_refused_by_key(tmp_path):
    lexicon = Lexicon.from_sentences((s + " .").split() for s in CORPUS)
    assert lexicon.boundaries == STATS
    lexicon.save(tmp_path)
    assert Lexicon.load(tmp_path / LEXICON_FILE) == lexicon
    raw = json.loads((tmp_path / LEXICON_FILE).read_text())
    for damage, message in [(lambda b: b["pairs"]["der"].update(hund=0), r"boundaries.pairs\['der'\] must map"),
                            (lambda b: b.update(sentences=0), "boundaries.sentences must be a count"),
                            (lambda b: b.update(marked=10**6), "boundaries.marked must be a count of at most"),
                            (lambda b: b.pop("closing"), "boundaries.closing must map"),
                            (lambda b: b.update(lengths=[1, "2"]), "boundaries.lengths must be a list"),
                            (lambda b: b["ends"].update(hund=True), "boundaries.ends must map")]:
        broken = json.loads(json.dumps(raw))
        damage(broken["boundaries"])
        (tmp_path / LEXICON_FILE).write_text(json.dumps(broken))
        with pytest.raises(DataError, match=message):
            Lexicon.load(tmp_path / LEXICON_FILE)


def test_the_rarest_pairs_are_dropped_past_the_limit():
    corpus = [s + " ." for s in CORPUS + ["der hund läuft"] * 5]
    full, kept = BoundaryStats.from_sentences(corpus), BoundaryStats.from_sentences(corpus, max_pairs=10)
    pairs = {(u, v): n for u, row in full.pairs.items() for v, n in row.items()}
    left = {(u, v): n for u, row in kept.pairs.items() for v, n in row.items()}
    dropped = [n for pair, n in pairs.items() if pair not in left]
    assert 0 < len(left) <= 10 and left == {pair: pairs[pair] for pair in left}
    assert left[("der", "hund")] == 9 + 5 and min(left.values()) > max(dropped)
    assert kept.words == full.words and kept.starts == full.starts


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aeinr hund zwei katze der .,!?\n\t-\u2026")), max_size=120)
       | st.lists(st.sampled_from(sorted({w for s in CORPUS for w in s.split()} | {"xyz", ",", "."})),
                  max_size=60).map(" ".join))
def test_spans_are_ordered_within_the_text_and_keep_every_word(text):
    for spans in (STATS.split(text), split_sentences(text, "de", STATS)):
        position = 0
        for start, end in spans:
            assert position <= start < end <= len(text)
            assert text[start:end] == text[start:end].strip()
            assert not text[position:start].strip()  # only whitespace between sentences
            position = end
        assert not text[position:].strip()
        for word in WORD.finditer(text):  # every word inside one span
            assert any(start <= word.start() and word.end() <= end for start, end in spans), word
    rules = split_sentences(text, "de")  # rule 5 only divides the rules' sentences that end without a mark
    found = split_sentences(text, "de", STATS)
    for start, end in rules:
        inside = [(a, b) for a, b in found if start <= a and b <= end]
        assert inside and inside[0][0] == start and inside[-1][1] == end
        if text[end - 1] in ".!?\u2026" and len(WORD.findall(text[start:end])) <= STATS.longest:
            assert inside == [(start, end)]


class CountedScores(list):
    """Length scores that count how often they are read: one read per step of the segmentation."""

    reads = 0

    def __getitem__(self, index):
        CountedScores.reads += 1
        return super().__getitem__(index)


def test_a_100_kb_text_without_marks_takes_work_linear_in_its_length(monkeypatch):
    text = " ".join(itertools.islice(itertools.cycle(CORPUS[::3]), 4000))[:100_000]
    words = len(WORD.findall(text))
    gaps = []
    CountedScores.reads = 0
    monkeypatch.setattr(BoundaryStats, "gap", lambda self, *pair: gaps.append(pair) or 1.0)
    scores = CountedScores(STATS._length_scores)
    monkeypatch.setattr(boundaries_module, "segment",
                        lambda candidates, _, weight: segment(candidates, scores, weight=weight))
    spans = STATS.split(text)
    assert len(gaps) == words - 1                  # each gap scored once
    assert 0 < CountedScores.reads <= words * MAX_WORDS  # each candidate looks back at most MAX_WORDS candidates
    assert spans[0][0] == 0 and spans[-1][1] == len(text.rstrip()) and len(spans) > 1


def test_the_segmentation_reads_at_most_its_bound_and_ends_a_long_sentence_at_the_next_candidate():
    candidates = [(0, 0.0)] + [(i, 1.5) for i in range(1, 5000)] + [(5000, 0.0)]
    scores = CountedScores([float("-inf")] + [-1.0] * 10)  # sentences of 1..10 words: all equally likely
    CountedScores.reads = 0
    chosen = segment(candidates, scores, weight=1.0)
    assert CountedScores.reads <= len(candidates) * 10
    assert chosen == list(range(1, 5000))  # each boundary adds 1.5 and a sentence's -1.0: all are taken
    far = [(0, 0.0), (500, 3.0), (1000, 0.0)]  # no candidate within 10 words: the one before is taken
    assert segment(far, scores, weight=1.0) == [1]

"""The phrase table of short inputs (data/phrases.py): counted over aligned training pairs, read
back as it was written, refused damaged, and used by the translator for one to three words.

The expected translations come from the toy task's own word list (support/toy.py: each German
word has one English word, in the same order), not from the table.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import toy

from attnmt.data.fragments import Fragments
from attnmt.data.lexicon import LEXICON_FILE, Lexicon
from attnmt.data.phrases import MIN_COUNT, Phrases
from attnmt.errors import DataError

MEANING = dict(zip(toy.SRC_WORDS, toy.TGT_WORDS))
PAIRS = [(s.split(), t.split()) for s, t in toy.copy_pairs(600, seed=1, lengths=(4, 6))]  # no short source


@pytest.fixture(scope="module")
def phrases() -> Phrases:
    return Fragments.from_pairs(PAIRS).phrases(PAIRS)


def test_each_word_and_a_seen_phrase_translate_as_the_word_list_says(phrases):
    for word, meaning in MEANING.items():
        assert phrases.translations(word)[0] == meaning, word
    seen = Counter(" ".join(s[i:i + 2]).lower() for s, _ in PAIRS for i in range(len(s) - 2)
                   if s[i].lower() != s[i + 1].lower() and s[i].lower() not in s[:i] + s[i + 2:])  # one link each
    pair, count = seen.most_common(1)[0]
    assert count >= MIN_COUNT
    assert phrases.translations(pair)[0] == " ".join(MEANING[w] for w in pair.split())


def test_an_unseen_three_word_phrase_is_made_of_known_pieces_in_order(phrases):
    seen = {tuple(w.lower() for w in s[i:i + 3]) for s, _ in PAIRS for i in range(len(s) - 3)}
    unseen = next((a, b, c) for a in toy.SRC_WORDS for b in toy.SRC_WORDS for c in toy.SRC_WORDS
                  if (a, b, c) not in seen)
    assert " ".join(unseen) not in phrases.entries
    assert phrases.translations(" ".join(unseen)) == [" ".join(MEANING[w] for w in unseen)]


def test_a_sentence_opening_is_written_as_inside_sentences(phrases):
    """The toy targets begin with a capital ("Dog red ."); the table keeps the word's inner form."""
    assert all(text == text.lower() for found in phrases.entries.values() for text, _ in found)


def test_marks_length_and_unknown_words(phrases):
    assert phrases.translations("hund rot !") == ["dog red!"]
    assert phrases.translations("  Hund.") == ["dog."]
    assert phrases.translations("hund rot haus ball") == []      # four words: the model's
    assert phrases.translations("hund, rot") == []               # punctuation inside
    assert phrases.translations("hund zebra") == []              # a word the table lacks
    assert phrases.translations("") == [] and phrases.translations(" . ") == []
    assert phrases.translations("hund", sentence_start=True) == ["Dog"]


def test_each_translation_has_its_share_of_the_phrase_and_a_sequence_the_product():
    table = Phrases({"hund": [("dog", 6), ("hound", 2)], "rot": [("red", 3), ("ruddy", 1)]})
    assert table.scored("hund") == [("dog", 0.75), ("hound", 0.25)]
    assert table.scored("hund rot") == [("dog red", 0.75 * 0.75)]


def test_rare_pieces_are_not_kept():
    pairs = PAIRS + [(["Zebra", "."], ["Horse", "."])]  # one pair: no phrase
    table = Fragments.from_pairs(pairs).phrases(pairs)
    assert "zebra" not in table.entries
    assert all(n >= MIN_COUNT for found in table.entries.values() for _, n in found)


def test_the_lexicon_capitalizes_where_a_sentence_begins(phrases):
    lexicon = Lexicon.from_sentences(s for s, _ in PAIRS)
    lexicon.phrases = phrases
    assert lexicon.forms["hund"][0] == "hund" and phrases.short_sources == 0 and phrases.used
    assert [t for t, _ in lexicon.short_translations("Hund rot")] == ["Dog red"]  # typed as a sentence's start
    (text, share), = lexicon.short_translations("hund rot")
    assert text == "dog red" and share == 1.0  # one translation kept
    assert Lexicon.from_sentences(s for s, _ in PAIRS).short_translations("hund") == []  # no table kept


def test_a_table_of_a_corpus_with_short_sentences_is_not_used():
    """Sources of two to six words: the model saw short inputs (2 and 3 words: about 2 in 5)."""
    pairs = [(s.split(), t.split()) for s, t in toy.copy_pairs(600, seed=1)]
    table = Fragments.from_pairs(pairs).phrases(pairs)
    short = sum(len(s) - 1 <= 3 for s, _ in pairs) / len(pairs)  # words, the final " ." not one
    assert table.short_sources == pytest.approx(short, abs=1e-6) and short > 0.3 and not table.used
    lexicon = Lexicon.from_sentences(s for s, _ in pairs)
    lexicon.phrases = table
    assert table.translations("hund") == ["dog"] and lexicon.short_translations("hund") == []


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_text_gets_a_list_of_translations(phrases, text):
    found = phrases.translations(text)
    assert isinstance(found, list) and all(isinstance(t, str) and t.strip() for t in found)


def test_the_table_round_trips_in_the_lexicon_file_and_damage_is_refused_by_name(tmp_path, phrases):
    lexicon = Lexicon.from_sentences(s for s, _ in PAIRS)
    lexicon.phrases = phrases
    lexicon.save(tmp_path)
    assert Lexicon.load(tmp_path / LEXICON_FILE) == lexicon
    raw = json.loads((tmp_path / LEXICON_FILE).read_text())
    for damage in [lambda p: p.update(hund=[["dog", 0]]), lambda p: p.update(hund=[]),
                   lambda p: p.update(hund=[[" ", 3]]), lambda p: p.update(Hund=[["dog", 3]]),
                   lambda p: p.update({"a b c d": [["x", 3]]}), lambda p: p.update(hund="dog")]:
        broken = json.loads(json.dumps(raw))
        damage(broken["phrases"]["entries"])
        (tmp_path / LEXICON_FILE).write_text(json.dumps(broken))
        with pytest.raises(DataError, match=r"lexicon.json: phrases.entries\[.* must be a list"):
            Lexicon.load(tmp_path / LEXICON_FILE)
    for damage in [lambda p: p.update(short_sources=2), lambda p: p.pop("short_sources"),
                   lambda p: p.update(short_sources=True), lambda p: p.update(entries=["hund"])]:
        broken = json.loads(json.dumps(raw))
        damage(broken["phrases"])
        (tmp_path / LEXICON_FILE).write_text(json.dumps(broken))
        with pytest.raises(DataError, match="phrases must hold short_sources"):
            Lexicon.load(tmp_path / LEXICON_FILE)


def test_a_multilingual_lexicons_tables_round_trip_by_target_and_damage_is_refused_by_name(tmp_path, phrases):
    lexicon = Lexicon.from_sentences(s for s, _ in PAIRS)
    french = Phrases({"hund": [("chien", 3)]})
    lexicon.phrases_to = {"en": phrases, "fr": french}
    lexicon.save(tmp_path)
    loaded = Lexicon.load(tmp_path / LEXICON_FILE)
    assert loaded == lexicon and loaded.table("fr") == french and loaded.table("en") == phrases
    assert loaded.table("cs") is None and loaded.table() is None  # a target it has no table of, or none named
    raw = json.loads((tmp_path / LEXICON_FILE).read_text())
    for damage, message in [(lambda p: p.update(fr=[]), r"phrases_to\['fr'\]: phrases must hold"),
                            (lambda p: p["fr"]["entries"].update(hund=[["chien", 0]]),
                             r"phrases_to\['fr'\]: phrases.entries\['hund'\] must be a list"),
                            (lambda p: p.update({"": p["fr"]}), "phrases_to must map each target language")]:
        broken = json.loads(json.dumps(raw))
        damage(broken["phrases_to"])
        (tmp_path / LEXICON_FILE).write_text(json.dumps(broken))
        with pytest.raises(DataError, match=message):
            Lexicon.load(tmp_path / LEXICON_FILE)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A toy run trained now: its lexicon keeps the phrase table of its pairs."""
    from attnmt.cli import main

    base = tmp_path_factory.mktemp("phrases_run")
    config = toy.write_config(base / "toy.yaml", "captions", epochs=3)
    assert main(["train", str(config), "--run-dir", str(base / "run")]) == 0
    return base / "run"


def test_a_trained_run_translates_short_inputs_by_its_table(toy_run, tmp_path):
    from attnmt.translator import Translator

    translator = Translator.load(toy_run, device="cpu")
    assert translator.pipeline.lexicon.phrases.entries
    short, two, long = translator.translate(["katze", "Hund rot", "hund rot haus ball ."], beam_size=2, n_best=2)
    assert short.from_phrases and short.text == "cat" and two.text == "Dog red"
    assert not long.from_phrases
    assert short.read_as == "Katze" and short.source_tokens == ["Katze"] and short.tokens == ["Cat"]  # read as trained
    assert short.attention.shape == (1, 1) and short.log_prob < 0
    assert 0.5 < short.confidence <= 1 and not short.confidence_calibrated  # the table's share of "katze"
    assert short.alternatives[0].text == "cat" and len(short.alternatives) <= 2
    assert short.coverage is not None and not short.flagged
    scored, = translator.score(["Katze"], ["Cat"])
    assert short.log_prob == pytest.approx(scored.log_prob)
    titled, = translator.translate(["Hund Rot"], beam_size=2)
    assert titled.text == "Dog Red"  # "rot" is written in small letters: the text is in title case
    typed, = translator.translate(["KATZE"], beam_size=2)
    assert typed.from_phrases and typed.text == "CAT"
    forced, = translator.translate(["katze"], beam_size=2, target_prefix=["cat"])
    sampled, = translator.translate(["katze"], beam_size=1, sampling_topk=0, seed=1)
    assert not forced.from_phrases and not sampled.from_phrases
    para, = translator.translate(["Katze . Hund rot haus ball ."], beam_size=2, split_sentences=True)
    assert para.text.startswith("Cat.")

    off = toy.edited_copy(toy_run, tmp_path / "off", search={"short_phrases": False})
    model, = Translator.load(off, device="cpu").translate(["katze"], beam_size=2)
    assert not model.from_phrases


def test_an_export_translates_short_inputs_by_its_table_with_ctranslate2(tmp_path):
    """CTranslate2 scores without attention: the table's translation comes back with the same
    log-probability as the native engine's forced decoding, and no attention or coverage."""
    pytest.importorskip("ctranslate2")
    from attnmt.cli import main
    from attnmt.translator import Translator

    config = toy.write_config(tmp_path / "toy.yaml", "captions", "transformer", epochs=2)
    assert main(["train", str(config), "--run-dir", str(tmp_path / "run")]) == 0
    assert main(["export", str(tmp_path / "run"), "-o", str(tmp_path / "export")]) == 0
    native, = Translator.load(tmp_path / "run", device="cpu").translate(["Katze rot"], beam_size=2)
    exported, = Translator.load(tmp_path / "export", engine="ctranslate2").translate(["Katze rot"], beam_size=2)
    assert native.from_phrases and exported.from_phrases and exported.text == native.text == "Cat red"
    assert exported.log_prob == pytest.approx(native.log_prob, abs=1e-3)
    assert exported.attention is None and exported.coverage is None and 0 <= exported.confidence <= 1

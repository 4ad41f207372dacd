"""The source lexicon (data/lexicon.py): case patterns, case restored and slips mended as the
training data writes its words, spans mapped back to the typed text, the file refused when
damaged; and through the Translator: a text in capitals translates as the same text in sentence
case, written back in capitals. Expected texts are written here by hand."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import toy

from attnmt.data.lexicon import (LEXICON_FILE, Lexicon, Lexicons, Normalized, case_pattern, load_lexicon, restore_case,
                                 with_final_marks)
from attnmt.errors import DataError

SENTENCES = ["Ein Mann fährt Fahrrad auf der Straße .", "Zwei Hunde spielen im Schnee .",
             "Der Mann und die Hunde laufen .", "Ein Fahrrad steht vor dem Haus .",
             "Eine Frau liest ein Buch im Park .", "Die NASA schickt eine Rakete ."] * 3
LEXICON = Lexicon.from_sentences(s.split() for s in SENTENCES)


@pytest.mark.parametrize("text,pattern", [
    ("ein mann fährt rad", "lower"), ("EIN MANN FÄHRT RAD.", "upper"), ("Ein Mann Fährt Rad", "title"),
    ("Ein Mann fährt Rad.", "as typed"), ("Hund", "as typed"), ("hund", "lower"), ("HUND", "upper"),
    ("a", "as typed"), ("", "as typed"), ("42 !", "as typed"), ("ein Mann", "as typed")])
def test_case_patterns(text, pattern):
    assert case_pattern(text) == pattern


def test_a_translation_is_written_in_the_pattern_character_for_character():
    assert restore_case("A man rides on the Straße.", "upper") == "A MAN RIDES ON THE STRAẞE."  # ẞ: one character
    assert restore_case("A man rides.", "lower") == "a man rides."
    assert restore_case("a man rides a bike.", "title") == "A Man Rides A Bike."
    assert restore_case("A man rides.", "as typed") == "A man rides."
    for pattern in ("lower", "upper", "title"):
        assert len(restore_case("Die Straße, ﬁne.", pattern)) == len("Die Straße, ﬁne.")


@pytest.mark.parametrize("typed,read", [
    ("ein mann fährt fahrrad auf der straße. zwei hunde spielen im schnee",
     "Ein Mann fährt Fahrrad auf der Straße. Zwei Hunde spielen im Schnee"),
    ("EIN MANN FÄHRT FAHRRAD.", "Ein Mann fährt Fahrrad."),
    ("Ein Mann Und Die Hunde Laufen", "Ein Mann und die Hunde laufen"),
    ("DIE NASA SCHICKT EINE RAKETE", "Die NASA schickt eine Rakete"),  # the training data's form of NASA
    ("EINE ESA RAKETE", "Eine ESA Rakete"),  # unknown in capitals: an acronym, kept
    ("zwei hunde und zorro", "Zwei Hunde und zorro"),  # unknown in lower case, no known part: small letters
    # unknown (in capitals: longer than an acronym): the case of a known word it ends or begins with, else small
    ("zwei hunde im parkschnee", "Zwei Hunde im Parkschnee"),
    ("Zwei Hunde Im Parkschnee", "Zwei Hunde im Parkschnee"),
    ("zwei fahrradwege", "Zwei Fahrradwege"),
    ("ZWEI HUNDE IM PARKSCHNEE", "Zwei Hunde im Parkschnee"),      # ends with Schnee
    ("ZWEI FAHRRADWEGE", "Zwei Fahrradwege"),                      # begins with Fahrrad
    ("EIN MANN IM PARKBUCH", "Ein Mann im parkbuch"),             # Park and Buch: too short to count
    ("EIN MANN STARRT", "Ein Mann starrt"),                        # nothing known in it
])
def test_case_is_restored_as_the_training_data_writes_each_word(typed, read):
    assert LEXICON.normalize(typed).text == read


@pytest.mark.parametrize("typed,read", [
    ("Ein Mann fährt Fahrad.", "Ein Mann fährt Fahrrad."),      # a letter dropped
    ("Ein Mann fährt Fahrradd.", "Ein Mann fährt Fahrrad."),    # doubled
    ("Ein Mann färht Fahrrad.", "Ein Mann fährt Fahrrad."),     # swapped
    ("Zwei Hunddde spielen.", "Zwei Hunde spielen."),           # a letter repeated (and one off)
    ("Auf der Strasse.", "Auf der Straße."),                    # ss for ß
    ("Ein Mann faehrt.", "Ein Mann fährt."),                    # the umlaut spelled out
    ("Ein Mann fahrt.", "Ein Mann fährt."),                     # the accent left out
    ("Eine Frua liest.", "Eine Frau liest."),                   # swapped, in a word of four letters
    ("Eine Xyzw liest.", "Eine Xyzw liest."),                   # four letters, but no known neighbour of one slip
    ("Ein Man fährt.", "Ein Man fährt."),                       # three letters: not mended
    ("Der Parkplatz.", "Der Parkplatz."),                       # unknown, no neighbour: a name, as typed
])
def test_a_slip_is_mended_to_the_most_frequent_known_word(typed, read):
    assert LEXICON.normalize(typed, case=False).text == read


def test_a_word_longer_than_any_known_one_is_mended_only_by_its_letter_runs(monkeypatch):
    """A word two letters or more longer than every known word is one slip from none of them: its
    letter runs are still undone, but its edits (some 100 per letter: 2.5 million for a 12,000-letter
    word, 44 s of one request) are never listed, nor its parts longer than any known word."""
    lexicon = Lexicon.from_sentences(s.split() for s in SENTENCES)
    longest = max(map(len, lexicon.forms))
    monkeypatch.setattr(Lexicon, "_neighbours", lambda self, word: pytest.fail(f"edits listed for {len(word)} letters"))
    assert lexicon.normalize("Zwei Hunnnnnnnnnnnnnnnnnnnnde spielen.", case=False).text == "Zwei Hunde spielen."
    assert lexicon.correction("x" * (longest + 2)) is None
    assert lexicon.normalize("Hund" * 3000).text == "Hund" * 3000  # title case? no: as typed, nothing known in it
    assert lexicon.unknown_form("zwei" + "x" * 20000 + "schnee") == "Zwei" + "x" * 20000 + "schnee"  # ends with Schnee
    assert lexicon.unknown_form("fahrrad" + "x" * 20000) == "Fahrrad" + "x" * 20000                 # begins with Fahrrad


def test_settings_switch_each_part_off():
    assert LEXICON.normalize("EIN MANN FÄHRT FAHRAD", case=False, spelling=False).text == "EIN MANN FÄHRT FAHRAD"
    assert LEXICON.normalize("EIN MANN FÄHRT FAHRAD", case=False).text == "EIN MANN FÄHRT FAHRRAD"  # in capitals
    assert LEXICON.normalize("EIN MANN FÄHRT FAHRAD", spelling=False).text == "Ein Mann fährt fahrad"  # unknown: small
    assert LEXICON.normalize("EIN MANN FÄHRT FAHRAD").text == "Ein Mann fährt Fahrrad"


def test_spans_of_the_read_text_map_back_to_the_typed_one():
    seen = LEXICON.normalize("ein mann fährt fahrad auf der strasse. zwei hunde")
    assert seen.text == "Ein Mann fährt Fahrrad auf der Straße. Zwei Hunde"
    for word in ("Fahrrad", "Straße", "Zwei", "Hunde"):
        start = seen.text.index(word)
        typed = seen.typed[seen.to_typed(start):seen.to_typed(start + len(word))]
        assert typed.lower() in {"fahrad", "strasse", "zwei", "hunde"}, (word, typed)
    assert seen.to_typed(0) == 0 and seen.to_typed(len(seen.text)) == len(seen.typed)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aeinrsäößHUNDEFMN .,!?\n")), max_size=60))
def test_any_text_is_read_and_mapped_back_within_itself(text):
    seen = LEXICON.normalize(text)
    positions = [seen.to_typed(i) for i in range(len(seen.text) + 1)]
    assert positions == sorted(positions) and positions[0] == 0 and positions[-1] == len(text)
    if case_pattern(text) == "as typed":  # only slips change a sentence-case text: never its spacing
        assert [c for c in seen.text if not c.isalpha()] == [c for c in text if not c.isalpha()]


def test_the_final_mark_is_the_one_most_sentences_end_with():
    assert LEXICON.final_mark == "."
    exclaimed = Lexicon.from_sentences(s.split() for s in ["Los !", "Da ist er!", "Hallo !", "Ein Hund ."])
    assert exclaimed.final_mark == "!"
    quoted = Lexicon.from_sentences(s.split() for s in ['Er sagt "ja."', "Sie sagt (nein.)", "Kein Punkt"])
    assert quoted.final_mark == "."  # a closing quote or bracket after the mark is looked through
    headings = Lexicon.from_sentences(s.split() for s in ["Ein Hund", "Zwei Katzen", "Ein Haus ."])
    assert headings.final_mark is None  # most lines end without one: nothing is completed


def test_a_sentence_typed_without_its_mark_is_read_with_it_and_maps_back():
    typed = "ein mann fährt fahrad auf der strasse zwei hunde spielen im schnee"
    seen = LEXICON.normalize(typed)
    cut = seen.text.index(" Zwei")
    spans = [(0, cut), (cut + 1, len(seen.text))]
    marked, moved = with_final_marks(seen, spans, ".", min_words=3)
    assert marked.text == "Ein Mann fährt Fahrrad auf der Straße. Zwei Hunde spielen im Schnee."
    assert [marked.text[a:b] for a, b in moved] == ["Ein Mann fährt Fahrrad auf der Straße.",
                                                    "Zwei Hunde spielen im Schnee."]
    assert [typed[marked.to_typed(a):marked.to_typed(b)] for a, b in moved] == [
        "ein mann fährt fahrad auf der strasse", "zwei hunde spielen im schnee"]
    for word in ("Fahrrad", "Straße", "Zwei", "Schnee"):  # the words' own edits moved with the marks
        start = marked.text.index(word)
        assert typed[marked.to_typed(start):marked.to_typed(start + len(word))].lower() in {
            "fahrad", "strasse", "zwei", "schnee"}


@pytest.mark.parametrize("text", ["Zwei Hunde spielen", "Zwei Hunde spielen im Schnee.", "Zutaten für vier Personen:",
                                  'Er sagt "ja, gerne!"', "Was machen die Hunde da?"])
def test_a_short_or_marked_sentence_stays_as_typed(text):
    seen = Normalized(text, text, "as typed")
    assert with_final_marks(seen, [(0, len(text))], ".", min_words=3) == (seen, [(0, len(text))])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aeinrsäößHUNDEFMN .,!?")), max_size=80),
       st.lists(st.floats(0, 1), max_size=5), st.sampled_from([".", "!"]), st.integers(0, 3))
def test_any_sentences_get_their_marks_and_map_back_within_themselves(typed, cuts, mark, min_words):
    seen = LEXICON.normalize(typed)
    gaps = [i for i, c in enumerate(seen.text) if c == " "]  # sentences are cut between words
    edges = sorted({0, len(seen.text), *(gaps[int(c * len(gaps)) % len(gaps)] for c in cuts if gaps)})
    spans = list(zip(edges, edges[1:]))
    marked, moved = with_final_marks(seen, spans, mark, min_words=min_words)
    positions = [marked.to_typed(i) for i in range(len(marked.text) + 1)]
    assert positions == sorted(positions) and positions[0] == 0 and positions[-1] == len(typed)
    inserted = {start for _, _, start, end in marked.edits if end - start == 1} - {
        start for _, _, start, end in seen.edits}  # what was written (marks and one-letter words alike)
    added = [i for i in inserted if marked.text[i] == mark and marked.to_typed(i) == marked.to_typed(i + 1)]
    assert len(marked.text) == len(seen.text) + len(added)

    def without(a: int, b: int) -> str:
        return "".join(c for i, c in enumerate(marked.text[a:b], a) if i not in added)

    assert without(0, len(marked.text)) == seen.text
    assert [without(c, d) for c, d in moved] == [seen.text[a:b] for a, b in spans]


def test_a_corpus_of_lower_case_lines_is_read_without_capital_starts():
    """Sentence case in training: a lower-case text's first word is capitalized; lines that begin
    in lower case in training (a lowercased corpus, a word list): it stays as typed."""
    assert LEXICON.capital_starts
    assert LEXICON.normalize("ein mann fährt .").text == "Ein Mann fährt ."
    lower = Lexicon.from_sentences(s.lower().split() for s in SENTENCES)
    assert not lower.capital_starts
    assert lower.normalize("ein mann fährt .").text == "ein mann fährt ."


def test_the_file_round_trips_and_a_damaged_one_is_refused_by_name(tmp_path):
    LEXICON.save(tmp_path)
    assert Lexicon.load(tmp_path / LEXICON_FILE) == LEXICON
    raw = json.loads((tmp_path / LEXICON_FILE).read_text())
    for damage, message in [(lambda r: r.update(format="other"), "not an attnmt lexicon"),
                            (lambda r: r["forms"].update(hund=["Katze", 3]), r"forms\['hund'\] must be"),
                            (lambda r: r["forms"].update(hund=["Hund", -1]), r"forms\['hund'\] must be"),
                            (lambda r: r.pop("alphabet"), "not an attnmt lexicon"),
                            (lambda r: r.update(capital_starts="yes"), "not an attnmt lexicon"),
                            (lambda r: r.update(final_mark="x"), "final_mark must be one of"),
                            (lambda r: r.update(final_mark=1), "final_mark must be one of")]:
        broken = json.loads(json.dumps(raw))
        damage(broken)
        (tmp_path / LEXICON_FILE).write_text(json.dumps(broken))
        with pytest.raises(DataError, match=message):
            Lexicon.load(tmp_path / LEXICON_FILE)


def test_a_multilingual_lexicon_round_trips_and_a_damaged_language_is_refused_by_name(tmp_path):
    french = Lexicon.from_sentences(s.split() for s in ["Un chien court .", "Deux chats jouent ."] * 2)
    both = Lexicons({"de": LEXICON, "fr": french})
    both.save(tmp_path)
    assert load_lexicon(tmp_path / LEXICON_FILE) == both
    assert both.of("fr") is french and both.of("cs") is None and both.of(None) is None
    assert both.known("chien") and both.known("Hunde") and not both.known("dog")
    raw = json.loads((tmp_path / LEXICON_FILE).read_text())
    raw["languages"]["fr"]["forms"]["chien"] = ["Hund", 2]
    (tmp_path / LEXICON_FILE).write_text(json.dumps(raw))
    with pytest.raises(DataError, match=r"languages\['fr'\]: forms\['chien'\] must be"):
        load_lexicon(tmp_path / LEXICON_FILE)
    (tmp_path / LEXICON_FILE).write_text(json.dumps({"format": "attnmt-lexicons/1", "languages": []}))
    with pytest.raises(DataError, match="languages must map each source language"):
        load_lexicon(tmp_path / LEXICON_FILE)
    LEXICON.save(tmp_path)  # one language's file reads as it did
    assert load_lexicon(tmp_path / LEXICON_FILE) == LEXICON


def test_a_text_is_identified_by_the_lexicon_whose_word_counts_make_it_likeliest():
    """Lexicons.identify: a unigram model of each language's word counts, add-half smoothed; the
    expected log-probabilities are counted here from the sentences themselves."""
    import math
    from collections import Counter

    french_sentences = ["Un chien court dans la rue .", "Deux chats jouent dans la neige .", "Un homme lit ."] * 2
    french = Lexicon.from_sentences(s.split() for s in french_sentences)
    both = Lexicons({"de": LEXICON, "fr": french})
    words = Counter(w.lower() for s in SENTENCES for w in s.split() if w != ".")
    by_hand = sum(math.log(words[w] + 0.5) - math.log(sum(words.values()) + 0.5 * (len(words) + 1))
                  for w in ["zwei", "hunde", "quark"])
    assert LEXICON.log_likelihood(["zwei", "hunde", "quark"]) == pytest.approx(by_hand, abs=1e-12)
    for text, language in [("Zwei Hunde", "de"), ("ZWEI HUNDE SPIELEN", "de"), ("deux chats", "fr"),
                           ("UN CHIEN COURT", "fr"), ("Strasse", "de"), ("fahrt", "de"),  # spelled out, no accents
                           ("Der Mann und die Hunde", "de")]:
        assert both.identify(text) == language, text
    assert both.identify("Quark 42 !") is None and both.identify("") is None  # no word either knows
    german, french_ll = LEXICON.log_likelihood(["zwei", "hunde"]), french.log_likelihood(["zwei", "hunde"])
    (first, p), (second, q) = both.ranked("Zwei Hunde")
    assert (first, second) == ("de", "fr") and p + q == pytest.approx(1.0)
    assert p / q == pytest.approx(math.exp(german - french_ll))  # equal priors: the likelihoods' ratio
    assert both.identify("un chien", among=["de"]) is None and both.identify("Hunde", among=["de", "cs"]) == "de"
    assert LEXICON.count("strasse") == LEXICON.count("straße") == 3 and LEXICON.count("fahrt") == 3


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_identified_as_a_candidate_or_none(text):
    french = Lexicon.from_sentences(s.split() for s in ["Un chien court .", "Deux chats jouent ."])
    both = Lexicons({"de": LEXICON, "fr": french})
    ranked = both.ranked(text)
    assert both.identify(text) in ("de", "fr", None) and len(ranked) in (0, 2)
    if ranked:
        assert sum(p for _, p in ranked) == pytest.approx(1.0) and ranked[0][1] >= ranked[1][1]


@pytest.fixture(scope="module")
def lexicon_run(tmp_path_factory):
    """A toy run trained now: it keeps its training data's source words (lexicon.json)."""
    from attnmt.cli import main

    base = tmp_path_factory.mktemp("lexicon_run")
    config = toy.write_config(base / "toy.yaml", epochs=3)
    assert main(["train", str(config), "--run-dir", str(base / "run")]) == 0
    return base / "run"


def test_a_trained_run_keeps_its_lexicon_checked_like_its_other_files(lexicon_run):
    from attnmt.run_dir import RunDir

    run = RunDir(lexicon_run)
    assert LEXICON_FILE in run.pipeline_files() and run.pipeline().lexicon is not None
    assert run.pipeline().lexicon.forms["hund"][1] > 0
    checksums = json.loads((lexicon_run / "checksums.json").read_text())
    assert LEXICON_FILE in checksums


def test_capitals_translate_as_sentence_case_written_in_capitals(lexicon_run):
    from attnmt.translator import Translator

    translator = Translator.load(lexicon_run, device="cpu")
    sentence_case = ["Hund katze rot .", "Mann frau kind ball ."]
    plain = translator.translate(sentence_case, beam_size=2)
    shouted = translator.translate([s.upper() for s in sentence_case], beam_size=2)
    whispered = translator.translate([s.lower() for s in sentence_case], beam_size=2)
    assert [r.text for r in shouted] == [restore_case(r.text, "upper") for r in plain]
    assert [r.text for r in whispered] == [restore_case(r.text, "lower") for r in plain]
    assert shouted[0].read_as == "Hund katze rot ." and plain[0].read_as is None
    assert [r.tokens for r in shouted] == [r.tokens for r in plain]  # the model read the same tokens


def test_a_run_with_restore_case_off_reads_the_text_as_typed(lexicon_run, tmp_path):
    from attnmt.translator import Translator

    off = toy.edited_copy(lexicon_run, tmp_path / "off", search={"restore_case": False, "correct_spelling": False})
    result, = Translator.load(off, device="cpu").translate(["HUND KATZE ROT ."], beam_size=2)
    assert result.read_as is None and result.source_tokens[0] == "HUND"


def test_a_paragraph_typed_without_marks_translates_sentence_by_sentence(lexicon_run):
    """The run's lexicon keeps boundary counts (data/boundaries.py); with counts of a grammar of
    three-word sentences, a lower-case paragraph of them without marks is split at their joins and
    translates as its sentences typed one by one, each read with a capital as training had it."""
    import dataclasses
    import itertools

    from attnmt.data.boundaries import BoundaryStats
    from attnmt.translator import Translator

    translator = Translator.load(lexicon_run, device="cpu")
    assert translator.pipeline.lexicon.boundaries.sentences == 600  # the toy task's training pairs
    grammar = [" ".join(words) + " ." for shape in ([["hund", "katze"], ["rot", "blau"], ["haus", "baum"]],
                                             [["mann", "frau"], ["groß", "klein"], ["ball", "wasser"]])
               for words in itertools.product(*shape)]
    lexicon = translator.pipeline.lexicon
    translator.pipeline.lexicon = dataclasses.replace(lexicon, boundaries=BoundaryStats.from_sentences(grammar))
    sentences = ["hund rot haus", "mann groß ball", "katze blau baum", "frau klein wasser"]
    paragraph = " ".join(sentences)
    assert translator.sentences(paragraph, "de") == [(0, 13), (14, 28), (29, 44), (45, 62)]
    joined, = translator.translate([paragraph], beam_size=2, split_sentences=True)
    alone = translator.translate(sentences, beam_size=2)
    assert joined.text == " ".join(r.text for r in alone)
    assert [s.source for s in joined.sentences] == [(0, 13), (14, 28), (29, 44), (45, 62)]
    assert joined.read_as == "Hund rot haus Mann groß ball Katze blau baum Frau klein wasser"


def test_a_sentence_typed_without_its_final_mark_is_read_with_the_training_datas(lexicon_run, tmp_path):
    """The toy run's sentences end with "." (lexicon.final_mark): one of four words typed without
    it translates as typed with it, said in read_as; one of three (a fragment's length) and one
    with its mark stay as typed; with search.complete_final_mark off, as typed."""
    from attnmt.translator import Translator

    translator = Translator.load(lexicon_run, device="cpu")
    assert translator.pipeline.lexicon.final_mark == "."
    bare, marked, short = translator.translate(["Mann frau kind ball", "Mann frau kind ball .", "Hund katze rot"],
                                               beam_size=2)
    assert bare.read_as == "Mann frau kind ball." and marked.read_as is None and short.read_as is None
    assert bare.source_tokens == marked.source_tokens and bare.text == marked.text
    assert short.source_tokens == ["Hund", "katze", "rot"]

    off = toy.edited_copy(lexicon_run, tmp_path / "off", search={"complete_final_mark": False})
    as_typed, = Translator.load(off, device="cpu").translate(["Mann frau kind ball"], beam_size=2)
    assert as_typed.read_as is None and as_typed.source_tokens == ["Mann", "frau", "kind", "ball"]


def test_a_paragraph_without_marks_is_read_with_one_after_each_sentence(lexicon_run):
    """Split by the boundary counts of a grammar of four-word sentences, a lower-case paragraph
    without marks translates as its sentences typed with a capital and a final mark, one by one
    (written back in small letters); each sentence's span is into the text as typed."""
    import dataclasses
    import itertools

    from attnmt.data.boundaries import BoundaryStats
    from attnmt.translator import Translator

    translator = Translator.load(lexicon_run, device="cpu")
    grammar = [" ".join(words) + " ." for shape in ([["hund", "katze"], ["rot", "blau"], ["haus", "baum"], ["ball"]],
                                             [["mann", "frau"], ["groß", "klein"], ["kind", "wasser"], ["rot"]])
               for words in itertools.product(*shape)]
    lexicon = translator.pipeline.lexicon
    translator.pipeline.lexicon = dataclasses.replace(lexicon, boundaries=BoundaryStats.from_sentences(grammar))
    sentences = ["hund rot haus ball", "mann groß kind rot", "katze blau baum ball"]
    paragraph = " ".join(sentences)
    joined, = translator.translate([paragraph], beam_size=2, split_sentences=True)
    alone = translator.translate([s[0].upper() + s[1:] + " ." for s in sentences], beam_size=2)
    assert joined.text == restore_case(" ".join(r.text for r in alone), "lower")  # written as typed
    assert [paragraph[a:b] for a, b in (s.source for s in joined.sentences)] == sentences
    assert joined.read_as == "Hund rot haus ball. Mann groß kind rot. Katze blau baum ball."


def test_title_case_is_told_by_a_word_the_training_data_writes_in_small_letters():
    """German writes its nouns with a capital: "Zwei Hunde" is as typed, "Zwei Hunde Laufen" is not."""
    lexicon = Lexicon.from_sentences(s.split() for s in ["Zwei Hunde laufen .", "Die Hunde spielen ."] * 2)
    assert lexicon.normalize("Zwei Hunde").pattern == "as typed"
    assert lexicon.normalize("Die Hunde Laufen").pattern == "title"
    assert lexicon.normalize("Die Hunde Laufen").text == "Die Hunde laufen"

"""split_sentences: boundary accuracy on the hard cases of tests/support/sentence_cases.py (at least
97% per language), spans that keep every character, line breaks, and bad language codes."""

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from attnmt.data.sentences import split_sentences
from attnmt.errors import LanguageError

sys.path.insert(0, str(Path(__file__).parent))
from support.sentence_cases import HARD_CASES  # noqa: E402

# a place where a sentence could end: after . ! ? or an ellipsis (closing quotes and brackets
# included) and whitespace
CANDIDATE = re.compile(r"(?:[.!?]|\u2026)+[\"'\u201c\u201d\u00bb\u00ab\u2019)\]]*\s+(?=\S)")


def boundaries(text: str, sentences: list[str]) -> set[int]:
    """Where each sentence after the first starts, found in `text` in order."""
    starts, position = [], 0
    for sentence in sentences:
        at = text.index(sentence, position)
        assert not text[position:at].strip(), f"gold sentence {sentence!r} skips text in {text!r}"
        starts.append(at)
        position = at + len(sentence)
    assert not text[position:].strip()
    return set(starts[1:])


@pytest.mark.parametrize("lang", sorted(HARD_CASES))
def test_hard_cases_at_least_97_percent_of_decisions_right(lang):
    right = total = 0
    wrong = []
    for text, sentences in HARD_CASES[lang]:
        gold = boundaries(text, sentences)
        spans = split_sentences(text, lang)
        predicted = {start for start, _ in spans[1:]}
        decisions = gold | predicted | {m.end() for m in CANDIDATE.finditer(text)}
        good = sum((d in gold) == (d in predicted) for d in decisions)
        right, total = right + good, total + len(decisions)
        if good < len(decisions):
            wrong.append([text[a:b] for a, b in spans])
    assert total >= 38  # every language's set has enough decisions to mean something
    assert right / total >= 0.97, f"{lang}: {right}/{total} right; wrong: {wrong}"


def test_the_issue_paragraph_is_four_sentences():
    text = ("Ein Mann fährt Fahrrad. Eine Frau liest ein Buch im Park. Zwei Kinder spielen mit einem Ball am "
            "Strand. Ein Hund rennt über die Wiese.\n")
    assert [text[a:b] for a, b in split_sentences(text, "de")] == [
        "Ein Mann fährt Fahrrad.", "Eine Frau liest ein Buch im Park.",
        "Zwei Kinder spielen mit einem Ball am Strand.", "Ein Hund rennt über die Wiese."]


def test_spans_are_stripped_and_line_breaks_end_sentences():
    text = "  Ein Hund läuft. Eine Katze\r\nschläft\n\n\tZwei Kinder spielen.  \n"
    spans = split_sentences(text, "de")
    assert [text[a:b] for a, b in spans] == ["Ein Hund läuft.", "Eine Katze", "schläft", "Zwei Kinder spielen."]
    assert spans[0] == (2, 17)


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\r\n "])
def test_blank_text_has_no_sentence(text):
    assert split_sentences(text, "en") == []


@pytest.mark.parametrize("lang", [None, "", "German", "DE", "d", "de-DE", 3])
def test_a_language_that_is_no_code_is_refused(lang):
    with pytest.raises(LanguageError, match="lang=.* is not a language code"):
        split_sentences("Ein Hund.", lang)


@pytest.mark.parametrize("code,language", [("pt_BR", "pt"), ("de_AT", "de"), ("fra", "fra")])
def test_a_regional_code_splits_as_its_language(code, language):
    """direction.py's rule is the splitter's: a model of pt_BR splits by Portuguese rules."""
    text = "Um cão corre. O Sr. Silva lê. Dois gatos dormem."
    assert split_sentences(text, code) == split_sentences(text, language)
    assert len(split_sentences(text, code)) == 3


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab Z.!?\n\r\t\u201e\u201c(1)-@\ud800\U0001f600")), max_size=60),
       st.sampled_from(["de", "en", "fr", "cs"]))
def test_every_character_outside_the_spans_is_whitespace(text, lang):
    spans = split_sentences(text, lang)
    position = 0
    for start, end in spans:
        assert position <= start < end <= len(text)
        assert not text[position:start].strip()
        assert text[start:end] == text[start:end].strip()
        assert "\n" not in text[start:end] and "\r" not in text[start:end]
        position = end
    assert not text[position:].strip()


def test_long_hostile_lines_do_not_hang():
    """A body of 1 MiB is what the service takes: splitting it must stay linear (a regex that
    backtracked over a long word, and rules that re-read a growing sentence, took minutes). Run in
    a child process: a regex holds the GIL, so only a process can be stopped at the limit."""
    import subprocess

    script = ("from attnmt.data.sentences import split_sentences\n"
              "for text in ['a' * 1_000_000, 'x@' * 500_000, '1. a ' * 200_000, 'J. ' * 300_000]:\n"
              "    spans = split_sentences(text, 'de')\n"
              "    assert spans[0][0] == 0 and spans[-1][1] == len(text.rstrip()), spans[:3]\n"
              "print('done')\n")
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("split_sentences did not finish 4 lines of 1 MB within 60 s")
    assert done.stdout.strip() == "done", done.stderr[-2000:]

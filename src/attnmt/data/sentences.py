"""Sentence splitting: a text's sentences as character spans, by its source language.

    split_sentences("Ein Hund läuft. Eine Katze schläft.\\nZwei Kinder", "de")
    # [(0, 15), (16, 35), (36, 47)]

attnmt's models are trained on one sentence per line; a paragraph handed to one as a single
"sentence" comes back with sentences missing (docs/results.md, "Sentence splitting"). So every
text the service takes, and `attnmt translate --split-sentences`, goes through here first.

The rules, in order:
  1. a line break always ends a sentence (a list, a heading, a poem's line: one unit each);
     a line without a single capital letter (typed all in lower case) is read as if each
     sentence began with one (`capitalize_starts`), since the rules below read capitals;
  2. within a line, sentencex (Wikimedia's rule-based segmenter: the language's abbreviations,
     decimals, quotes and brackets after the stop, ellipses, URLs) finds the boundaries;
  3. attnmt's corrections of what sentencex 1.0 gets wrong on the hard cases
     (tests/support/sentence_cases.py), as `refine` applies them:
     - no boundary after a "." when the next sentence starts with a lower-case letter ("by Mon.
       evening", "1. flour, 2. sugar"), after a lone capital initial ("M. Dupont", "J.-P.
       Sartre"), or after a list marker alone ("1." of "1. Dies ist ...");
     - in languages that write ordinals with a dot (de, cs, ...: ORDINAL_DOT), none after a
       number of 1-3 digits ("im 19. Jahrhundert", "3. října", "am 3. Oktober"), unless (German)
       an article or a pronoun follows ("mit der Nummer 10. Ein Mann ...");
     - a boundary after "etc." / "usw." / "atd." and after an e-mail address or URL ending a
       sentence, when a capital letter follows ("..., etc. C'était drôle.");
  4. each span is stripped of surrounding whitespace; whitespace-only parts give no span;
  5. with a model's boundary statistics (data/boundaries.py, learned from its training data), a
     span that does not end with a sentence mark (a paragraph typed without them), or that has
     more words than any training sentence, is split where they say; any other stays as it is.

The whitespace between spans (and before the first, after the last) is the caller's to keep: a
paragraph's translation is its sentences' translations joined with the source's own spacing
(`decoding.paragraphs`). The segmenter was chosen by measurement (docs/results.md: boundary
accuracy on de, en, fr, cs hard cases and the pragmatic segmenter's golden rules, and speed).

Shapes: none (character offsets into a str).
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from attnmt.data.boundaries import MARKED_END, WORD, BoundaryStats
from attnmt.direction import LANG_CODE_EXAMPLES, base_language, is_language
from attnmt.errors import LanguageError

Span = tuple[int, int]  # [start, end) character offsets into the text

# languages whose ordinals are a number and a dot ("3. Oktober", "3. října")
ORDINAL_DOT = frozenset({"de", "cs", "sk", "pl", "da", "no", "nb", "nn", "fi", "hu", "sl", "hr", "sr", "bs", "et",
                         "lv", "lt", "is", "fo", "tr"})
_OPENING = "\"'„“‚‘«»([{–—-"  # may come before a sentence's first letter
_ORDINAL = re.compile(r"(?:^|[\s(\[„\"'«»\-–])(?:\d{1,2}\.)?\d{1,3}\.$")
_LIST_MARKER = re.compile(r"^[(\[]?(?:\d{1,3}|[^\W\d_])[.)]$")
# a sentence that ends with a word that never ends one in sentencex's lists, or an address
# (an address is matched from its first character only, (?<!\S): linear in the line's length)
_FORCED_END = re.compile(r"(?:\b(?:etc|usw|usf|atd|aj)\.|(?<!\S)[\"'(\[\u201e\u00ab]?(?:[^\s@]+@|https?://|www\.)\S*?[\w/][.!?])"
                         r"(\s+)")
_SURROGATE = re.compile("[\ud800-\udfff]")
_TAIL = 16  # characters of a sentence's end (and of the next one's start) that the corrections read
_LINE = re.compile(r"[^\r\n\u2028\u2029\x0b\x0c\x85]+")  # a line's characters (str.splitlines' breaks)


def _sentencex(lang: str) -> Callable[[str], Iterable[str]]:
    from sentencex import segment

    return lambda line: segment(lang, line)


def split_sentences(text: str, lang: str, boundaries: BoundaryStats | None = None) -> list[Span]:
    """The sentences of `text` in `lang` (a language code as direction.py defines them: de, en,
    fra, pt_BR, ...; a regional code is split by its language's rules, pt_BR as pt), as
    [start, end) character spans in order, stripped of whitespace; none for an empty or blank text.
    With `boundaries` (a model's, data/boundaries.py: learned from its training data), a sentence
    the rules found that does not end with a sentence mark, or is longer than any training
    sentence, is split where they say (rule 5); without, rules 1-4 alone.

    Raises:
        LanguageError: `lang` is not a language code (sentencex falls back to English rules for a
            language it lacks; a code that names none is a caller's mistake).
    """
    if not is_language(lang):
        raise LanguageError(f"split_sentences: lang={lang!r} is not a language code ({LANG_CODE_EXAMPLES})")
    base = base_language(lang)
    spans = spans_by_line(text, _sentencex(base), base)
    return spans if boundaries is None else split_unmarked(text, spans, boundaries)


def split_unmarked(text: str, spans: list[Span], boundaries: BoundaryStats) -> list[Span]:
    """Rule 5: each span that does not end with a sentence mark (. ! ? or an ellipsis, closing
    quotes or brackets after it), or that has more words than any training sentence had (an
    unpunctuated run that ends in "usw." or a quotation), as the sentences `boundaries.split`
    finds in it; any other span as it is."""
    out: list[Span] = []
    for start, end in spans:
        part = text[start:end]
        if MARKED_END.search(part) and len(WORD.findall(part)) <= boundaries.longest:
            out.append((start, end))
        else:
            out += [(start + a, start + b) for a, b in boundaries.split(part)]
    return out


def spans_by_line(text: str, segment: Callable[[str], Iterable[str]], lang: str | None = None) -> list[Span]:
    """Rules 1-4 above with any segmenter (rule 3 only with `lang`): `segment(line)` gives a line's
    sentences as substrings of it, in order (whitespace around each may be kept or dropped).
    Benchmarks pass other segmenters.
    No character of the text is lost whatever the segmenter returns: a sentence that is not the
    next part of its line is skipped, text it skipped joins the next span, a tail it dropped is a
    span of its own.
    """
    spans: list[Span] = []
    for match in _LINE.finditer(text):
        line, offset = match.group(), match.start()
        if not line.strip():
            continue
        line = _SURROGATE.sub("\ufffd", line)  # a lone surrogate (not UTF-8) as one character of the same place
        if lang is not None and not any(c.isupper() for c in line):
            line = capitalize_starts(line)  # no capital anywhere: read as if each sentence began with one
        found = _line_spans(line, segment)
        if lang is not None:
            found = refine(line, found, lang)
        spans += [(offset + start, offset + end) for start, end in found]
    return spans


_AFTER_MARK = re.compile(r"(^|[.!?\u2026][\"'\u201c\u201d\u00bb)\]]*\s+)([\"'(\[\u201e\u00ab]*)([^\W\d_])")


def capitalize_starts(line: str) -> str:
    """A line typed without capitals with the first letter after each . ! ? (and the line's first)
    upper case, character for character (its spans are the line's): what the segmenter and the
    corrections read of such a line, so that "ein hund läuft. zwei katzen schlafen." is two sentences."""
    def upper(match: re.Match) -> str:
        letter = match.group(3).upper()
        return match.group(1) + match.group(2) + (letter if len(letter) == 1 else match.group(3))
    return _AFTER_MARK.sub(upper, line)


def capitalize_spans(text: str, spans: list[Span]) -> str:
    """`text` with each span's first character upper case where it is a small letter (and stays one
    character): the sentences found in a text read in sentence case begin as that case's do."""
    chars = list(text)
    for start, _ in spans:
        upper = chars[start].upper()
        if chars[start].islower() and len(upper) == 1:
            chars[start] = upper
    return "".join(chars)


def _line_spans(line: str, segment: Callable[[str], Iterable[str]]) -> list[Span]:
    """A line's sentences as spans within it (rules 2 and 4)."""
    spans: list[Span] = []
    position = 0
    for sentence in segment(line):
        stripped = sentence.strip()
        if not stripped:
            continue
        start = line.find(stripped, position)
        if start < 0:
            continue
        if line[position:start].strip():  # text the segmenter left out: part of this sentence
            start = position + len(line[position:start]) - len(line[position:start].lstrip())
        spans.append((start, start + len(stripped)))
        position = start + len(stripped)
    rest = line[position:]
    if rest.strip():  # a segmenter that dropped the line's tail: the tail is a sentence of its own
        start = position + len(rest) - len(rest.lstrip())
        spans.append((start, len(line.rstrip())))
    return spans


# words that follow a sentence-ending number but never an ordinal ("... mit der Nummer 10. Ein Mann ...")
_STARTERS = {"de": frozenset("Der Die Das Den Dem Des Ein Eine Einer Eines Einem Einen Er Sie Es Wir Ich Ihr Man "
                             "Zwei Drei Vier Fünf Viele Alle Dann Hier Dort".split())}


def _first_word(line: str, start: int, end: int) -> str:
    return line[start:min(end, start + _TAIL)].lstrip(_OPENING).split(" ", 1)[0]


def _starts_lower(sentence: str) -> bool:
    first = sentence.lstrip(_OPENING)[:1]
    return first.isalpha() and first.islower()


def _ends_with_initial(sentence: str, lang: str) -> bool:
    """"J." or "-P." at the end: one capital letter after a space, a hyphen or an opening mark, and
    a dot (not "U.S.", nor English's "I")."""
    return (len(sentence) >= 2 and sentence[-1] == "." and sentence[-2].isupper()
            and (len(sentence) == 2 or sentence[-3].isspace() or sentence[-3] in _OPENING)
            and not (lang == "en" and sentence[-2] == "I"))


def refine(line: str, spans: list[Span], lang: str) -> list[Span]:
    """Rule 3 of the module docstring over a line's sentence spans (stripped, in order)."""
    split: list[Span] = []
    for start, end in spans:  # boundaries the segmenter missed
        for match in _FORCED_END.finditer(line, start, end):
            after = match.end()
            if after < end and line[after:end].lstrip(_OPENING)[:1].isupper():
                split.append((start, match.start(1)))
                start = after
        split.append((start, end))
    merged: list[Span] = []
    for start, end in split:  # boundaries the segmenter put where none is
        if merged:
            # the sentence before, or its last characters (all that the rules read: linear in the line)
            before = line[max(merged[-1][0], merged[-1][1] - _TAIL):merged[-1][1]]
            whole = merged[-1][1] - merged[-1][0] <= _TAIL
            join = before.endswith(".") and (
                _starts_lower(line[start:min(end, start + _TAIL)]) or _ends_with_initial(before, lang)
                or (whole and _LIST_MARKER.match(before))
                or (lang in ORDINAL_DOT and _ORDINAL.search(before if whole else " " + before[-8:]) is not None
                    and _first_word(line, start, end) not in _STARTERS.get(lang, ())))
            if join:
                merged[-1] = (merged[-1][0], end)
                continue
        merged.append((start, end))
    return merged

"""The source words of a model's training data, and what they give a text typed another way:
its case restored and its slips of the finger mended, before the model reads it.

    lexicon = Lexicon.from_sentences(word_lists)     # counted at training, saved with the run (lexicon.json)
    seen = lexicon.normalize("EIN MANN FÄHRT FAHRAD")  # seen.text "Ein Mann fährt Fahrrad", seen.pattern "upper"
    restore_case(translation, seen.pattern)          # -> "A MAN RIDES A BIKE"
    seen.to_typed(offset)                            # an offset into seen.text, into the typed text
    with_final_marks(seen, spans, lexicon.final_mark, min_words=3)  # "Ein Hund läuft im Park" -> "... Park."
    lexicon.boundaries                               # where its sentences end (boundaries.py), or None
    lexicons.of("fr")                                # a multilingual model's: each source language its own

A model trained on sentence-case captions has seen "Mann", never "mann" or "MANN" (a word
vocabulary lacks them; sentencepiece cuts them into pieces it rarely saw): a text typed all in
lower case, in capitals or in title case (`case_pattern`) is read as the training data writes
its words (each word's most frequent form, counted outside a sentence's first position, as
Moses' truecaser counts; the first word of a sentence upper case), and the translation is
written in the pattern it was typed in. A word the training data never had, of four letters or
more, that is one slip away from a word it had (a letter swapped, dropped, doubled, added or
replaced; a letter repeated; "ss" for "ß", "ae" for "ä", accents left out) becomes the most
frequent such word. A word it had, or an unknown one with no such neighbour, stays as typed (a
name), but in a text typed in small letters, capitals or title case an unknown word (longer than
an acronym, in capitals) takes the case of a known word it ends or begins with (`unknown_form`),
else small letters. The lexicon also keeps
the counts that find sentence boundaries in a text typed without sentence marks (`boundaries`,
data/boundaries.py: how often each word ends and starts a sentence and follows another, the
sentences' lengths); a lexicon.json written before them has none, and such a text is then not
split. And it keeps the mark its sentences end with (`final_mark`, where most of them end with
one): a sentence typed without it is read with it (`with_final_marks`), as the model saw every
caption, instead of training the model on sources stripped of it.

Shapes: none (text).
"""

from __future__ import annotations

import dataclasses
import math
import re
from bisect import bisect_right
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Sequence

from attnmt.data.boundaries import BoundaryCounter, BoundaryStats
from attnmt.data.phrases import Phrases
from attnmt.errors import DataError
from attnmt.files import read_json, write_json

LEXICON_FILE = "lexicon.json"
FORMAT = "attnmt-lexicon/1"
LEXICONS_FORMAT = "attnmt-lexicons/1"  # a multilingual model's: one lexicon per source language
MIN_COUNT = 2        # a word seen fewer times is no correction target
MIN_LENGTH = 4       # shorter unknown words are not corrected (too many neighbours)
ACRONYM = 4          # an unknown word of at most this many letters typed in capitals stays so (NATO, ESA)
PART = 5             # the least letters of a known part that sets an unknown word's case (unknown_form)
_WORD = re.compile(r"[^\W\d_]+")
_RUN = re.compile(r"([^\W\d_])\1{2,}")  # a letter typed three times or more
_SPELLED_OUT = (("ae", "ä"), ("oe", "ö"), ("ue", "ü"), ("ss", "ß"))
CASE_PATTERNS = ("lower", "upper", "title")  # the patterns whose case is restored; any other: "as typed"
FINAL_MARKS = ".!?\u2026"  # the marks a sentence ends with (final_mark is the commonest of them)
_MARKED = re.compile(r"[.!?\u2026:;,][\"'\u201c\u201d\u00bb\u2018\u2019)\]]*\s*$")  # ends in a mark (or a colon ...)


def case_pattern(text: str) -> str:
    """How `text` is cased: "lower" (no capital), "upper" (no small letter), "title" (every word of
    two or more starts with a capital and goes on in small letters), or "as typed" (sentence case,
    mixed, or too few letters to tell)."""
    letters = [c for c in text if c.isalpha()]
    if len(letters) < 2:
        return "as typed"
    if not any(c.isupper() for c in letters):
        return "lower"
    if not any(c.islower() for c in letters):
        return "upper"
    words = _WORD.findall(text)
    if len(words) >= 2 and all(w[0].isupper() and (len(w) == 1 or w[1:].islower()) for w in words):
        return "title"
    return "as typed"


def _each(text: str, change) -> str:
    """`change` of each character, where it is one character (its spans stay where they were:
    "ß".upper() is "SS", so ß stays; the capital ẞ when it goes upper)."""
    out = []
    for c in text:
        changed = change(c)
        out.append(changed if len(changed) == 1 else ("\u1e9e" if c == "ß" else c))
    return "".join(out)


def restore_case(text: str, pattern: str) -> str:
    """A translation written in the input's case pattern (case_pattern's), character for character:
    its length, and so every span into it, stays."""
    if pattern == "lower":
        return _each(text, str.lower)
    if pattern == "upper":
        return _each(text, str.upper)
    if pattern == "title":
        return re.sub(r"\w+", lambda m: _each(m.group(0)[:1], str.upper) + _each(m.group(0)[1:], str.lower), text)
    return text


@dataclass(frozen=True)
class Normalized:
    """A text as the model is to read it: `text`, the `typed` one's `pattern`, and the words that
    changed, as (typed start, typed end, new start, new end) in order (to map spans back)."""

    text: str
    typed: str
    pattern: str
    edits: tuple[tuple[int, int, int, int], ...] = ()

    def to_typed(self, offset: int) -> int:
        """An offset into `text` as an offset into `typed` (inside a changed word: its typed end)."""
        shift = 0
        for typed_start, typed_end, start, end in self.edits:
            if offset < start:
                break
            if offset < end:
                return min(typed_end, typed_start + (offset - start))
            shift = typed_end - end
        return offset + shift


def with_final_marks(seen: Normalized, spans: Sequence[tuple[int, int]], mark: str, *, min_words: int
                     ) -> tuple[Normalized, list[tuple[int, int]]]:
    """`seen` with `mark` written after each of its sentences (spans into seen.text, cut between
    words) of more than
    `min_words` words that ends without a mark (. ! ? ... : ; , and any closing quote), and the
    sentences' spans in the new text (each holding its mark). Each mark is an edit of no typed
    characters, so `to_typed` maps the new text back to the typed one."""
    text = seen.text
    at = [start + len(text[start:end].rstrip()) for start, end in spans  # after its last character
          if not _MARKED.search(text[start:end]) and len(_WORD.findall(text[start:end])) > min_words]
    if not at:
        return seen, list(spans)

    def moved(offset: int) -> int:  # a mark written at `offset` comes before what begins there
        return offset + bisect_right(at, offset)  # `at` is in order, as the spans are

    pieces, last = [], 0
    for p in at:
        pieces += [text[last:p], mark]
        last = p
    pieces.append(text[last:])
    edits = [(ts, te, moved(ns), moved(ns) + (ne - ns)) for ts, te, ns, ne in seen.edits]
    edits += [(seen.to_typed(p), seen.to_typed(p), moved(p) - 1, moved(p)) for p in at]
    marked = dataclasses.replace(seen, text="".join(pieces), edits=tuple(sorted(edits, key=lambda e: e[2])))
    return marked, [(moved(start), moved(end)) for start, end in spans]


def _plain(word: str) -> str:
    """`word`'s letters without their accents ("fährt" -> "fahrt")."""
    return "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))


def _spelled_in(word: str) -> set[str]:
    """`word` with each spelled-out letter it holds written as the letter ("strasse" -> "straße")."""
    return {word.replace(spelled, letter) for spelled, letter in _SPELLED_OUT if spelled in word}


def _letters(alphabet: str, word: str) -> str:
    return "".join(dict.fromkeys(alphabet + word))


@dataclass
class Lexicon:
    """Word forms of a training data's source side.

    Attributes:
        forms: lower-cased word -> its most frequent form and how often the word was seen (all forms).
        alphabet: the letters the words are made of (a replaced or added letter is one of them).
        capital_starts: whether most of its sentences begin with a capital (sentence case): a
            text read in its case then does too; a corpus of lower-case lines does not.
        boundaries: the sentences' boundary counts (boundaries.py); None in a lexicon saved before them.
        final_mark: the mark (of FINAL_MARKS) most of its sentences end with; None when most end
            without one, or in a lexicon saved before it was kept.
        phrases: its short phrases' translations (data/phrases.py), counted over the training pairs
            (train_data.source_lexicon); None for a multilingual run's or one saved before them.
        phrases_to: a multilingual run's: per target language, the translations of its short phrases
            into it, counted over that direction's pairs (empty: none, or a bilingual run's).
    """

    forms: dict[str, tuple[str, int]]
    alphabet: str = field(default="")
    capital_starts: bool = True
    boundaries: BoundaryStats | None = None
    final_mark: str | None = None
    phrases: Phrases | None = None
    phrases_to: dict[str, Phrases] = field(default_factory=dict)

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sequence[str]]) -> Lexicon:
        """Count the words of tokenized or whitespace-split sentences (tokens without a letter and
        <unk> skipped); a word's form is counted outside a sentence's first position when it
        occurs there at all. The sentences' boundaries are counted in the same pass."""
        inner: dict[str, dict[str, int]] = {}
        first: dict[str, dict[str, int]] = {}
        starts = capitals = 0
        marks: Counter[str] = Counter()  # the final mark of each sentence ("" for none)
        boundaries = BoundaryCounter()
        for words in sentences:
            boundaries.add(words)
            last = words[-1].rstrip("\"'\u201c\u201d\u00bb\u2018\u2019)]") if words else ""
            marks[last[-1] if last and last[-1] in FINAL_MARKS else ""] += 1
            opening = next((w for w in words if _WORD.search(w) and w != "<unk>"), None)
            if opening is not None:
                starts += 1
                capitals += _WORD.search(opening).group(0)[0].isupper()
            for position, token in enumerate(words):
                for word in _WORD.findall(token) if token != "<unk>" else ():
                    table = first if position == 0 else inner
                    forms = table.setdefault(word.lower(), {})
                    forms[word] = forms.get(word, 0) + 1
        found = {}
        for lower in inner.keys() | first.keys():
            counts = inner.get(lower) or first[lower]
            best = max(counts, key=lambda form: (counts[form], form))
            total = sum(inner.get(lower, {}).values()) + sum(first.get(lower, {}).values())
            found[lower] = (best, total)
        letters = sorted({c for word in found for c in word})
        mark, count = max(marks.items(), key=lambda item: (item[1], item[0]), default=("", 0))
        final_mark = mark if mark and count * 2 > sum(marks.values()) else None
        return cls(found, "".join(letters), capital_starts=capitals * 2 >= starts, boundaries=boundaries.stats(),
                   final_mark=final_mark)

    # ---- the input's words

    def known(self, word: str) -> bool:
        return word.lower() in self.forms

    def correction(self, word: str) -> str | None:
        """The word a typed word was meant to be (see the module docstring): its training form,
        capitalized or in capitals when the typed word is; None when it is known, short, or has no
        such neighbour."""
        lower = word.lower()
        if len(lower) < MIN_LENGTH or lower in self.forms:
            return None
        if len(lower) > self._longest + 1:  # no one slip from a known word: only its letter runs may be
            near = {_RUN.sub(r"\1", lower), _RUN.sub(r"\1\1", lower)}  # (and a 12,000-letter word costs no more)
        else:
            near = self._neighbours(lower)
        candidates = [c for c in near if c in self.forms and self.forms[c][1] >= MIN_COUNT]
        if not candidates:
            return None
        best = max(candidates, key=lambda c: (self.forms[c][1], c))
        form = self.forms[best][0]
        if len(word) > 1 and word.isupper():
            return _each(form, str.upper)
        return form if not word[0].isupper() else form[:1].upper() + form[1:]

    def unknown_form(self, lower: str) -> str:
        """How a word the training data never had is read in a text typed in small letters, capitals
        or title case: capitalized when the longest known word (of PART letters or more) that ends
        it, else the longest that begins it, is written capitalized (a German compound takes its
        last part's case: "schneelandschaft", "SCHNEELANDSCHAFT" -> "Schneelandschaft"), else in
        small letters ("ANSTARRT" -> "anstarrt"). Left in capitals, a subword model reads such a
        word as letters it rarely saw and may run to its length bound ("A SAAAAAAAA..."); a word
        vocabulary reads it as <unk> either way. Moses' truecaser leaves it as typed: on
        test_2016_flickr typed in small letters this reads 98.1% of the words as written, against
        97.1% so (benchmarks/quality/truecasing.py)."""
        longest = self._longest  # no longer part is a known word: a 12,000-letter input costs no more
        parts = ([lower[i:] for i in range(max(1, len(lower) - longest), len(lower) - PART + 1)]
                 + [lower[:j] for j in range(min(len(lower) - 1, longest), PART - 1, -1)])
        for part in parts:
            if part in self.forms:
                return lower[:1].upper() + lower[1:] if self.forms[part][0][:1].isupper() else lower
        return lower

    def _neighbours(self, word: str) -> set[str]:
        """Words one slip from `word` (Norvig's edits1 over the lexicon's letters), and its letter
        runs, spelled-out umlauts and dropped accents undone."""
        alphabet = _letters(self.alphabet, word)
        splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
        found = {a + b[1:] for a, b in splits if b}
        found |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
        found |= {a + c + b[1:] for a, b in splits if b for c in alphabet}
        found |= {a + c + b for a, b in splits for c in alphabet}
        found.add(_RUN.sub(r"\1", word))
        found.add(_RUN.sub(r"\1\1", word))
        found |= _spelled_in(word)
        found |= {w for w in self._accented(_plain(word)) if w != word}
        return found

    @cached_property
    def _longest(self) -> int:
        """The length of the longest known word (0: none)."""
        return max(map(len, self.forms), default=0)

    @cached_property
    def _by_plain(self) -> dict[str, set[str]]:
        """Lower-cased words by their letters without accents."""
        found: dict[str, set[str]] = {}
        for lower in self.forms:
            found.setdefault(_plain(lower), set()).add(lower)
        return found

    def _accented(self, plain: str) -> set[str]:
        """Forms of the lexicon whose letters without accents are `plain` ("fahrt" -> "fährt")."""
        return self._by_plain.get(plain, set())

    def normalize(self, text: str, *, case: bool = True, spelling: bool = True) -> Normalized:
        """`text` as the model is to read it, and its case pattern (case_pattern's; "as typed" when
        `case` is off): in a lower / upper / title pattern each known word in its training form,
        each sentence's first word upper case (where the training data's sentences begin so); each unknown word one slip from a known one mended.
        Title case is told only by a word after the first that the training data writes in small
        letters: "Zwei Hunde" (nouns are capitals) reads as typed, "Zwei Hunde Laufen" as title case."""
        pattern = case_pattern(text) if case else "as typed"
        if pattern == "title" and not any(self.writes_small(w) for w in _WORD.findall(text)[1:]):
            pattern = "as typed"  # every capital where the training data writes one: "Zwei Hunde" is German
        restore = pattern in CASE_PATTERNS
        out, last, start_of_sentence = [], 0, True
        edits, length = [], 0  # length: of the new text so far
        for match in _WORD.finditer(text):
            word = match.group(0)
            between = text[last:match.start()]
            if re.search(r"[.!?]\s*$", between) or (last == 0 and not between.strip(" \"'([„“«")):
                start_of_sentence = True
            if restore:
                lower = word.lower()
                if lower in self.forms:
                    word = self.forms[lower][0]
                elif pattern != "upper" or len(lower) > ACRONYM:  # unknown: in a known part's case, else small
                    word = self.unknown_form(lower)  # letters; a short one in capitals stays (an acronym)
            if spelling and not self.known(word):
                fixed = self.correction(word.lower() if pattern == "upper" else word)
                if fixed is not None:
                    word = fixed
            if restore and start_of_sentence and self.capital_starts:
                word = word[:1].upper() + word[1:]
            start_of_sentence = False
            out.append(between + word)
            length += len(between)
            if word != match.group(0):
                edits.append((match.start(), match.end(), length, length + len(word)))
            length += len(word)
            last = match.end()
        out.append(text[last:])
        return Normalized("".join(out), text, pattern, tuple(edits))

    @cached_property
    def _words_seen(self) -> int:
        """How many words the counts hold (every occurrence of every form)."""
        return sum(count for _, count in self.forms.values())

    def count(self, word: str) -> int:
        """How often the training data had lower-cased `word`; an unknown one: its forms with accents
        or spelled out ("muz" -> "muž", "strasse" -> "straße"), together."""
        if word in self.forms:
            return self.forms[word][1]
        return sum(self.forms[form][1] for form in {f for w in {word} | _spelled_in(word)
                                                     for f in self._accented(_plain(w))})

    def log_likelihood(self, words: Sequence[str]) -> float:
        """The log-probability of lower-cased `words` under this lexicon's word counts (`count`) as a
        unigram model, add-half smoothed (an unknown word: half a count among the words seen)."""
        return self._log_likelihood([self.count(word) for word in words])

    def _log_likelihood(self, counts: Sequence[int]) -> float:
        """`log_likelihood` of words whose `count`s are given."""
        denominator = math.log(self._words_seen + 0.5 * (len(self.forms) + 1))
        return sum(math.log(count + 0.5) - denominator for count in counts)

    def writes_small(self, word: str) -> bool:
        """Whether the training data writes `word` with a small first letter (an unknown word: as typed)."""
        return self.forms.get(word.lower(), (word, 0))[0][:1].islower()

    def table(self, target: str | None = None) -> Phrases | None:
        """The phrase table into `target` (a multilingual run's, by its target language), else the run's."""
        return self.phrases_to.get(target) if self.phrases_to else self.phrases

    def short_translations(self, text: str, target: str | None = None) -> list[tuple[str, float]]:
        """The phrase table's translations of `text` (data/phrases.py) into `target` (`table`), best
        first, each with its share of the times its phrase was cut ([]: none, or no short phrase);
        capitalized when its first word is, being a word this lexicon writes in small letters
        ("Zwei Hunde" -> "Two dogs", "Hund" -> "dog"); [] too where the model saw short sources often
        enough to translate them itself (Phrases.used)."""
        phrases = self.table(target)
        if phrases is None or not phrases.used:
            return []
        first = _WORD.search(text)
        start = first is not None and first.group(0)[0].isupper() and self.writes_small(first.group(0))
        return phrases.scored(text, sentence_start=start)

    # ---- a file of the run

    def to_dict(self) -> dict:
        saved = {"format": FORMAT, "alphabet": self.alphabet, "capital_starts": self.capital_starts,
                 "forms": {k: list(v) for k, v in sorted(self.forms.items())}}
        if self.boundaries is not None:
            saved["boundaries"] = self.boundaries.to_dict()
        if self.final_mark is not None:
            saved["final_mark"] = self.final_mark
        if self.phrases is not None:
            saved["phrases"] = self.phrases.to_dict()
        if self.phrases_to:
            saved["phrases_to"] = {lang: table.to_dict() for lang, table in sorted(self.phrases_to.items())}
        return saved

    def save(self, folder) -> None:
        write_json(folder / LEXICON_FILE, self.to_dict(), indent=None)

    @classmethod
    def load(cls, path) -> Lexicon:
        """Read lexicon.json, checked.

        Raises:
            DataError: not a lexicon of this format, naming the file and what is wrong.
        """
        return cls.from_dict(read_json(path, error=DataError), str(path))

    @classmethod
    def from_dict(cls, raw, where: str) -> Lexicon:
        """A lexicon from its saved dict, checked; errors name `where` (the file, and the language in
        a multilingual one)."""
        if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("forms"), dict) \
                or not isinstance(raw.get("alphabet"), str) or not isinstance(raw.get("capital_starts", True), bool):
            raise DataError(f"{where}: not an attnmt lexicon ({FORMAT}: format, alphabet, capital_starts, forms)")
        forms = {}
        for lower, entry in raw["forms"].items():
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                    and isinstance(entry[1], int) and not isinstance(entry[1], bool) and entry[1] > 0
                    and entry[0].lower() == lower):
                raise DataError(f"{where}: forms[{lower[:40]!r}] must be [its form, a count > 0]")
            forms[lower] = (entry[0], entry[1])
        boundaries = BoundaryStats.from_dict(raw["boundaries"], where) if "boundaries" in raw else None
        final_mark = raw.get("final_mark")  # absent: none kept (or most sentences end without one)
        if final_mark is not None and (not isinstance(final_mark, str) or final_mark not in tuple(FINAL_MARKS)):
            raise DataError(f"{where}: final_mark must be one of {' '.join(FINAL_MARKS)} (or absent), not "
                            f"{str(final_mark)[:40]!r}")
        phrases = Phrases.from_dict(raw["phrases"], where) if "phrases" in raw else None
        phrases_to = raw.get("phrases_to", {})  # absent: a bilingual run's, or written before them
        if not isinstance(phrases_to, dict) or not all(isinstance(lang, str) and lang for lang in phrases_to):
            raise DataError(f"{where}: phrases_to must map each target language to its phrase table")
        phrases_to = {lang: Phrases.from_dict(table, f"{where}: phrases_to[{lang[:20]!r}]")
                      for lang, table in phrases_to.items()}
        return cls(forms, raw["alphabet"], raw.get("capital_starts", True),  # absent: written before the keys
                   boundaries, final_mark, phrases, phrases_to)


@dataclass
class Lexicons:
    """A multilingual model's source words: one Lexicon per language it reads, in one lexicon.json.
    A text is read with its own language's (`of`); a word is known when any of them knows it."""

    languages: dict[str, Lexicon]

    def of(self, lang: str | None) -> Lexicon | None:
        return self.languages.get(lang) if lang is not None else None

    def known(self, word: str) -> bool:
        return any(lexicon.known(word) for lexicon in self.languages.values())

    def ranked(self, text: str, among: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The languages of `among` (default: every one it has a lexicon of) with the probability
        that `text` is in each, most likely first: its words' likelihood under each language's word
        counts (Lexicon.log_likelihood), normalized over them (equal priors); [] when no such
        lexicon knows any of its words (nothing to tell them apart)."""
        words = [word.lower() for word in _WORD.findall(text)]
        candidates = [lang for lang in (among if among is not None else sorted(self.languages)) if lang in self.languages]
        counts = {lang: [self.languages[lang].count(word) for word in words] for lang in candidates}
        if not any(any(found) for found in counts.values()):
            return []
        scores = {lang: self.languages[lang]._log_likelihood(found) for lang, found in counts.items()}
        best = max(scores.values())
        total = sum(math.exp(score - best) for score in scores.values())
        return sorted(((lang, math.exp(score - best) / total) for lang, score in scores.items()),
                      key=lambda item: (-item[1], item[0]))

    def identify(self, text: str, among: Sequence[str] | None = None) -> str | None:
        """The likeliest language of `text` among `among` (`ranked`); None when no lexicon of them
        knows any of its words."""
        found = self.ranked(text, among)
        return found[0][0] if found else None

    def save(self, folder) -> None:
        write_json(folder / LEXICON_FILE, {"format": LEXICONS_FORMAT, "languages": {
            lang: lexicon.to_dict() for lang, lexicon in sorted(self.languages.items())}}, indent=None)


def load_lexicon(path) -> Lexicon | Lexicons:
    """lexicon.json: one language's Lexicon, or a multilingual model's Lexicons, checked.

    Raises:
        DataError: neither, naming the file (and the language) and what is wrong.
    """
    raw = read_json(path, error=DataError)
    if not (isinstance(raw, dict) and raw.get("format") == LEXICONS_FORMAT):
        return Lexicon.from_dict(raw, str(path))
    languages = raw.get("languages")
    if not isinstance(languages, dict) or not languages or not all(isinstance(k, str) for k in languages):
        raise DataError(f"{path}: languages must map each source language to its lexicon ({LEXICONS_FORMAT})")
    return Lexicons({lang: Lexicon.from_dict(entry, f"{path}: languages[{lang[:20]!r}]")
                     for lang, entry in languages.items()})

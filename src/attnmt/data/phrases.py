"""The training data's short phrases and their translations: how "Hund" becomes "dog" and not a caption.

    phrases = fragments.phrases(word_pairs)              # counted over aligned training pairs (data/fragments.py)
    phrases = fragments.phrases_of(examples)             # the same, of prepared id arrays
    phrases = Phrases.from_pieces((src, tgt, pieces) ...)  # what both count: each pair's pieces
    phrases.translations("zwei schwarze Hunde")          # ["two black dogs", ...], best first; [] if unknown
    phrases.to_dict() / Phrases.from_dict(raw, where)    # kept in the run's lexicon.json (data/lexicon.py)

A model trained on captions answers one word with a caption ("dog dog dog ...": docs/results.md,
"What people type"). Training it on short pieces of its pairs (`data.augment.fragments`) teaches
it otherwise, at the price of the updates they take. The same pieces, counted instead of trained
on, make a phrase table (Koehn et al. 2003): every consistent piece of 1 to MAX_WORDS source
words that data/fragments.py cuts from a training pair (its word links), each source phrase with
the target phrases it was cut with, by count. An input of one to three words is then translated
as the phrase it is, or as a sequence of known phrases in its order (the fewest pieces, then the
most often seen: "zwei Katzen" -> "two" + "cats"); a word the table lacks leaves it to the model.
Phrases seen fewer than MIN_COUNT times are not kept (a piece cut once is as often a misalignment
as a translation). A model whose training sources were short often enough (RARE or more of them
of one to three words: a glossary, UI strings) has learned short inputs itself: its table is kept
but not used (`used`).

Shapes: none (words and strings).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Sequence

from attnmt.errors import DataError

MAX_WORDS = 3   # the longest short input (a noun phrase: "zwei kleine Hunde"), and piece of data/fragments.py

MIN_COUNT = 2   # a phrase pair is kept when it was cut at least this often
KEEP = 4        # translations kept per source phrase (n-best alternatives), best first
RARE = 0.01     # the table is used when fewer than this share of the training sources are that short
FINAL = ".!?\u2026"
PLAIN = re.compile(r"[^\W_]+(?:[-'\u2019][^\W_]+)*")  # a word without punctuation (hyphens, apostrophes inside)


def _is_word(token: str) -> bool:
    return any(c.isalnum() for c in token)


def strip_ends(words: Sequence[str]) -> list[str]:
    """Words with the punctuation at the piece's two ends taken off ("Straße." -> "Straße")."""
    words = list(words)
    while words and not _is_word(words[-1]):
        words.pop()
    while words and not _is_word(words[0]):
        words.pop(0)
    if words:
        words[-1] = words[-1].rstrip(".,;:!?\"')]»“”")
        words[0] = words[0].lstrip("\"'([«„“")
    return [w for w in words if w]


def _shares(found: list[tuple[str, int]]) -> list[tuple[str, float]]:
    """Each translation with its count's share of the kept ones'."""
    total = sum(n for _, n in found)
    return [(text, n / total) for text, n in found]


@dataclass
class Phrases:
    """Source phrases (lower-cased words joined by one space) -> their translations, best first, each
    with how often it was cut from the training pairs.

    Attributes:
        entries: phrase -> [(translation, count), ...] (at most KEEP, counts falling).
        short_sources: the share of the training sources of 1 to MAX_WORDS words.
    """

    entries: dict[str, list[tuple[str, int]]]
    short_sources: float = 0.0

    @property
    def used(self) -> bool:
        """Whether short inputs are translated by the table: its model rarely saw one (RARE)."""
        return self.short_sources < RARE

    @classmethod
    def from_pieces(cls, pairs: Iterable[tuple[Sequence[str], Sequence[str], Sequence[tuple[tuple[int, int],
                                                                                          tuple[int, int]]]]]
                    ) -> Phrases:
        """Count each (source words, target words, its pieces: ((source start, end), (target start,
        end)), as Fragments.pieces cuts them). A target piece that opens its sentence is written with
        its first word in the form that word has inside sentences ("A dog" -> "a dog", "New York"
        stays)."""
        cut: dict[str, Counter[str]] = {}
        inner: Counter[str] = Counter()   # target words seen inside a sentence, per form
        openings: list[tuple[str, str]] = []
        pairs_seen = short = 0
        for src, tgt, pieces in pairs:
            pairs_seen += 1
            short += 1 <= sum(_is_word(w) for w in src) <= MAX_WORDS
            inner.update(tgt[1:])
            for (a, b), (c, d) in pieces:
                source, target = strip_ends(src[a:b]), strip_ends(tgt[c:d])
                if source and target and all(PLAIN.fullmatch(w) for w in source):
                    key, text = " ".join(source).lower(), " ".join(target)
                    if c == 0:
                        openings.append((key, text))
                    else:
                        cut.setdefault(key, Counter())[text] += 1
        for key, text in openings:
            first, _, rest = text.partition(" ")
            if inner[first.lower()] > inner[first]:
                text = (first.lower() + " " + rest).strip()
            cut.setdefault(key, Counter())[text] += 1
        entries = {}
        for key, counts in cut.items():
            kept = [(text, n) for text, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
                    if n >= MIN_COUNT][:KEEP]
            if kept:
                entries[key] = kept
        return cls(entries, round(short / max(pairs_seen, 1), 6))

    def translations(self, text: str, *, sentence_start: bool = False) -> list[str]:
        """The translations of `text` when it is one to MAX_WORDS plain words (a final mark kept:
        "Hund!" -> "dog!"), best first: the phrase's own, else the one sequence of known phrases
        (fewest pieces, then the most seen) that makes it up; [] when a word is unknown or the
        text is no short phrase. `sentence_start`: the text begins a sentence (its first word is
        capitalized only there): the translation begins with a capital too."""
        return [t for t, _ in self.scored(text, sentence_start=sentence_start)]

    def scored(self, text: str, *, sentence_start: bool = False) -> list[tuple[str, float]]:
        """`translations`, each with its share of the times its phrase was cut (of a sequence of
        phrases, the product of theirs): how often the training pairs translate it so."""
        body = text.strip()
        mark = ""
        while body and body[-1] in FINAL:
            body, mark = body[:-1].rstrip(), body[-1] + mark
        words = body.split()
        if not 1 <= len(words) <= MAX_WORDS or not all(PLAIN.fullmatch(w) for w in words):
            return []
        key = " ".join(words).lower()
        found = _shares(self.entries.get(key, []))
        if not found:
            composed = self._composed(key.split())
            found = [composed] if composed else []
        if sentence_start:
            found = [(t[:1].upper() + t[1:], share) for t, share in found]
        return [(t + mark, share) for t, share in found]

    def _composed(self, words: list[str]) -> tuple[str, float] | None:
        """The best split of `words` into known phrases, in order, joined, with the product of their
        shares (None: none)."""
        # end -> (pieces, -seen, their texts, the product of their shares)
        best: dict[int, tuple[int, int, list[str], float]] = {0: (0, 0, [], 1.0)}
        for end in range(1, len(words) + 1):
            options = []
            for start in range(max(0, end - MAX_WORDS), end):
                entry = self.entries.get(" ".join(words[start:end]))
                if start in best and entry:
                    pieces, seen, parts, share = best[start]
                    text, first = _shares(entry)[0]
                    options.append((pieces + 1, seen - entry[0][1], parts + [text], share * first))
            if options:
                best[end] = min(options, key=lambda option: option[:2])
        if len(words) not in best:
            return None
        _, _, parts, share = best[len(words)]
        return " ".join(parts), share

    @cached_property
    def word_translations(self) -> dict[str, list[frozenset[str]]]:
        """Each one-word source phrase -> the lower-cased words of each of its translations
        ("hund" -> [{"dog"}, {"the", "dog"}, ...]): what decoding/confidence.py's adequacy looks for."""
        table = {}
        for key, found in self.entries.items():
            words = [frozenset(w.lower() for w in PLAIN.findall(text)) for text, _ in found] if " " not in key else []
            if any(words):
                table[key] = [w for w in words if w]  # a translation of marks alone holds no word to look for
        return table

    # ---- a part of the run's lexicon.json

    def to_dict(self) -> dict:
        return {"short_sources": self.short_sources,
                "entries": {key: [list(entry) for entry in found] for key, found in sorted(self.entries.items())}}

    @classmethod
    def from_dict(cls, raw, where: str) -> Phrases:
        """Phrases from their saved dict, checked; errors name `where` and the phrase."""
        share = raw.get("short_sources") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or not isinstance(raw.get("entries"), dict) \
                or not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 <= share <= 1:
            raise DataError(f"{where}: phrases must hold short_sources (a share, 0 to 1) and entries (each source "
                            f"phrase's translations)")
        entries = {}
        for key, found in raw["entries"].items():
            if not (isinstance(key, str) and 1 <= len(key.split()) <= MAX_WORDS and key == key.lower()
                    and isinstance(found, list) and found
                    and all(isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and e[0].strip()
                            and isinstance(e[1], int) and not isinstance(e[1], bool) and e[1] > 0 for e in found)):
                raise DataError(f"{where}: phrases.entries[{str(key)[:40]!r}] must be a list of [translation, "
                                f"count > 0] for a lower-case phrase of 1 to {MAX_WORDS} words")
            entries[key] = [(text, count) for text, count in found]
        return cls(entries, float(share))

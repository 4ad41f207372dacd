"""Sentence boundaries in text typed without sentence marks, learned from a model's training data.

    stats = BoundaryStats.from_sentences(word_lists)     # counted at training, kept in lexicon.json
    stats.split(text)                                    # [(0, 37), (38, 66), (67, 91)] for
    # "ein mann fährt fahrrad auf der straße zwei hunde spielen im schnee eine frau liest ein buch"

The rules of sentences.py read marks and capitals; a paragraph typed with neither is one block
to them, and a model trained on one sentence per line drops most of it. What is left to read is
the words: the training sentences say how often each word (lower-cased) ends one, starts one
and follows another inside one, and how long they are. This is the hidden-event language model
of Stolcke & Shriberg (1996, "Automatic linguistic segmentation of conversational speech"): a
gap between words u and v (whitespace only: no comma, no mark) scores the log-likelihood ratio
of a sentence boundary there against none, by bigrams with sentence ends (Witten & Bell 1991
smoothing, backing off to the words' counts at other places than a sentence's first),

    gap(u, v) = log P(</s> | u) + log P(v | <s>) - log (1 - P(</s> | u)) - log P(v | u),

read two words deep when there are (P(</s> | t u) for the two words that end a sentence, and
+ log P(w | <s> v) - log P(w | v) for the two that begin one). The boundaries are the best
segmentation by dynamic programming: the chosen gaps' scores, each plus BOUNDARY_BIAS, and
LENGTH_WEIGHT x log P(length) of each sentence (the training lengths, in words), so that a
caption is not cut into pieces (a short stretch stays whole by that prior alone). Only a gap
whose score plus the bias is positive is considered, and a sentence looks back at most
MAX_WORDS candidates: the work is linear in the text's length.

Counts split text only when most training sentences end with a mark (else a text without one is
what the model was trained on) and their first and last words say something of a boundary
(`evidence`; a corpus of words in random order says nothing). They are kept with the model's
source lexicon (lexicon.py: lexicon.json's "boundaries"). The constants were chosen on Multi30k
val (benchmarks/quality/paragraphs_multi30k.py --boundaries; docs/results.md, "Unpunctuated
paragraphs").

Shapes: none (character offsets into a str).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Sequence

from attnmt.errors import DataError

Span = tuple[int, int]  # [start, end) character offsets into the text

WORD = re.compile(r"[^\W_]+")  # a word: letters and digits, lower-cased; the rest is between words
MARKED_END = re.compile(r"[.!?\u2026][\"'\u201c\u201d\u00bb)\]]*$")  # a sentence that ends with its mark
MAX_WORDS = 80          # the longest sentence the segmentation makes, in words (and candidates looked back)
LENGTH_WEIGHT = 1.0     # the length prior's weight against the gaps' scores
BOUNDARY_BIAS = 2.0     # added to every gap's score (val F1: 0 -> 90.7, 1 -> 93.6, 2 -> 94.5, 3 -> 94.6; docs/results.md)
MIN_EVIDENCE = 1.0      # nats a sentence's first and last words say of a boundary, at least (else no split)
MAX_PAIRS = 300_000     # word pairs kept per table (the rarest dropped first): lexicon.json's size on a large corpus


def _add(table: dict[str, dict[str, int]], key: str, word: str) -> None:
    row = table.setdefault(key, {})
    row[word] = row.get(word, 0) + 1


@dataclass
class BoundaryStats:
    """Counts of a training data's source sentences, by lower-cased word.

    Attributes:
        sentences: how many sentences (with a word) were counted.
        words: word -> how often it occurs.
        starts / ends: word -> how often it is a sentence's first / last word.
        pairs: word -> (next word -> how often it follows it inside a sentence).
        opening: first word -> (second word -> how many sentences begin with the two).
        closing: last word -> (the word before it -> how many sentences end with the two).
        lengths: lengths[k] = how many sentences have k words.
        marked: how many sentences end with a sentence mark (`splits`).
    """

    sentences: int
    words: dict[str, int]
    starts: dict[str, int]
    ends: dict[str, int]
    pairs: dict[str, dict[str, int]]
    opening: dict[str, dict[str, int]] = field(default_factory=dict)
    closing: dict[str, dict[str, int]] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)
    marked: int = 0

    @classmethod
    def from_sentences(cls, sentences: Iterable[Sequence[str] | str], *, max_pairs: int = MAX_PAIRS
                       ) -> BoundaryStats | None:
        """Count sentences given as texts or token lists (BoundaryCounter.add); None for none."""
        counter = BoundaryCounter()
        for sentence in sentences:
            counter.add(sentence)
        return counter.stats(max_pairs=max_pairs)

    # ---- the model

    @cached_property
    def _tokens(self) -> int:
        return sum(self.words.values())

    @cached_property
    def _follow(self) -> dict[str, tuple[int, int]]:
        """word -> (pairs it begins, distinct words after it): Witten-Bell's counts."""
        return {u: (sum(after.values()), len(after)) for u, after in self.pairs.items()}

    @cached_property
    def evidence(self) -> float:
        """What a sentence's first and last words say of a boundary, in nats: the Kullback-Leibler
        divergence of the first words' distribution from the words' elsewhere, plus that of the last
        words'. Words in any order (a toy corpus of random words) give about 0; Multi30k's captions
        about 4.7 (de) and 3.7 (en)."""
        elsewhere = self._tokens - self.sentences + 0.5 * len(self.words)

        def divergence(table: dict[str, int]) -> float:
            return sum(n / self.sentences * math.log(n / self.sentences * elsewhere
                                                     / (self.words.get(w, n) - n + 0.5)) for w, n in table.items())
        return divergence(self.starts) + divergence(self.ends)

    @property
    def splits(self) -> bool:
        """Whether these counts split text: most training sentences end with a mark (a text without
        one is then not what the model was trained on), and their ends say enough (`evidence`)."""
        return 2 * self.marked >= self.sentences and self.evidence >= MIN_EVIDENCE

    @property
    def longest(self) -> int:
        """The most words a training sentence had."""
        return len(self.lengths) - 1

    @cached_property
    def _opened(self) -> dict[str, tuple[int, int]]:
        """first word -> (sentences it begins with a second word, distinct second words)."""
        return {u: (sum(after.values()), len(after)) for u, after in self.opening.items()}

    @cached_property
    def _end_prior(self) -> float:
        return self.sentences / max(1, self._tokens)

    @cached_property
    def _length_scores(self) -> list[float]:
        """log P(k words) for k = 0..MAX_WORDS (add-half smoothed; 0 words: impossible)."""
        counts = (self.lengths + [0] * (MAX_WORDS + 1))[:MAX_WORDS + 1]
        total = sum(counts[1:]) + 0.5 * MAX_WORDS
        return [-math.inf] + [math.log((c + 0.5) / total) for c in counts[1:]]

    @cached_property
    def _rare_end(self) -> float:
        """How often a word seen once ends a sentence: the rate of a word never seen (Good-Turing's
        reading of the singletons)."""
        once = [w for w, n in self.words.items() if n == 1]
        return (sum(self.ends.get(w, 0) for w in once) + self._end_prior) / (len(once) + 1)

    def _unigram(self, word: str) -> float:
        return (self.words.get(word, 0) + 0.5) / (self._tokens + 0.5 * (len(self.words) + 1))

    def _inner_unigram(self, word: str) -> float:
        """P(word) at a place other than a sentence's first."""
        inner = self.words.get(word, 0) - self.starts.get(word, 0)
        return (inner + 0.5) / (self._tokens - self.sentences + 0.5 * (len(self.words) + 1))

    def _p_end(self, word: str) -> float:
        """P(</s> | word), its counts shrunk to the rare words' rate of sentence ends by 2 pseudo-counts."""
        return (self.ends.get(word, 0) + 2 * self._rare_end) / (self.words.get(word, 0) + 2)

    def _p_start(self, word: str) -> float:
        """P(word | <s>), Witten-Bell: the first words' counts, backed off to the words' counts."""
        distinct = max(1, len(self.starts))
        return (self.starts.get(word, 0) + distinct * self._unigram(word)) / (self.sentences + distinct)

    def _p_next(self, before: str, word: str) -> float:
        """P(word | before) inside a sentence, Witten-Bell."""
        count, distinct = self._follow.get(before, (0, 0))
        if count == 0:
            return self._inner_unigram(word)
        return (self.pairs[before].get(word, 0) + distinct * self._inner_unigram(word)) / (count + distinct)

    def _p_end_after(self, earlier: str | None, word: str) -> float:
        """P(</s> | earlier word), Witten-Bell over the sentences that end with the two, backed
        off to P(</s> | word)."""
        end = self._p_end(word)
        if earlier is None:
            return end
        closing = self.closing.get(word, {}).get(earlier, 0)
        seen = max(closing, self.pairs.get(earlier, {}).get(word, 0))  # the pair anywhere (a rare one may be dropped)
        return (closing + 2 * end) / (seen + 2)

    def _p_second(self, first: str, word: str) -> float:
        """P(word | <s> first), Witten-Bell over the sentences that begin with `first`, backed off to
        P(word | first)."""
        if first not in self.opening:
            return self._p_next(first, word)
        count, distinct = self._opened[first]
        return (self.opening[first].get(word, 0) + distinct * self._p_next(first, word)) / (count + distinct)

    def gap(self, before: str, after: str, earlier: str | None = None, later: str | None = None) -> float:
        """The log-likelihood ratio of a sentence boundary between two (lower-cased) words against
        none (the module docstring's gap(u, v)); with the word before `before` (`earlier`) and the
        one after `after` (`later`), the end of two words and the start of two are read."""
        end = self._p_end_after(earlier, before)
        score = (math.log(end) + math.log(self._p_start(after))
                 - math.log(1.0 - end) - math.log(self._p_next(before, after)))
        if later is not None:
            score += math.log(self._p_second(after, later)) - math.log(self._p_next(after, later))
        return score

    # ---- a text

    def split(self, text: str) -> list[Span]:
        """The sentences of `text`, a stretch without sentence marks, as [start, end) spans in order,
        stripped of whitespace (one when it reads as one sentence or the counts do not split:
        `splits`; none when it is blank). A sentence ends at a word's end and the next begins at a
        word's start, across whitespace only."""
        found = list(WORD.finditer(text))
        stripped = text.strip()
        if not stripped:
            return []
        lead = len(text) - len(text.lstrip())
        cuts = self.boundaries(text, found) if self.splits else []
        starts = [lead] + [found[i].start() for i in cuts]
        ends = [found[i - 1].end() for i in cuts] + [lead + len(stripped)]
        return list(zip(starts, ends))

    def boundaries(self, text: str, found: list[re.Match]) -> list[int]:
        """The indices i of the words that begin a sentence (after the first): the best
        segmentation of the module docstring over `found`, the words of `text`."""
        lower = [m.group(0).lower() for m in found]
        # candidates: (word index, gap score + bias), the whitespace-only gaps where that is positive
        candidates = [(0, 0.0)]
        for i in range(1, len(found)):
            if text[found[i - 1].end():found[i].start()].isspace():
                score = BOUNDARY_BIAS + self.gap(lower[i - 1], lower[i], lower[i - 2] if i >= 2 else None,
                                                 lower[i + 1] if i + 1 < len(lower) else None)
                if score > 0:
                    candidates.append((i, score))
        candidates.append((len(found), 0.0))
        return [candidates[k][0] for k in segment(candidates, self._length_scores, weight=LENGTH_WEIGHT)]

    # ---- a part of lexicon.json

    def to_dict(self) -> dict:
        return {"sentences": self.sentences, "words": dict(sorted(self.words.items())),
                "starts": dict(sorted(self.starts.items())), "ends": dict(sorted(self.ends.items())),
                "pairs": _sorted(self.pairs), "opening": _sorted(self.opening), "closing": _sorted(self.closing),
                "lengths": self.lengths, "marked": self.marked}

    @classmethod
    def from_dict(cls, raw, source: str) -> BoundaryStats:
        """Raises: DataError naming `source` (the file) and the key that is wrong."""
        def counts(value, key: str) -> dict[str, int]:
            if not isinstance(value, dict) or not all(
                    isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n > 0
                    for k, n in value.items()):
                raise DataError(f"{source}: boundaries.{key} must map words to counts > 0")
            return value

        if not isinstance(raw, dict):
            raise DataError(f"{source}: boundaries must be an object (sentences, words, starts, ends, pairs, opening, "
                            f"closing, lengths)")
        sentences, lengths = raw.get("sentences"), raw.get("lengths")
        if not isinstance(sentences, int) or isinstance(sentences, bool) or sentences < 1:
            raise DataError(f"{source}: boundaries.sentences must be a count > 0")
        marked = raw.get("marked")
        if not isinstance(marked, int) or isinstance(marked, bool) or not 0 <= marked <= sentences:
            raise DataError(f"{source}: boundaries.marked must be a count of at most boundaries.sentences")
        if not isinstance(lengths, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                     for n in lengths):
            raise DataError(f"{source}: boundaries.lengths must be a list of counts")
        tables = {}
        for key in ("pairs", "opening", "closing"):
            if not isinstance(raw.get(key), dict):
                raise DataError(f"{source}: boundaries.{key} must map words to their neighbours' counts")
            tables[key] = {u: counts(row, f"{key}[{u[:40]!r}]") for u, row in raw[key].items()}
        return cls(sentences, counts(raw.get("words"), "words"), counts(raw.get("starts"), "starts"),
                   counts(raw.get("ends"), "ends"), tables["pairs"], tables["opening"], tables["closing"], lengths,
                   marked)


def _sorted(table: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {u: dict(sorted(row.items())) for u, row in sorted(table.items())}


class BoundaryCounter:
    """BoundaryStats counted one sentence at a time (the lexicon counts its words in the same pass)."""

    def __init__(self):
        self.sentences = 0
        self.words: dict[str, int] = {}
        self.starts: dict[str, int] = {}
        self.ends: dict[str, int] = {}
        self.pairs: dict[str, dict[str, int]] = {}
        self.opening: dict[str, dict[str, int]] = {}
        self.closing: dict[str, dict[str, int]] = {}
        self.lengths: list[int] = []
        self.marked = 0

    def add(self, sentence: Sequence[str] | str) -> None:
        """Count one sentence, a text or a token list (tokens joined by spaces: Moses' or
        whitespace-split; <unk> is no word); one without a word is skipped."""
        text = sentence if isinstance(sentence, str) else " ".join(sentence)
        found = [m.group(0).lower() for m in WORD.finditer(text.replace("<unk>", " "))]
        if not found:
            return
        self.sentences += 1
        self.marked += bool(MARKED_END.search(text.rstrip()))
        self.starts[found[0]] = self.starts.get(found[0], 0) + 1
        self.ends[found[-1]] = self.ends.get(found[-1], 0) + 1
        for word in found:
            self.words[word] = self.words.get(word, 0) + 1
        for before, after in zip(found, found[1:]):
            _add(self.pairs, before, after)
        if len(found) >= 2:
            _add(self.opening, found[0], found[1])
            _add(self.closing, found[-1], found[-2])
        if len(found) >= len(self.lengths):
            self.lengths += [0] * (len(found) + 1 - len(self.lengths))
        self.lengths[len(found)] += 1

    def stats(self, *, max_pairs: int = MAX_PAIRS) -> BoundaryStats | None:
        """What was counted (None: no sentence); of more than `max_pairs` word pairs in a table
        (pairs, opening, closing), those seen least often are dropped, a count at a time."""
        if not self.sentences:
            return None
        return BoundaryStats(self.sentences, self.words, self.starts, self.ends, _pruned(self.pairs, max_pairs),
                             _pruned(self.opening, max_pairs), _pruned(self.closing, max_pairs), self.lengths,
                             self.marked)


def _pruned(table: dict[str, dict[str, int]], limit: int) -> dict[str, dict[str, int]]:
    """`table` without the pairs seen least often, dropped a count at a time until at most `limit` are left."""
    kept, least = sum(len(row) for row in table.values()), 1
    while kept > limit:
        kept -= sum(n == least for row in table.values() for n in row.values())
        least += 1
    if least == 1:
        return table
    return {u: kept_row for u, row in table.items() if (kept_row := {v: n for v, n in row.items() if n >= least})}


def segment(candidates: Sequence[tuple[int, float]], length_scores: Sequence[float], *, weight: float) -> list[int]:
    """The best segmentation of a stretch, by dynamic programming over its candidate boundaries.

    Args:
        candidates: (word index, gap score) in order; the first is (0, 0.0), the stretch's start,
            the last (words, 0.0), its end; the others are the boundaries that may be chosen.
        length_scores: log P(k words) for k = 0..len - 1; a longer sentence scores as the last.
        weight: the length scores' weight.

    Returns:
        the positions in `candidates` (not 0, not the last) chosen as sentence starts, in order.
    Each candidate looks back at most len(length_scores) - 1 candidates (and always at the one
    before it): at most that many steps per candidate.
    """
    longest = len(length_scores) - 1
    best = [0.0] + [-math.inf] * (len(candidates) - 1)
    back = [0] * len(candidates)
    for k in range(1, len(candidates)):
        position, score = candidates[k]
        for j in range(k - 1, max(-1, k - 1 - longest), -1):
            words = position - candidates[j][0]
            if words > longest and j < k - 1:
                break
            total = best[j] + weight * length_scores[min(words, longest)] + score
            if total > best[k]:
                best[k], back[k] = total, j
    chosen, k = [], back[-1]
    while k > 0:
        chosen.append(k)
        k = back[k]
    return chosen[::-1]

"""Short aligned pieces of training pairs, for a model that must answer "Hund" with "dog".

    fragments = Fragments.from_pairs(word_pairs)           # a sample of the training pairs, as words
    fragments.pieces(src_words, tgt_words)                 # every (source span, target span) it may cut
    fragments(index, src_ids, tgt_ids, rng)                # one piece of an example, as ids (Augmenter)
    fragments.phrases(word_pairs)                          # the pieces counted: a phrase table (data/phrases.py)

A model trained on captions answers one word with a caption ("dog dog dog ...": docs/results.md,
"What people type"); short pairs cut out of its own training data teach it that a short input
has a short translation, from parallel data alone. The cut follows a word alignment: a lexical
table from sentence co-occurrence (the Dice coefficient, as engines/vocab_map.py ranks its
shortlist; data/cooccurrence.py counts it) links a source word and a target word of a pair when
each is the other's best match there (the intersection of both directions, the precise half of
Och & Ney's symmetrization), they met in MIN_TOGETHER pairs or more, and the target word is one
of the source word's TOP best overall (so "und" is not linked to "the" in a pair that lacks "and").
A source word that leaves none of its targets over MIN_DICE, a rare form of a frequent
translation's ("blaues", "grüne": Dice 0.04-0.1 with "blue", "green"), may still link to its one
best target by the log-likelihood ratio when that is significant (MIN_LLR); without it 'blaues
Hemd' found no phrase. A piece is a span of 1 to MAX_WORDS source words whose linked target
words make a span that no source word outside it links into (a consistent phrase pair, Koehn et
al. 2003), at most 2 x + 1 target words long, without punctuation at either end.

Shapes: none (words and id arrays of one example).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Iterable, Sequence

import numpy as np

from attnmt.data.cooccurrence import count_cooccurrence
from attnmt.data.phrases import MAX_WORDS, Phrases, strip_ends  # MAX_WORDS: the longest source piece

MIN_DICE = 0.1       # a link needs at least this much co-occurrence,
MIN_TOGETHER = 2     # in at least this many pairs,
TOP = 3              # and the target word among the source word's TOP best by Dice over the whole sample
MIN_LLR = 10.83      # a word Dice links to nothing: its best target by G^2, if G^2 >= this (p < 0.001)
SAMPLE = 200_000     # pairs the lexical table is counted on (the first ones; Multi30k has 29,000)


def _rank(score: np.ndarray, src: np.ndarray) -> np.ndarray:
    """(pairs,) each pair's place among its source word's pairs by `score`, best first (0: the best)."""
    order = np.lexsort((-score, src))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order)) - np.searchsorted(src[order], src[order])  # minus the word's first row
    return rank


@dataclass
class Fragments:
    """The lexical table of a sample of pairs: word ids of each side and the Dice coefficient of each
    co-occurring (source word, target word), sorted by key for lookups.

    Attributes:
        src_ids, tgt_ids: word (lower-cased) -> id. keys: (pairs,) sorted src_id * tgt_size + tgt_id.
        dice: (pairs,) their Dice coefficients (0 where they may not be linked: too rare together, or not
            among the source word's TOP best).
        sides: (source TextSide, target TextSide): ids <-> text (data/augment.py), set by `for_pipeline`.
    """

    src_ids: dict[str, int]
    tgt_ids: dict[str, int]
    keys: np.ndarray
    dice: np.ndarray
    sides: tuple | None = None

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[Sequence[str], Sequence[str]]]) -> Fragments:
        """The table of `pairs` (each the source's and the target's words)."""
        src_ids: dict[str, int] = {}
        tgt_ids: dict[str, int] = {}
        encoded = []
        for src, tgt in pairs:
            encoded.append((np.array([src_ids.setdefault(w.lower(), len(src_ids)) for w in src], np.int64),
                            np.array([tgt_ids.setdefault(w.lower(), len(tgt_ids)) for w in tgt], np.int64)))
        counts = count_cooccurrence(encoded, max(len(src_ids), 1), max(len(tgt_ids), 1))
        dice, g2 = counts.dice(), counts.log_likelihood_ratio()
        keys = counts.src * max(len(tgt_ids), 1) + counts.tgt  # sorted: count_cooccurrence's keys are np.unique's
        often = counts.both >= MIN_TOGETHER
        usable = often & (_rank(dice, counts.src) < TOP) & (dice >= MIN_DICE)
        linked = np.zeros(max(len(src_ids), 1), bool)
        linked[counts.src[usable]] = True
        usable |= often & ~linked[counts.src] & (_rank(g2, counts.src) == 0) & (g2 >= MIN_LLR)
        return cls(src_ids, tgt_ids, keys, np.where(usable, dice, 0.0))

    @classmethod
    def for_pipeline(cls, examples: Iterable[tuple[np.ndarray, np.ndarray]], pipeline, *, limit: int = SAMPLE
                     ) -> Fragments:
        """The table of the first `limit` examples (id arrays of the prepared data), read as words
        through the pipeline's tokenizers."""
        from attnmt.data.augment import TextSide

        sides = (TextSide(pipeline, "src"), TextSide(pipeline, "tgt"))
        words = []
        for number, (src, tgt) in enumerate(examples):
            if number >= limit:
                break
            texts = sides[0].text(src), sides[1].text(tgt)
            if texts[0] is not None and texts[1] is not None:
                words.append((texts[0].split(), texts[1].split()))
        table = cls.from_pairs(words)
        table.sides = sides
        return table

    def scores(self, src: Sequence[str], tgt: Sequence[str]) -> np.ndarray:
        """(len(src), len(tgt)) the Dice coefficient of each word pair (0 for pairs never seen together)."""
        s = np.array([self.src_ids.get(w.lower(), -1) for w in src], np.int64)
        t = np.array([self.tgt_ids.get(w.lower(), -1) for w in tgt], np.int64)
        keys = s[:, None] * max(len(self.tgt_ids), 1) + t[None, :]  # (src, tgt)
        at = np.searchsorted(self.keys, keys).clip(max=max(len(self.keys) - 1, 0))
        found = (len(self.keys) > 0) & (self.keys[at] == keys) & (s[:, None] >= 0) & (t[None, :] >= 0)
        return np.where(found, self.dice[at] if len(self.dice) else 0.0, 0.0)

    def links(self, src: Sequence[str], tgt: Sequence[str]) -> list[tuple[int, int]]:
        """(source word, target word) pairs that are each other's best match (among the usable ones)."""
        if not src or not tgt:
            return []
        scores = self.scores(src, tgt)  # (src, tgt)
        best_tgt, best_src = scores.argmax(axis=1), scores.argmax(axis=0)
        return [(i, int(j)) for i, j in enumerate(best_tgt) if best_src[j] == i and scores[i, j] > 0]

    def pieces(self, src: Sequence[str], tgt: Sequence[str]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
        """Every consistent ((source start, end), (target start, end)) of 1 to MAX_WORDS source words
        that starts and ends on a linked word."""
        links = self.links(src, tgt)
        linked_src = {i for i, _ in links}
        found = []
        for a in range(len(src)):
            for b in range(a + 1, min(a + MAX_WORDS, len(src)) + 1):
                if a not in linked_src or b - 1 not in linked_src:
                    continue
                targets = [j for i, j in links if a <= i < b]
                c, d = min(targets), max(targets) + 1
                if d - c > 2 * (b - a) + 1 or any(c <= j < d and not a <= i < b for i, j in links):
                    continue
                found.append(((a, b), (c, d)))
        return found

    def phrases(self, pairs: Iterable[tuple[Sequence[str], Sequence[str]]]) -> Phrases:
        """The phrase table of `pairs` (each the source's and the target's words): their pieces counted."""
        return Phrases.from_pieces((src, tgt, self.pieces(src, tgt)) for src, tgt in pairs)

    def phrases_of(self, examples: Iterable[tuple[np.ndarray, np.ndarray]], *, limit: int = SAMPLE) -> Phrases:
        """The phrase table of the first `limit` examples (id arrays of the prepared data), read as
        words through this table's sides (`for_pipeline`)."""
        source, target = self.sides
        texts = ((source.text(src), target.text(tgt)) for src, tgt in islice(examples, limit))
        return self.phrases((s.split(), t.split()) for s, t in texts if s is not None and t is not None)

    def __call__(self, index: int, src_ids: np.ndarray, tgt_ids: np.ndarray, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray] | None:
        """One piece of an example, chosen by `rng`, as ids; None when it has none."""
        source, target = self.sides
        src_text, tgt_text = source.text(src_ids), target.text(tgt_ids)
        if src_text is None or tgt_text is None:
            return None
        src, tgt = src_text.split(), tgt_text.split()
        found = self.pieces(src, tgt)
        if not found:
            return None
        (a, b), (c, d) = found[int(rng.integers(len(found)))]
        src_piece, tgt_piece = strip_ends(src[a:b]), strip_ends(tgt[c:d])
        if not src_piece or not tgt_piece:
            return None
        return source.ids(" ".join(src_piece), src_ids.dtype), target.ids(" ".join(tgt_piece), tgt_ids.dtype)

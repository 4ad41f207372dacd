"""Noise at training time: the ways people type, applied on the fly to each epoch's pairs.

    augmenter = Augmenter(cfg.data.augment, pipeline, seed=cfg.train.seed, max_len=cfg.data.max_len)
    src_ids, tgt_ids = augmenter(index, epoch, src_ids, tgt_ids)    # one example of one epoch

A model trained on clean sentence-case captions has never seen lower case, capitals, a typo or a
message without its full stop, and every user's text has them (docs/results.md, "What people
type"). As in OpusTrainer (mozilla/translations, docs/training/opus-trainer.md), each modifier is a
small function of a text with a probability, applied to the batch being built, never cached:

    lowercase, uppercase, titlecase   both sides alike (one at most per example)
    typos                             the source: one word gets two letters swapped, one dropped or doubled
    no_final_punct                    the source: its final . ! ? dropped (the target keeps its own)
    diacritics                        the source typed without them (fährt -> fahrt, or faehrt; ß -> ss)
    fragments                         a short aligned piece of the pair instead (fragments.py)

The draws of an example come from (seed, epoch, example) alone, so an epoch's noise is the same
on any number of ranks and after a resume. A text is edited in its own form: sentencepiece
pieces are decoded to text and encoded again; Moses tokens are edited as the words they are (a
word the vocabulary lacks becomes <unk>, as a typed one would). A modified example that would be
longer than data.max_len or than twice its length (+2: its batch was planned on its prepared
length, and would be padded to it), or empty, stays as it was.

Shapes: none (one example's id arrays, (src_len,) and (tgt_len,)).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Sequence

import numpy as np

from attnmt.config import CASE_MODIFIERS, AugmentConfig
from attnmt.data.pipeline import TextPipeline
from attnmt.data.tokenizers import SentencePieceTokenizer

__all__ = ["Augmenter", "TextSide", "lowercase", "uppercase", "titlecase", "typo", "no_final_punct", "no_diacritics",
           "AUGMENT_STREAM"]

AUGMENT_STREAM = 0xA06  # the random stream of the noise, apart from the epoch's order (epochs.epoch_rng)
_WORD = re.compile(r"[^\W\d_]{3,}")  # a word a typo can hit: three letters or more
_FINAL = re.compile(r"\s*[.!?\u2026]+(?=[\"'\u201c\u201d\u00bb)\]]*\s*$)")  # the marks; closing quotes stay
_TRANSLITERATION = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue", "ß": "ss"})


# ----------------------------------------------------------------------------- the modifiers

def lowercase(text: str) -> str:
    return text.lower()


def uppercase(text: str) -> str:
    return text.upper()


def titlecase(text: str) -> str:
    """Each word's first letter upper case, its others lower: a headline's "Ein Mann Fährt Rad"."""
    return re.sub(r"\w+", lambda m: m.group(0)[:1].upper() + m.group(0)[1:].lower(), text)


def typo(text: str, rng: np.random.Generator) -> str:
    """One typo in one word of three letters or more: two adjacent letters swapped, one letter
    dropped, or one doubled (the slips of a finger); a text without such a word stays as it is."""
    words = list(_WORD.finditer(text))
    if not words:
        return text
    word = words[int(rng.integers(len(words)))]
    letters, start = word.group(0), word.start()
    kind = int(rng.integers(3))
    i = int(rng.integers(len(letters) - 1))  # a position with a letter after it
    if kind == 0:
        changed = letters[:i] + letters[i + 1] + letters[i] + letters[i + 2:]
        if changed == letters:  # "ll": swapping changes nothing; drop one instead
            changed = letters[:i] + letters[i + 1:]
    elif kind == 1:
        changed = letters[:i] + letters[i + 1:]
    else:
        changed = letters[:i + 1] + letters[i] + letters[i + 1:]
    return text[:start] + changed + text[word.end():]


def no_final_punct(text: str) -> str:
    """The text without its final sentence marks (a closing quote after them stays): "Ein Hund läuft." ->
    "Ein Hund läuft", 'Er sagt "ja!"' -> 'Er sagt "ja"'."""
    return _FINAL.sub("", text)


def no_diacritics(text: str, rng: np.random.Generator) -> str:
    """The text as typed on a keyboard without its letters: accents dropped ("fahrt"), or German's
    umlauts written out ("faehrt"), ß as ss either way."""
    if rng.random() < 0.5:
        return unicodedata.normalize("NFC", text.translate(_TRANSLITERATION))
    stripped = "".join(c for c in unicodedata.normalize("NFD", text.replace("ß", "ss"))
                       if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", stripped)


_CASES: dict[str, Callable[[str], str]] = {"lowercase": lowercase, "uppercase": uppercase, "titlecase": titlecase}


# ----------------------------------------------------------------------------- ids <-> text

class TextSide:
    """One side's ids as the text a modifier edits, and back: sentencepiece pieces are decoded and
    encoded again; Moses tokens are words joined by spaces (they hold none themselves)."""

    def __init__(self, pipeline: TextPipeline, side: str):
        self.tokenizer = pipeline.src_tokenizer if side == "src" else pipeline.tgt_tokenizer
        self.vocab = pipeline.src_vocab if side == "src" else pipeline.tgt_vocab
        self.subword = isinstance(self.tokenizer, SentencePieceTokenizer)

    def text(self, ids: np.ndarray) -> str | None:
        """The text of `ids`; None when it holds an <unk> (its word is not known: left as it is)."""
        if self.subword and (ids == self.vocab.unk_id).any():
            return None
        tokens = self.vocab.decode(ids.tolist(), strip_special=False)
        return self.tokenizer.detokenize(tokens) if self.subword else " ".join(tokens)

    def ids(self, text: str, dtype) -> np.ndarray:
        tokens = self.tokenizer.tokenize(text) if self.subword else text.split()
        return np.asarray(self.vocab.encode(tokens), dtype=dtype)


# ----------------------------------------------------------------------------- the augmenter

class Augmenter:
    """The noise of one run: `settings` (data.augment), its pipeline, its seed; `max_len`: the
    longest side a modified example may have (data.max_len).

    Args of a call: the example's index in the prepared data, the epoch, and its source and target
    ids (without language tokens or a Marian eos); returns the ids to train on.
    """

    def __init__(self, settings: AugmentConfig, pipeline: TextPipeline, *, seed: int, max_len: int,
                 fragments: Callable | None = None):
        self.settings = settings
        self.seed = seed
        self.max_len = max_len
        self.src, self.tgt = TextSide(pipeline, "src"), TextSide(pipeline, "tgt")
        self.cases = [(name, getattr(settings, name)) for name in CASE_MODIFIERS if getattr(settings, name) > 0]
        self.fragments = fragments if settings.fragments > 0 else None

    @property
    def active(self) -> bool:
        s = self.settings
        return bool(self.cases) or any(p > 0 for p in (s.typos, s.no_final_punct, s.diacritics, s.fragments))

    def rng(self, index: int, epoch: int) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64([self.seed, epoch, index, AUGMENT_STREAM]))

    def __call__(self, index: int, epoch: int, src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.settings
        rng = self.rng(index, epoch)
        draws = rng.random(6)  # case, typo, final mark, diacritics, fragment; one more for the case's choice
        if self.fragments is not None and draws[4] < s.fragments:
            piece = self.fragments(index, src, tgt, rng)
            if piece is not None:
                src, tgt = piece
        case = self._case(draws[0])
        edits = [name for name, p, draw in (("typos", s.typos, draws[1]), ("no_final_punct", s.no_final_punct, draws[2]),
                                            ("diacritics", s.diacritics, draws[3])) if draw < p]
        if case is None and not edits:
            return src, tgt
        src_text = self.src.text(src)
        tgt_text = self.tgt.text(tgt) if case is not None else None
        if src_text is None or (case is not None and tgt_text is None):
            return src, tgt
        if case is not None:
            src_text, tgt_text = _CASES[case](src_text), _CASES[case](tgt_text)
        for name in edits:
            if name == "typos":
                src_text = typo(src_text, rng)
            elif name == "no_final_punct":
                src_text = no_final_punct(src_text)
            else:
                src_text = no_diacritics(src_text, rng)
        new_src = self.src.ids(src_text, src.dtype)
        new_tgt = self.tgt.ids(tgt_text, tgt.dtype) if tgt_text is not None else tgt
        return (new_src, new_tgt) if self._fits(src, tgt, new_src, new_tgt) else (src, tgt)

    def _fits(self, src: np.ndarray, tgt: np.ndarray, new_src: np.ndarray, new_tgt: np.ndarray) -> bool:
        """Whether a modified example may replace its original: not empty, within max_len, and at
        most twice its length + 2 (the batch was planned on its lengths: a far longer example would
        pad the whole batch to it)."""
        if not len(new_src) or not len(new_tgt) or max(len(new_src), len(new_tgt)) > self.max_len:
            return False
        return len(new_src) <= 2 * len(src) + 2 and len(new_tgt) <= 2 * len(tgt) + 2

    def case_shares(self, examples: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
        """Of each case modifier with a rate above 0, the share of `examples` (source and target ids)
        it changes that `_fits` lets it replace (1.0: none changed). A vocabulary learned on sentence
        case cuts capitals into pieces of a letter or two, so that most examples in capitals are more
        than twice as long and stay as they were: such a rate applies to few of the examples it draws."""
        texts = [(src, tgt, self.src.text(src), self.tgt.text(tgt)) for src, tgt in examples]
        texts = [example for example in texts if example[2] is not None and example[3] is not None]
        found = {}
        for name, _ in self.cases:
            changed = kept = 0
            for src, tgt, src_text, tgt_text in texts:
                new_src, new_tgt = _CASES[name](src_text), _CASES[name](tgt_text)
                if (new_src, new_tgt) == (src_text, tgt_text):
                    continue
                changed += 1
                kept += self._fits(src, tgt, self.src.ids(new_src, src.dtype), self.tgt.ids(new_tgt, tgt.dtype))
            found[name] = kept / changed if changed else 1.0
        return found

    def _case(self, draw: float) -> str | None:
        """The case modifier of a draw in [0, 1): each one's probability is its share of [0, 1)."""
        edge = 0.0
        for name, p in self.cases:
            edge += p
            if draw < edge:
                return name
        return None

"""What engines return: translations, n-best alternatives and scores, the same whatever the
engine, and the `Engine` protocol that every engine follows (engines/native.py, the reference,
and engines/ctranslate2.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from attnmt.config import SearchConfig
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding.coverage import SentenceCoverage
from attnmt.decoding.options import DecodingOptions


@dataclass
class Alternative:
    """One entry of an n-best list."""

    text: str                      # detokenized translation
    tokens: list[str]              # output tokens, without <eos>
    score: float                   # model score (length-normalized for beams)
    attention: "object" = field(default=None, repr=False)  # numpy (len(tokens), src_len), None if unknown
    replaced: list[int] = field(default_factory=list)  # positions in tokens whose <unk> was replaced
    alignment: list[tuple[int, int]] | None = None  # (source word, output word) links, when asked
    token_log_probs: list[float] | None = None  # TOKEN_LOG_PROBS_DOC


# What token_log_probs holds, in Alternative and TranslationResult:
TOKEN_LOG_PROBS_DOC = ("each output token's log-probability, then <eos>'s when the search produced it (not when "
                       "the output budget cut it); forced prefix tokens count 0; they sum to the hypothesis' "
                       "log-probability. None: the engine does not give them (CTranslate2)")


@dataclass
class TranslationResult:
    text: str                      # detokenized translation
    tokens: list[str]              # output tokens (words or subwords), without <eos>
    source_tokens: list[str]       # the tokenized (and possibly cut) input
    attention: "object" = field(repr=False)  # numpy array (len(tokens), len(source_tokens))
    score: float = 0.0             # model score of the hypothesis (length-normalized for beams)
    alternatives: list[Alternative] = field(default_factory=list)  # n-best, best first (incl. this one)
    warnings: list[str] = field(default_factory=list)  # e.g. the input was cut
    replaced: list[int] = field(default_factory=list)  # positions in tokens whose <unk> became a source word
    alignment: list[tuple[int, int]] | None = None  # (source word, output word) links, when asked
    token_log_probs: list[float] | None = None  # TOKEN_LOG_PROBS_DOC
    # how much of the source the translation covered (decoding/coverage.py), filled by Translator:
    sentences: list[SentenceCoverage] = field(default_factory=list)  # per sentence (one unless split)
    coverage: float | None = None  # the lowest of the sentences' coverage (None: no attention)
    flagged: bool = False          # a sentence has an uncovered source word or a too short output
    uncovered: list[int] = field(default_factory=list)  # source words (word indices) that got too little attention

    def summarize_coverage(self) -> None:
        """coverage, flagged and uncovered from `sentences`."""
        figures = [s.coverage for s in self.sentences if s.coverage is not None]
        self.coverage = min(figures) if figures else None
        self.flagged = any(s.flagged for s in self.sentences)
        self.uncovered = sorted({j for s in self.sentences for j in s.uncovered})


@dataclass
class ScoreResult:
    """The model's score of one given translation (forced decoding)."""

    source_tokens: list[str]       # the tokenized (and possibly cut) source
    target_tokens: list[str]       # the tokenized (and possibly cut) translation, without <eos>
    log_prob: float                # sum of the token log-probabilities, <eos> included
    num_tokens: int                # tokens scored: len(target_tokens) + 1 for <eos>
    warnings: list[str] = field(default_factory=list)
    token_log_probs: list[float] = field(default_factory=list)  # one per scored token, <eos> last
    attention: "object" = field(default=None, repr=False)  # numpy (num_tokens, len(source_tokens)); None: CTranslate2

    @property
    def normalized(self) -> float:
        """log_prob per scored token."""
        return self.log_prob / self.num_tokens


def empty_result(source_tokens: list[str], warnings: list[str]) -> TranslationResult:
    import numpy as np

    attention = np.zeros((0, len(source_tokens)), dtype=np.float32)
    alternative = Alternative("", [], 0.0, attention, token_log_probs=[])
    return TranslationResult("", [], source_tokens, attention, 0.0, [alternative], warnings, token_log_probs=[])


class Engine(Protocol):
    """What `Translator` asks of an engine: translate and score raw text (both in input order).

    Both engines take the same DecodingOptions (decoding/options.py) with the same meaning; what
    the options leave unset (None) is the engine's search config (DecodingOptions.with_defaults).
    Beside them travel per-sentence data: `target_prefix` (one text or None per sentence: the
    translation starts with it) and, for the native engine, `constraints` (per sentence, target
    phrases that must appear exactly once: applicable_constraints' output; `Translator` refuses
    them for other engines), and `target_lang`, the language token of a multilingual model.
    """

    name: str
    pipeline: TextPipeline
    search_cfg: SearchConfig

    def translate(self, sentences: Sequence[str], options: DecodingOptions, *,
                  target_prefix: Sequence[str | None] | None = None, constraints: Sequence | None = None,
                  target_lang: str | None = None) -> list[TranslationResult]: ...

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64) -> list[ScoreResult]: ...

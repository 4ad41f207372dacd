"""What engines return: translations, n-best alternatives and scores, the same whatever the
engine, and the `Engine` protocol that every engine follows (engines/native.py, the reference,
and engines/ctranslate2.py).

A result's `attention` is a (len(tokens), len(source_tokens)) numpy array for one sentence, and
a `BlockAttention` for a paragraph translated sentence by sentence (decoding/paragraphs.py): each
sentence's output attends only to its own source, so only the sentences' blocks are kept, and
the memory stays linear in the sentences (a dense matrix of N sentences is N^2 blocks of zeros:
issue 66 group A). `np.asarray(attention)` gives the dense matrix of either, for small ones.

Shapes: attention (tgt_len, src_len); a BlockAttention's blocks (rows_k, cols_k) at (row_k, col_k).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from attnmt.config import SearchConfig
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding.coverage import SentenceCoverage
from attnmt.decoding.options import DecodingOptions


class BlockAttention:
    """A block-diagonal attention matrix kept as its blocks: one per sentence of a paragraph.

        attention = BlockAttention.join([a1, a2], rows=[5, 2], cols=[4, 3])  # a1 (5, 4), a2 (2, 3)
        attention.shape            # (7, 7), the dense matrix's
        attention.blocks           # ((0, 0, a1), (5, 4, a2)): each block's first row and column
        np.asarray(attention)      # the dense (7, 7) matrix, zeros off the blocks
        attention.row(5)           # output token 5's weights over all 7 source tokens

    A block may be None (its sentence has no attention, e.g. CTranslate2 scoring): zeros.
    `cells` counts the numbers the blocks hold (what a JSON answer of them costs).
    """

    __slots__ = ("blocks", "shape")

    def __init__(self, blocks, shape: tuple[int, int]):
        self.blocks = tuple(blocks)  # ((first row, first column, (rows, cols) float32 array or None), ...)
        self.shape = (int(shape[0]), int(shape[1]))

    ndim = 2

    @classmethod
    def join(cls, parts: Sequence, rows: Sequence[int], cols: Sequence[int]) -> BlockAttention:
        """The block-diagonal matrix of `parts` (each a (rows[k], cols[k]) array, a BlockAttention
        of that shape, or None), in order down the diagonal; nested ones are flattened."""
        import numpy as np

        blocks, r, c = [], 0, 0
        for part, n_rows, n_cols in zip(parts, rows, cols):
            if isinstance(part, BlockAttention):
                blocks += [(r + r0, c + c0, block) for r0, c0, block in part.blocks]
            elif part is not None and n_rows and n_cols:
                blocks.append((r, c, np.asarray(part, dtype=np.float32).reshape(n_rows, n_cols)))
            r, c = r + n_rows, c + n_cols
        return cls(blocks, (r, c))

    @property
    def cells(self) -> int:
        """The numbers the blocks hold."""
        return sum(block.size for _, _, block in self.blocks if block is not None)

    def toarray(self):
        """The dense (rows, cols) float32 matrix: zeros off the blocks (rows x cols numbers)."""
        import numpy as np

        out = np.zeros(self.shape, dtype=np.float32)  # (tgt_len, src_len)
        for r, c, block in self.blocks:
            if block is not None:
                out[r:r + block.shape[0], c:c + block.shape[1]] = block
        return out

    def __array__(self, dtype=None, copy=None):
        dense = self.toarray()
        return dense if dtype is None else dense.astype(dtype)

    def row(self, index: int):
        """Output token `index`'s weights over every source token: (src_len,) float32."""
        import numpy as np

        out = np.zeros(self.shape[1], dtype=np.float32)  # (src_len,)
        for r, c, block in self.blocks:
            if block is not None and r <= index < r + block.shape[0]:
                out[c:c + block.shape[1]] = block[index - r]
        return out

    def __repr__(self) -> str:
        return f"BlockAttention(shape={self.shape}, blocks={len(self.blocks)})"


@dataclass
class Alternative:
    """One entry of an n-best list."""

    text: str                      # detokenized translation
    tokens: list[str]              # output tokens, without <eos>
    score: float                   # model score (length-normalized for beams)
    attention: "object" = field(default=None, repr=False)  # numpy (len(tokens), src_len) or BlockAttention; None: unknown
    replaced: list[int] = field(default_factory=list)  # positions in tokens whose <unk> was replaced
    alignment: list[tuple[int, int]] | None = None  # (source word, output word) links, when asked
    token_log_probs: list[float] | None = None  # TOKEN_LOG_PROBS_DOC
    log_prob: float | None = None  # its log-probability, <eos> included (None: the engine did not say)
    confidence: float | None = None  # how likely it is good, as TranslationResult.confidence (filled by Translator)


# What token_log_probs holds, in Alternative and TranslationResult:
TOKEN_LOG_PROBS_DOC = ("each output token's log-probability, then <eos>'s when the search produced it (not when "
                       "the output budget cut it); forced prefix tokens count 0; they sum to the hypothesis' "
                       "log-probability. None: the engine does not give them (CTranslate2)")


@dataclass
class TranslationResult:
    text: str                      # detokenized translation
    tokens: list[str]              # output tokens (words or subwords), without <eos>
    source_tokens: list[str]       # the tokenized (and possibly cut) input
    attention: "object" = field(repr=False)  # numpy (len(tokens), len(source_tokens)); a paragraph's: BlockAttention
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
    log_prob: float | None = None  # the hypothesis' log-probability, <eos> included (None: empty output)
    beam_scores: list[float] = field(default_factory=list)  # every hypothesis the search kept, best first
    beam_tokens: list[list[str]] = field(default_factory=list, repr=False)  # their tokens, in that order
    confidence: float | None = None  # how likely the translation is good, in [0, 1] (decoding/confidence.py)
    confidence_calibrated: bool = False  # fitted on held-out data (attnmt calibrate); else the mean token probability
    withheld: bool = False         # below options.min_confidence: `text` is the source (or empty), `tokens` the model's
    at_length_bound: bool = False  # the model did not end it: cut at its length bound (LENGTH_BOUND_NOTE says so
                                   # where warnings are shown: the service's answers, translate --report)
    read_as: str | None = None     # the text the model read, when the typed one was mended (case, slips:
                                   # data/lexicon.py); `source_tokens` are its tokens, spans are the typed text's
    from_phrases: bool = False     # a short input translated by the training data's phrase table (data/phrases.py,
                                   # search.short_phrases), the model's scores and attention those of its forced decoding

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

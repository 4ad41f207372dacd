"""How much of its source a translation covered: from the attention and the length ratio.

Tu et al. 2016 ("Modeling Coverage for Neural Machine Translation", eq. 5) keep a coverage vector
C_j = sum_i alpha_ij: the attention source word j received over the whole output. A word the
decoder never looked at was most likely left untranslated, and an output far shorter than its
input has most likely dropped something. Here, after decoding:

    received_j = sum_i attention[i, j]      over the output tokens i, a word's pieces summed
    coverage   = mean_j min(1, received_j)  in [0, 1]; 1 when every word got at least one
                                            output token's worth of attention
    uncovered  = { j : received_j < WORD_ATTENTION_MIN }    (words, not punctuation)
    length_ratio = len(tokens) / source tokens
    flagged    = uncovered is not empty, coverage < COVERAGE_MIN, or length_ratio < LENGTH_RATIO_MIN

A text translated whole (not split) that holds several sentences gets these per source sentence
(`measure_parts`: the sentences found by data.sentences.split_sentences, all sharing the one
output's attention and length ratio), so a sentence the model dropped shows as a sentence with
little attention, and `attnmt translate --report` names it.

The attention is the one the result carries: for the native engine by default the mean over the
Transformer's decoder layers and heads (or the RNN's one attention), for CTranslate2 the exported
layer averaged over its heads. The two thresholds were chosen on Multi30k val (docs/results.md,
"Coverage"): at most 5% of ordinary sentences flagged, while paragraphs that lost a sentence are.

Shapes: attention (tgt_len, src_len) numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from attnmt.decoding.alignment import token_texts, token_words

WORD_ATTENTION_MIN = 0.02  # a source word that received less than this over the output is "uncovered" (val)
LENGTH_RATIO_MIN = 0.5  # output tokens per source token below this: the output is "too short"
COVERAGE_MIN = 0.5  # a sentence whose coverage is below this is flagged


@dataclass
class SentenceCoverage:
    """One sentence's coverage, within its paragraph (split_sentences) or the whole text."""

    source: tuple[int, int]        # the sentence's [start, end) characters in the input text
    target: tuple[int, int]        # its translation's [start, end) characters in the result's text
    coverage: float | None         # mean over source words of min(1, attention received); None: no attention
    length_ratio: float            # output tokens / source tokens
    uncovered: list[int] = field(default_factory=list)  # source words (result's word indices) under the minimum
    flagged: bool = False          # a word uncovered, the coverage low or the output too short
    least: float | None = None     # the least attention a source word (not punctuation) received


def _is_word(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def measure_coverage(attention, source_tokens: Sequence[str], tokens: Sequence[str], *, subword: bool,
                     source: tuple[int, int], target: tuple[int, int]) -> SentenceCoverage:
    """The coverage of one translation (its attention over its own source words).

    Args:
        attention: (len(tokens), len(source_tokens)) array, or None (then only the length counts).
        source_tokens: the source's tokens without a Marian </s>.
        source, target: the character spans to report.
    """
    return measure_parts(attention, source_tokens, tokens, subword=subword,
                         parts=[(source, 0, len(source_tokens))], target=target)[0]


def measure_parts(attention, source_tokens: Sequence[str], tokens: Sequence[str], *, subword: bool,
                  parts: Sequence[tuple[tuple[int, int], int, int]], target: tuple[int, int]) -> list[SentenceCoverage]:
    """The coverage of each part of one translation's source: the sentences of a text translated
    whole. A part is (its character span, its first token, its end token); its coverage and
    uncovered words count its own words, its length ratio is the whole translation's (an output
    cannot be cut by source sentence). A sentence the output left out receives little attention.

    Args:
        attention: (len(tokens), len(source_tokens)) array, or None (then only the length counts).
        source_tokens: the source's tokens without a Marian </s>.
    """
    import numpy as np

    ratio = len(tokens) / len(source_tokens) if source_tokens else 1.0
    too_short = ratio < LENGTH_RATIO_MIN
    if not source_tokens:
        return [SentenceCoverage(span, target, 1.0, ratio) for span, _, _ in parts]
    if attention is None:
        return [SentenceCoverage(span, target, None, ratio, [], too_short) for span, _, _ in parts]
    words = np.asarray(token_words(source_tokens, subword))  # (src_len,)
    weights = (np.asarray(attention, dtype=np.float64).reshape(len(tokens), -1)[:, :len(source_tokens)] if tokens
               else np.zeros((0, len(source_tokens))))  # (tgt_len, src_len); an empty output attends to nothing
    received = np.zeros(words[-1] + 1)  # (src_words,)
    np.add.at(received, words, weights.sum(axis=0))
    texts = token_texts(source_tokens, subword)  # (src_words,)
    found = []
    for span, first, end in parts:
        own = sorted(set(words[first:end].tolist()))
        if not own:
            found.append(SentenceCoverage(span, target, 1.0, ratio, [], too_short))
            continue
        coverage = float(np.minimum(received[own], 1.0).mean())
        counted = [float(received[j]) for j in own if _is_word(texts[j])]
        uncovered = [j for j in own if received[j] < WORD_ATTENTION_MIN and _is_word(texts[j])]
        found.append(SentenceCoverage(span, target, coverage, ratio, uncovered,
                                      bool(uncovered) or too_short or coverage < COVERAGE_MIN,
                                      min(counted) if counted else None))
    return found

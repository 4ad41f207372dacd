"""A paragraph translated sentence by sentence, put back together as one TranslationResult.

    spans = split_sentences(text, "de")                     # data/sentences.py
    results = engine.translate([text[a:b] for a, b in spans], ...)
    paragraph = join_sentences(text, spans, results, subword=False)

    units = paragraph_units(texts, spans_per_text, prefixes, constraints)   # several texts' sentences
    paragraphs = join_paragraphs(texts, spans_per_text, results, subword=False)

The paragraph's text is its sentences' translations in order, with the source's own whitespace
between them and around them (line breaks, blank lines, indentation). Its tokens and
source_tokens are the sentences' concatenated; its attention is block-diagonal (each sentence's
output attends only to its own source), kept as the blocks (results.BlockAttention: memory linear
in the sentences, where a dense matrix grows with their square); alignment links, `replaced` positions and each
sentence's coverage (decoding/coverage.py) are shifted into the paragraph's word and token
indices, so that everything downstream (markup.py's tag placement, the page's grid) reads a
paragraph like one long sentence. Alternative k is each sentence's k-th (or its last) joined.
score is the sentences' scores weighted by their tokens (<eos> counted); token_log_probs are the
sentences' in order, each sentence's <eos> after its tokens, so they sum to the paragraph's
log-probability.

Translator.translate and the service (server/service.py, which counts the sentences of a request
before any work and sends them to its micro-batcher) both go through paragraph_units and
join_paragraphs: a prefix goes to a text's first sentence, of its constraints the (source, target)
pairs to every sentence, bare target phrases to the first.

Shapes: attention (tgt_len, src_len) numpy; paragraph (sum tgt_len, sum src_len), a BlockAttention.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from attnmt.decoding.alignment import token_words
from attnmt.decoding.coverage import SentenceCoverage
from attnmt.decoding.results import Alternative, BlockAttention, TranslationResult, empty_result


@dataclass(frozen=True)
class Units:
    """Several texts' sentences, in order, as the engine translates them: each sentence's text, and
    its target prefix and constraints (None: the texts had none)."""

    texts: list[str]
    prefixes: list[str | None] | None
    constraints: list[list] | None


def paragraph_units(texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]],
                    prefixes: Sequence[str | None] | None = None,
                    constraints: Sequence[Sequence] | None = None) -> Units:
    """The sentences of `texts` (`spans[i]`: text i's, from data.sentences.split_sentences), with
    text i's prefix on its first sentence and its constraints: (source, target) pairs on every
    sentence, bare target phrases on the first (`prefixes` / `constraints`: one entry per text)."""
    units, unit_prefixes, unit_constraints = [], [], []
    for i, (text, found) in enumerate(zip(texts, spans)):
        items = list(constraints[i] or []) if constraints is not None else []
        for k, (start, end) in enumerate(found):
            units.append(text[start:end])
            unit_prefixes.append(prefixes[i] if prefixes is not None and k == 0 else None)
            unit_constraints.append(items if k == 0 else [item for item in items if not isinstance(item, str)])
    return Units(units, unit_prefixes if prefixes is not None else None,
                 unit_constraints if constraints is not None else None)


def join_paragraphs(texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]],
                    results: Sequence[TranslationResult], *, subword: bool) -> list[TranslationResult]:
    """Each text's result from its sentences' (`results`: paragraph_units' order)."""
    joined, start = [], 0
    for text, found in zip(texts, spans):
        joined.append(join_sentences(text, found, results[start:start + len(found)], subword=subword))
        start += len(found)
    return joined


def _word_maps(token_lists: Sequence[Sequence[str]], subword: bool) -> list[dict[int, int]]:
    """Per part, its own word index -> the word index in the concatenated tokens."""
    joined = [t for tokens in token_lists for t in tokens]
    global_words = token_words(joined, subword)
    maps, start = [], 0
    for tokens in token_lists:
        mapping: dict[int, int] = {}
        for local, index in zip(token_words(tokens, subword), range(start, start + len(tokens))):
            mapping.setdefault(local, global_words[index])
        maps.append(mapping)
        start += len(tokens)
    return maps


def _join_texts(text: str, spans: Sequence[tuple[int, int]], parts: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The parts in the spans' places, the text's whitespace around them; and where each part landed."""
    out, where, position = [], [], 0
    length = 0
    for (start, end), part in zip(spans, parts):
        out.append(text[position:start])
        length += start - position
        where.append((length, length + len(part)))
        out.append(part)
        length += len(part)
        position = end
    out.append(text[position:])
    return "".join(out), where


def _join_hypotheses(text: str, spans, hyps: Sequence, source_tokens: Sequence[Sequence[str]],
                     src_maps, *, subword: bool) -> dict:
    """The fields an Alternative and a TranslationResult share, joined over one hypothesis per sentence."""
    token_lists = [h.tokens for h in hyps]
    tgt_maps = _word_maps(token_lists, subword)
    joined_text, where = _join_texts(text, spans, [h.text for h in hyps])
    tokens = [t for h in hyps for t in h.tokens]
    attention = None
    if all(h.attention is not None for h in hyps):
        attention = BlockAttention.join([h.attention for h in hyps], [len(h.tokens) for h in hyps],
                                        [len(s) for s in source_tokens])
    replaced, offset = [], 0
    for h in hyps:
        replaced += [offset + i for i in h.replaced]
        offset += len(h.tokens)
    alignment = None
    if all(h.alignment is not None for h in hyps):
        alignment = [(src_map[s], tgt_map[t]) for h, src_map, tgt_map in zip(hyps, src_maps, tgt_maps)
                     for s, t in h.alignment]
    weights = [len(h.tokens) + 1 for h in hyps]
    score = sum(w * h.score for w, h in zip(weights, hyps)) / sum(weights) if hyps else 0.0
    logps = None
    if all(h.token_log_probs is not None for h in hyps):
        logps = [p for h in hyps for p in h.token_log_probs]
    return dict(text=joined_text, tokens=tokens, attention=attention, replaced=replaced, alignment=alignment,
                score=score, token_log_probs=logps), where


def _around(text: str, span: tuple[int, int], result: TranslationResult) -> TranslationResult:
    """A one-sentence text's result: the sentence's, with the whitespace before and after it."""
    lead, trail = text[:span[0]], text[span[1]:]
    result.sentences = [replace(c, source=(span[0] + c.source[0], span[0] + c.source[1]),
                                target=(len(lead), len(lead) + len(result.text))) for c in result.sentences]
    if lead or trail:
        for hyp in [result, *result.alternatives]:
            hyp.text = lead + hyp.text + trail
        if result.read_as is not None:
            result.read_as = lead + result.read_as + trail
    return result


def join_sentences(text: str, spans: Sequence[tuple[int, int]], results: Sequence[TranslationResult], *,
                   subword: bool) -> TranslationResult:
    """One TranslationResult for `text` from the results of its sentences (`text[a:b]` for each
    span, in order; `spans` from data.sentences.split_sentences). A text without sentences (blank)
    gives an empty translation, as it does unsplit."""
    if not spans:
        return empty_result([], [])
    if len(spans) == 1:  # one sentence: its own result, the text's whitespace around it
        return _around(text, spans[0], results[0])
    source_tokens = [r.source_tokens for r in results]
    src_maps = _word_maps(source_tokens, subword)
    fields, where = _join_hypotheses(text, spans, results, source_tokens, src_maps, subword=subword)
    if fields["attention"] is None:  # a sentence without attention: zeros, as blocks of none
        fields["attention"] = BlockAttention([], (len(fields["tokens"]), sum(map(len, source_tokens))))
    depth = max((len(r.alternatives) for r in results), default=0)
    alternatives = []
    for k in range(depth):
        hyps = [r.alternatives[min(k, len(r.alternatives) - 1)] if r.alternatives else r for r in results]
        alt_fields, _ = _join_hypotheses(text, spans, hyps, source_tokens, src_maps, subword=subword)
        known = [h.confidence for h in hyps if h.confidence is not None]  # as sure as its least sure sentence
        alternatives.append(Alternative(alt_fields["text"], alt_fields["tokens"], alt_fields["score"],
                                        alt_fields["attention"], alt_fields["replaced"], alt_fields["alignment"],
                                        alt_fields["token_log_probs"],
                                        confidence=min(known) if len(known) == len(hyps) else None))
    sentences = []
    for result, span, target, src_map in zip(results, spans, where, src_maps):
        for c in result.sentences or []:
            sentences.append(SentenceCoverage((span[0] + c.source[0], span[0] + c.source[1]), target, c.coverage,
                                              c.length_ratio,
                                              [src_map[j] for j in c.uncovered], c.flagged, c.least))
    warnings = list(dict.fromkeys(w for r in results for w in r.warnings))
    paragraph = TranslationResult(fields["text"], fields["tokens"], [t for s in source_tokens for t in s],
                                  fields["attention"], fields["score"], alternatives, warnings, fields["replaced"],
                                  fields["alignment"], fields["token_log_probs"])
    paragraph.sentences = sentences
    paragraph.summarize_coverage()
    _join_judgements(paragraph, text, spans, results)
    return paragraph


def _join_judgements(paragraph: TranslationResult, text: str, spans: Sequence[tuple[int, int]],
                     results: Sequence[TranslationResult]) -> None:
    """What the sentences' results say of themselves, for the paragraph: it is as sure as its least
    sure sentence, cut where one was cut, withheld where one was; read as its sentences were."""
    known = [r.confidence for r in results if r.confidence is not None]
    paragraph.confidence = min(known) if len(known) == len(results) else None
    paragraph.confidence_calibrated = all(r.confidence_calibrated for r in results)
    paragraph.at_length_bound = any(r.at_length_bound for r in results)
    paragraph.withheld = any(r.withheld for r in results)
    if any(r.read_as is not None for r in results):  # each sentence mended alone (the service's path)
        pieces, last = [], 0
        for (a, b), r in zip(spans, results):
            pieces += [text[last:a], r.read_as if r.read_as is not None else text[a:b]]
            last = b
        paragraph.read_as = "".join(pieces) + text[last:]

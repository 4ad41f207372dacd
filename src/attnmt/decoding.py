"""Decoding: raw sentences in, translations out, through a model's search.

    encode_sources   tokenize and cut raw sentences (the same rules for every engine)
    search_batch     greedy or beam search over one padded source batch
    decode_sources   length-sorted batches, results back in input order, n-best lists

This layer sits below training (which validates through it) and the translator (which wraps
it); it imports only data, models and search.

Any input is accepted: empty or whitespace-only lines give an empty translation, words unknown
to the vocabulary become <unk>, and inputs longer than `search.max_input_tokens` tokens are cut
there with a warning (and at MAX_CHARS_PER_TOKEN characters per allowed token before tokenizing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import nn

from attnmt.config import SearchConfig
from attnmt.data.batching import Batch, make_source_batch
from attnmt.data.pipeline import TextPipeline

log = logging.getLogger(__name__)

# Inputs are cut at search.max_input_tokens tokens; before tokenizing, at this many characters
# per allowed token, so that a megabyte on one line costs no more than a long sentence.
MAX_CHARS_PER_TOKEN = 20


@dataclass
class Alternative:
    """One entry of an n-best list."""

    text: str                      # detokenized translation
    tokens: list[str]              # output tokens, without <eos>
    score: float                   # model score (length-normalized for beams)


@dataclass
class TranslationResult:
    text: str                      # detokenized translation
    tokens: list[str]              # output tokens (words or subwords), without <eos>
    source_tokens: list[str]       # the tokenized (and possibly cut) input
    attention: "object" = field(repr=False)  # numpy array (len(tokens), len(source_tokens))
    score: float = 0.0             # model score of the hypothesis (length-normalized for beams)
    alternatives: list[Alternative] = field(default_factory=list)  # n-best, best first (incl. this one)
    warnings: list[str] = field(default_factory=list)  # e.g. the input was cut


def _empty_result(source_tokens: list[str], warnings: list[str]) -> TranslationResult:
    import numpy as np

    attention = np.zeros((0, len(source_tokens)), dtype=np.float32)
    return TranslationResult("", [], source_tokens, attention, 0.0, [Alternative("", [], 0.0)], warnings)


def encode_sources(pipeline: TextPipeline, sentences: Sequence[str], search_cfg: SearchConfig,
                   warnings: list[list[str]] | None = None) -> tuple[list[list[str]], list[list[int]]]:
    """Tokenize raw sentences for decoding, cut to search.max_input_tokens (and, before
    tokenizing, to a character bound); returns (source tokens, source ids) per sentence.

    When `warnings` is given (one list per sentence), each cut is also appended there.
    """
    src_tokens, src_ids = [], []
    for i, sentence in enumerate(sentences):
        notes: list[str] = []
        max_chars = MAX_CHARS_PER_TOKEN * search_cfg.max_input_tokens
        if sentence and len(sentence) > max_chars:  # bound the tokenizer's work on absurd inputs
            notes.append(f"input has {len(sentence)} characters: cut to {max_chars} before tokenizing")
            sentence = sentence[:max_chars]
        tokens = pipeline.src_tokenizer.tokenize(sentence) if sentence and sentence.strip() else []
        if len(tokens) > search_cfg.max_input_tokens:
            notes.append(f"input has {len(tokens)} tokens: cut to search.max_input_tokens="
                         f"{search_cfg.max_input_tokens}")
            tokens = tokens[: search_cfg.max_input_tokens]
        for note in notes:
            log.warning("input %d: %s", i, note)
        if warnings is not None:
            warnings[i].extend(notes)
        src_tokens.append(tokens)
        src_ids.append(pipeline.src_vocab.encode(tokens))
    return src_tokens, src_ids


def search_batch(model: nn.Module, batch: Batch, *, beam_size: int, length_penalty: float, search_cfg: SearchConfig,
                 bos_id: int, eos_id: int):
    """Greedy search (beam_size <= 1) or beam search over one source batch; returns the SearchResult."""
    from attnmt.search import beam_search, greedy_search

    common = dict(max_len_ratio=search_cfg.max_len_ratio, max_len_offset=search_cfg.max_len_offset,
                  bos_id=bos_id, eos_id=eos_id)
    if beam_size <= 1:
        return greedy_search(model, batch.src_ids, batch.src_mask, batch.src_lengths, **common)
    return beam_search(model, batch.src_ids, batch.src_mask, batch.src_lengths, beam_size=beam_size,
                       length_penalty=length_penalty, **common)


@torch.inference_mode()
def decode_sources(model: nn.Module, pipeline: TextPipeline, sentences: Sequence[str], *, beam_size: int,
                   search_cfg: SearchConfig, device: torch.device | str, batch_size: int = 64,
                   length_penalty: float | None = None, n_best: int = 1) -> list[TranslationResult]:
    """Translate raw sentences in length-sorted batches; results come back in input order.

    Each result's `alternatives` holds the best `n_best` hypotheses (at most `beam_size`), best first.
    """
    if n_best < 1:
        raise ValueError(f"n_best={n_best} must be at least 1")
    was_training = model.training
    model.eval()
    warnings: list[list[str]] = [[] for _ in sentences]
    src_tokens, src_ids = encode_sources(pipeline, sentences, search_cfg, warnings)
    results: list[TranslationResult | None] = [None] * len(sentences)
    todo = sorted((i for i in range(len(sentences)) if src_ids[i]), key=lambda i: len(src_ids[i]))
    lp = search_cfg.length_penalty if length_penalty is None else length_penalty
    eos_id, bos_id = pipeline.tgt_vocab.eos_id, pipeline.tgt_vocab.bos_id
    vocab = pipeline.tgt_vocab
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        batch = make_source_batch([src_ids[i] for i in chunk], pad_id=pipeline.src_vocab.pad_id).to(device)
        found = search_batch(model, batch, beam_size=beam_size, length_penalty=lp, search_cfg=search_cfg,
                             bos_id=bos_id, eos_id=eos_id)
        for row, i in enumerate(chunk):
            alternatives = []
            for hyp in found.nbest[row][:n_best]:
                ids = [t for t in hyp.tokens if t != eos_id]
                alternatives.append(Alternative(pipeline.decode_target(ids)[1],
                                                vocab.decode(ids, strip_special=False), float(hyp.score)))
            best = alternatives[0]
            attention = found.attention[row][: len(best.tokens), : len(src_ids[i])].float().cpu().numpy()
            results[i] = TranslationResult(best.text, best.tokens, src_tokens[i], attention, best.score,
                                           alternatives, warnings[i])
    model.train(was_training)
    return [r if r is not None else _empty_result(src_tokens[i], warnings[i]) for i, r in enumerate(results)]

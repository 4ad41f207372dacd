"""The native engine: attnmt's own search (decoding/search.py) over the PyTorch model; the reference that
the CTranslate2 engine is checked against.

    search_batch     greedy, beam or sampling over one padded source batch
    decode_sources   raw sentences in, `TranslationResult`s out, in input order
    score_pairs      forced decoding: the model's log-probability of given translations
    NativeEngine     the two behind the `Engine` interface that `Translator` uses

Shapes:
    batch: sentences; src_len, tgt_len: padded source / target positions; vocab: target vocabulary.
"""

from __future__ import annotations

import logging
from inspect import signature
from typing import Sequence

import torch
from torch import nn

from attnmt.config import SearchConfig
from attnmt.data.batching import Batch, length_sorted_chunks, make_batches, make_source_batch
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding.constraints import constrained_beam_search, constraint_batch, count_occurrences
from attnmt.decoding.inputs import (budget_lengths, encode_constraints, encode_prefixes, encode_sources,
                                   prepare_pairs)
from attnmt.decoding.options import DecodingOptions
from attnmt.decoding.results import Alternative, ScoreResult, TranslationResult, empty_result
from attnmt.decoding.search import beam_search, greedy_search, sample_search
from attnmt.models import eval_mode

log = logging.getLogger(__name__)


def search_batch(model: nn.Module, batch: Batch, options: DecodingOptions, *, search_cfg: SearchConfig,
                 bos_id: int, eos_id: int, generator: torch.Generator | None = None,
                 prefix: torch.Tensor | None = None, constraints: list[list[list[int]]] | None = None,
                 suppress: Sequence[int] = (), budget_lengths: torch.Tensor | None = None):
    """The search `options` name over one source batch (their beam and length penalty resolved:
    DecodingOptions.with_defaults): greedy (beam 1), beam search, or random sampling
    (sampling_topk != 1, with beam 1), the first tokens forced to `prefix` (batch, prefix_len;
    -1 = none) if given; with `constraints` (per sentence, target id lists), constrained beam
    search (decoding/constraints.py); `suppress`: target ids never produced; `budget_lengths`:
    (batch,) what each output budget counts (inputs.budget_lengths; default the source lengths).
    Returns the SearchResult."""
    common = dict(max_len_ratio=search_cfg.max_len_ratio, max_len_offset=search_cfg.max_len_offset,
                  bos_id=bos_id, eos_id=eos_id, prefix=prefix, suppress=suppress, budget_lengths=budget_lengths)
    if constraints is not None:
        return constrained_beam_search(model, batch.src_ids, batch.src_mask, batch.src_lengths,
                                       constraint_batch(constraints, batch.src_ids.device),
                                       beam_size=options.beam_size, length_penalty=options.length_penalty, **common)
    if options.sampling:
        return sample_search(model, batch.src_ids, batch.src_mask, batch.src_lengths, topk=options.sampling_topk,
                             temperature=options.sampling_temperature, generator=generator, **common)
    if options.beam_size <= 1:
        return greedy_search(model, batch.src_ids, batch.src_mask, batch.src_lengths, **common)
    return beam_search(model, batch.src_ids, batch.src_mask, batch.src_lengths, beam_size=options.beam_size,
                       length_penalty=options.length_penalty, **common)


def prefix_batch(prefixes: list[list[int]], device: torch.device | str) -> torch.Tensor | None:
    """Target prefixes as one (batch, prefix_len) long tensor padded with -1; None when all are empty."""
    width = max((len(ids) for ids in prefixes), default=0)
    if width == 0:
        return None
    rows = [ids + [-1] * (width - len(ids)) for ids in prefixes]
    return torch.tensor(rows, dtype=torch.long, device=device)  # (batch, prefix_len)


def _sampling_generator(sampling_topk: int, seed: int | None, device: torch.device | str) -> torch.Generator | None:
    if sampling_topk == 1:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(seed if seed is not None else int(torch.randint(2**62, ()).item()))
    return generator


@torch.inference_mode()
def decode_sources(model: nn.Module, pipeline: TextPipeline, sentences: Sequence[str], options: DecodingOptions, *,
                   search_cfg: SearchConfig, device: torch.device | str,
                   target_prefix: Sequence[str | None] | None = None,
                   constraints: Sequence[Sequence[str]] | None = None,
                   target_lang: str | None = None) -> list[TranslationResult]:
    """Translate raw sentences as `options` say (what they leave unset: `search_cfg`'s), in
    length-sorted batches of options.batch_size; results come back in input order.

    `target_prefix` (one text or None per sentence) forces the start of each translation; the
    search completes it (decoding/search.py). `target_lang` (a multilingual model's) puts its language
    token before each source or forces it first in each output (pipeline.language_ids); the
    results leave that token out (its attention row or column too).

    `constraints` (per sentence, a list of target phrases) must each appear in the translation
    exactly once: the sentences that have some are decoded together by constrained beam search
    (decoding/constraints.py; with beam_size 1, its small internal beam and the best hypothesis), the
    others by the plain search (greedy or beam), exactly as without them.
    A constraint the budget left unmet is named in the result's warnings.

    Each result's `alternatives` holds the best `n_best` hypotheses (at most `beam_size`), best first.
    `sampling_topk` != 1 draws each translation at random from the `sampling_topk` most probable
    tokens (0 = all) at `sampling_temperature`; `seed` makes the draws repeatable.
    """
    options = options.with_defaults(search_cfg)
    generator = _sampling_generator(options.sampling_topk, options.seed, device)
    warnings: list[list[str]] = [[] for _ in sentences]
    before, first = pipeline.language_ids(target_lang)
    src_tokens, src_ids = encode_sources(pipeline, sentences, search_cfg, warnings)
    lengths = budget_lengths(pipeline, sentences, src_ids, search_cfg, extra=len(before))
    src_ids = [before + ids if ids else ids for ids in src_ids]  # an empty source stays empty (no translation)
    prefix_ids = [first + ids for ids in encode_prefixes(pipeline, target_prefix, len(sentences), search_cfg, warnings)]
    phrases, constraint_ids = encode_constraints(pipeline, constraints, len(sentences), search_cfg)
    for i in range(len(sentences)):
        phrases[i], constraint_ids[i] = _drop_contained(phrases[i], constraint_ids[i], warnings[i])
    if any(constraint_ids) and options.sampling:
        raise ValueError(f"constraints need greedy or beam search, not sampling (sampling_topk={options.sampling_topk})")
    results: list[TranslationResult | None] = [None] * len(sentences)
    vocab = pipeline.tgt_vocab
    with eval_mode(model):
        for whole_chunk in length_sorted_chunks([len(ids) for ids in src_ids], options.batch_size):
            # sentences without constraints decode exactly as they would without the feature
            plain = [i for i in whole_chunk if not constraint_ids[i]]
            constrained = [i for i in whole_chunk if constraint_ids[i]]
            for chunk, cons in ((plain, None), (constrained, [constraint_ids[i] for i in constrained])):
                if not chunk:
                    continue
                batch = make_source_batch([src_ids[i] for i in chunk], pad_id=pipeline.src_vocab.pad_id).to(device)
                found = search_batch(model, batch, options, search_cfg=search_cfg, bos_id=vocab.bos_id,
                                     eos_id=vocab.eos_id, generator=generator,
                                     prefix=prefix_batch([prefix_ids[i] for i in chunk], device), constraints=cons,
                                     suppress=vocab.suppressed_ids,
                                     budget_lengths=torch.tensor([lengths[i] for i in chunk]))
                for row, i in enumerate(chunk):
                    results[i] = _result(found, row, pipeline, src_tokens[i], len(src_ids[i]), options.n_best,
                                         phrases[i], constraint_ids[i], warnings[i], skip=(len(first), len(before)))
    return [r if r is not None else empty_result(src_tokens[i], warnings[i]) for i, r in enumerate(results)]


def _result(found, row: int, pipeline: TextPipeline, src_tokens: list[str], src_length: int, n_best: int,
            phrases: list[list[str]], constraint_ids: list[list[int]], warnings: list[str],
            skip: tuple[int, int] = (0, 0)) -> TranslationResult:
    """Sentence `row` of a SearchResult as a TranslationResult: constraint tokens the vocabulary
    lacks are shown as typed (not <unk>), and a constraint the output lacks is named in `warnings`.
    `skip`: the language ids forced first in the output and put before the source, left out."""
    vocab = pipeline.tgt_vocab
    first, before = skip
    alternatives = []
    for hyp in found.nbest[row][:n_best]:
        ids = [t for t in hyp.tokens if t != vocab.eos_id][first:]
        attention = hyp.attention[first:first + len(ids), before:].float().numpy()  # (len(ids), src_len)
        tokens = vocab.decode(ids, strip_special=False)
        if any(t == vocab.unk_id for c in constraint_ids for t in c):
            tokens = _show_constraints(ids, tokens, phrases, constraint_ids)
        text = pipeline.target_text(tokens)
        alternatives.append(Alternative(text, tokens, float(hyp.score), attention,
                                        token_log_probs=[float(p) for p in hyp.token_log_probs[first:]],
                                        log_prob=float(hyp.log_prob)))
    best_ids = [t for t in found.nbest[row][0].tokens if t != vocab.eos_id][first:]
    for phrase, ids in zip(phrases, constraint_ids):
        if count_occurrences(best_ids, ids) == 0:
            note = f"constraint {' '.join(phrase)!r} not met: the output budget ran out"
            log.warning(note)
            warnings.append(note)
    best = alternatives[0]
    attention = found.attention[row][first:first + len(best.tokens), before:src_length].float().cpu().numpy()
    kept = found.nbest[row]  # every hypothesis the search kept, for the confidence (decoding/confidence.py)
    return TranslationResult(best.text, best.tokens, src_tokens, attention, best.score, alternatives, warnings,
                             token_log_probs=best.token_log_probs, log_prob=float(kept[0].log_prob),
                             beam_scores=[float(h.score) for h in kept],
                             beam_tokens=[vocab.decode([t for t in h.tokens if t != vocab.eos_id][first:],
                                                       strip_special=False) for h in kept],
                             at_length_bound=len(kept[0].token_log_probs) == len(kept[0].tokens))  # no eos: cut


def _drop_contained(phrases: list[list[str]], constraint_ids: list[list[int]], warnings: list[str]
                    ) -> tuple[list[list[str]], list[list[int]]]:
    """Drop each constraint that is part of a longer one (e.g. 'small' in 'house small'): met alone
    first, it would bar the longer one, and inside the longer one it appears anyway. Only the longer
    one is enforced (exactly once); `warnings` says so."""
    keep = [not any(len(other) > len(ids) and count_occurrences(other, ids) for other in constraint_ids)
            for ids in constraint_ids]
    for phrase, ids, kept in zip(phrases, constraint_ids, keep):
        if not kept:
            longer = next(p for p, other in zip(phrases, constraint_ids)
                          if len(other) > len(ids) and count_occurrences(other, ids))
            note = (f"constraint {' '.join(phrase)!r} is part of {' '.join(longer)!r}: only the longer one is "
                    f"enforced")
            log.warning(note)
            warnings.append(note)
    return ([p for p, k in zip(phrases, keep) if k], [c for c, k in zip(constraint_ids, keep) if k])


def _show_constraints(ids: list[int], tokens: list[str], phrases: list[list[str]],
                      constraint_ids: list[list[int]]) -> list[str]:
    """`tokens` with each constraint's first occurrence (by id) written as the constraint's own tokens."""
    tokens = list(tokens)
    for phrase, c in zip(phrases, constraint_ids):
        for start in range(len(ids) - len(c) + 1):
            if ids[start:start + len(c)] == c:
                tokens[start:start + len(c)] = phrase
                break
    return tokens


@torch.inference_mode()
def score_pairs(model: nn.Module, pipeline: TextPipeline, sources: Sequence[str], targets: Sequence[str], *,
                search_cfg: SearchConfig, device: torch.device | str, batch_size: int = 64,
                target_lang: str | None = None) -> list[ScoreResult]:
    """Forced decoding: each translation's log-probability given its source (teacher forcing,
    <eos> included), in length-sorted batches; results in input order, with each token's
    log-probability and the attention (as the model's attention view reports it). An empty source
    has no score (log_prob nan, no token log-probabilities). `target_lang` (a multilingual
    model's): its language token goes where training put it, and a token forced first in the
    output is not scored (as in decoding)."""
    import numpy as np

    src_tokens, src_ids, tgt_tokens, tgt_ids, warnings = prepare_pairs(pipeline, sources, targets, search_cfg)
    before, first = pipeline.language_ids(target_lang)
    src_ids = [before + ids if ids else ids for ids in src_ids]
    tgt_ids = [first + ids for ids in tgt_ids]
    vocab = pipeline.tgt_vocab
    log_probs = [float("nan")] * len(sources)
    token_log_probs: list[list[float]] = [[] for _ in sources]
    attention = [np.zeros((0, len(ids) - len(before) if ids else 0), dtype=np.float32) for ids in src_ids]
    # the Transformer computes its attention weights in a teacher-forced pass only when asked
    attention_option = {"need_attention": True} if "need_attention" in signature(model.forward).parameters else {}
    with eval_mode(model):
        for chunk in length_sorted_chunks([len(ids) for ids in src_ids], batch_size):
            batch = make_batches([(src_ids[i], tgt_ids[i]) for i in chunk], batch_size=len(chunk), shuffle=False,
                                 pad_id=vocab.pad_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id)[0].to(device)
            out = model(batch.src_ids, batch.src_mask, batch.src_lengths, batch.tgt_in, **attention_option)
            logp = out.logits.float().log_softmax(dim=-1).gather(2, batch.tgt_out.unsqueeze(2)).squeeze(2)  # (batch, tgt_len)
            logp = logp.masked_fill(batch.tgt_out == vocab.pad_id, 0.0)
            logp[:, :len(first)] = 0.0  # forced tokens are not the model's choice
            weights = None if out.attention is None else out.attention.float().cpu().numpy()  # (batch, tgt_len, src_len)
            for row, (total, per_token) in enumerate(zip(logp.sum(dim=1).tolist(), logp.tolist())):
                i = chunk[int(batch.index[row])]
                n = len(tgt_ids[i]) + 1
                log_probs[i], token_log_probs[i] = total, per_token[len(first):n]
                attention[i] = None if weights is None else weights[row, len(first):n, len(before):len(src_ids[i])]
    return [ScoreResult(src_tokens[i], tgt_tokens[i], log_probs[i], len(tgt_ids[i]) + 1 - len(first), warnings[i],
                        token_log_probs[i], attention[i]) for i in range(len(sources))]


class NativeEngine:
    """The PyTorch engine: attnmt's own search over the model (the reference engine)."""

    name = "native"

    def __init__(self, model: nn.Module, pipeline: TextPipeline, search_cfg: SearchConfig, device: torch.device | str):
        self.model = model
        self.pipeline = pipeline
        self.search_cfg = search_cfg
        self.device = torch.device(device)

    def translate(self, sentences: Sequence[str], options: DecodingOptions, *,
                  target_prefix: Sequence[str | None] | None = None,
                  constraints: Sequence[Sequence[str]] | None = None,
                  target_lang: str | None = None) -> list[TranslationResult]:
        """`options.layer` and `options.head` pick which cross-attention a Transformer reports
        (default: the mean); `constraints`: per sentence, target phrases that must appear exactly
        once; `target_lang`: a multilingual model's output language (decode_sources)."""
        layer, head = options.layer, options.head
        if layer is not None or head is not None:
            if not hasattr(self.model, "set_attention_view"):
                raise ValueError("layer/head selection needs a Transformer model")
            self.model.set_attention_view(layer=layer, head=head)
        try:
            return decode_sources(self.model, self.pipeline, sentences, options, search_cfg=self.search_cfg,
                                  device=self.device, target_prefix=target_prefix, constraints=constraints,
                                  target_lang=target_lang)
        finally:
            if layer is not None or head is not None:
                self.model.set_attention_view(layer=None, head=None)

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64,
              target_lang: str | None = None) -> list[ScoreResult]:
        return score_pairs(self.model, self.pipeline, sources, targets, search_cfg=self.search_cfg,
                           device=self.device, batch_size=batch_size, target_lang=target_lang)

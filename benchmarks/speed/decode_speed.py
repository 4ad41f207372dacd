"""Decoding throughput (part of bench.py): attnmt through its Translator (and its search alone),
the reference the way the tutorials translate, both on attnmt's weights and length budgets.

Shapes: batch, src_len as in attnmt.data.batching; the reference is seq-first (src_len, batch).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Sequence

import torch
from torch import Tensor, nn

from attnmt import Translator
from attnmt.config import SearchConfig
from attnmt.data.batching import make_source_batch
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding.inputs import encode_sources
from attnmt.decoding.options import DecodingOptions
from attnmt.decoding.search import output_budget
from attnmt.engines.native import search_batch
from benchmarks.common import median_time, rate
from benchmarks.speed.memory import PeakMemory


def budget(src_len: int, search_cfg: SearchConfig) -> int:
    """The length budget attnmt's search gives a source of `src_len` tokens (eos included)."""
    return int(output_budget(torch.tensor([src_len]), search_cfg.max_len_ratio, search_cfg.max_len_offset)[0])


def attnmt_translate(translator: Translator, sentences: Sequence[str], *, beam: int,
                     batch_size: int) -> Callable[[], list[list[str]]]:
    """A callable that translates through Translator.translate (tokenizing included); it returns
    the output tokens of each non-empty source."""
    def run() -> list[list[str]]:
        found = translator.translate(list(sentences), beam_size=beam, batch_size=batch_size)
        return [r.tokens for r in found if r.source_tokens]

    return run


def attnmt_search_only(model: nn.Module, pipeline: TextPipeline, sentences: Sequence[str], *, beam: int,
                       search_cfg: SearchConfig, device: torch.device, batch_size: int) -> Callable[[], int]:
    """A callable that runs only the search over the batches the translator would build
    (length-sorted, already on the device); it returns the tokens produced."""
    _, ids = encode_sources(pipeline, sentences, search_cfg)
    order = sorted((i for i in range(len(ids)) if ids[i]), key=lambda i: len(ids[i]))
    pad_id, vocab = pipeline.src_vocab.pad_id, pipeline.tgt_vocab
    batches = [make_source_batch([ids[i] for i in order[s:s + batch_size]], pad_id=pad_id).to(device)
               for s in range(0, len(order), batch_size)]
    options = DecodingOptions(beam_size=beam).with_defaults(search_cfg)

    def run() -> int:
        produced = 0
        for b in batches:
            found = search_batch(model, b, options, search_cfg=search_cfg, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
            produced += sum(len(tokens) for tokens in found.tokens)
        return produced

    return run


def _reference_inputs(pipeline: TextPipeline, sentences: Sequence[str], *, beam: int, search_cfg: SearchConfig,
                      device: torch.device, batch_size: int) -> list[tuple[Tensor, list[int]]]:
    """(source ids, per-sentence budgets): padded batches in input order for greedy, one sentence
    at a time for beam search."""
    ids = [s for s in encode_sources(pipeline, sentences, search_cfg)[1] if s]
    if beam <= 1:
        chunks = [ids[s:s + batch_size] for s in range(0, len(ids), batch_size)]
        return [(make_source_batch(c, pad_id=pipeline.src_vocab.pad_id).src_ids.t().to(device),  # (src_len, batch)
                 [budget(len(x), search_cfg) for x in c]) for c in chunks]
    return [(torch.tensor(s, dtype=torch.long, device=device).unsqueeze(1), [budget(len(s), search_cfg)])
            for s in ids]  # (src_len, 1)


def _reference_search(ref: ModuleType, model: nn.Module, inputs: list[tuple[Tensor, list[int]]], *, beam: int,
                      bos_id: int, eos_id: int, length_penalty: float | None) -> list[list[int]]:
    outputs = []
    for src, max_lens in inputs:
        if beam <= 1:
            rows = ref.greedy_decode(model, src, max(max_lens), bos_id, eos_id,
                                     torch.tensor(max_lens, device=src.device)).t().tolist()  # (batch, steps)
            rows = [row[:n] for row, n in zip(rows, max_lens)]
            outputs += [row[: row.index(eos_id)] if eos_id in row else row for row in rows]
        else:
            outputs.append(ref.beam_search_one(model, src, beam_size=beam, max_len=max_lens[0], bos_id=bos_id,
                                               eos_id=eos_id, length_penalty=length_penalty))
    return outputs


def reference_translate(ref: ModuleType, model: nn.Module, pipeline: TextPipeline, sentences: Sequence[str], *,
                        beam: int, search_cfg: SearchConfig, device: torch.device, batch_size: int,
                        search_only: bool = False) -> Callable[[], Any]:
    """A callable that translates like the tutorials: greedy in batches in input order until every
    sentence of the batch has emitted eos or reached its budget, beam search one sentence at a
    time (finished hypotheses scored with attnmt's GNMT penalty, search.length_penalty); it returns
    the output tokens of each sentence.

    Budgets are attnmt's (`budget`: max_len_ratio * src_len + max_len_offset tokens, eos included),
    one per sentence. With `search_only`, tokenizing and detokenizing happen once, outside the
    callable, which then returns the number of tokens produced.
    """
    vocab = pipeline.tgt_vocab
    kw = dict(beam=beam, search_cfg=search_cfg, device=device, batch_size=batch_size)
    search = dict(beam=beam, bos_id=vocab.bos_id, eos_id=vocab.eos_id, length_penalty=search_cfg.length_penalty)
    if search_only:
        inputs = _reference_inputs(pipeline, sentences, **kw)
        return lambda: sum(len(o) for o in _reference_search(ref, model, inputs, **search))

    def run() -> list[list[str]]:
        outputs = _reference_search(ref, model, _reference_inputs(pipeline, sentences, **kw), **search)
        for out in outputs:
            pipeline.decode_target(out)  # the text, as the translator makes it
        return [vocab.decode(out, strip_special=False) for out in outputs]  # tokens as the translator keeps them

    return run


def measure_decoding(run: Callable[[], list[list[str]]], search_run: Callable[[], int] | None, n_sentences: int, *,
                     repeats: int, device: torch.device, memory: PeakMemory) -> tuple[dict, list[list[str]]]:
    """Sentences/s, produced target tokens/s (median of `repeats`), with and without tokenizing,
    and the mean output length; returns the figures and the output tokens of each sentence."""
    memory.reset()
    timing = median_time(run, repeats=repeats, device=device)
    sec, outputs = timing.median, timing.result
    tokens = sum(len(o) for o in outputs)
    result = {"sentences": n_sentences, "outputs": len(outputs), "tgt_tokens": tokens,
              "mean_len": round(tokens / max(len(outputs), 1), 2), "seconds": round(sec, 4),
              "sent_per_s": rate(n_sentences, sec, 2), "tgt_tok_per_s": rate(tokens, sec)}
    if search_run is not None:
        ssec = median_time(search_run, repeats=repeats, device=device).median
        result.update(search_seconds=round(ssec, 4), search_sent_per_s=rate(n_sentences, ssec, 2),
                      search_tgt_tok_per_s=rate(tokens, ssec))
    result.update(memory.report())
    return result, outputs


def agreement(a: Sequence[Sequence[str]], b: Sequence[Sequence[str]]) -> float | None:
    """Share of sentences whose two outputs are token for token the same (None: not aligned)."""
    if len(a) != len(b) or not a:
        return None
    return round(sum(list(x) == list(y) for x, y in zip(a, b)) / len(a), 4)

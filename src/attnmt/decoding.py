"""Decoding: raw sentences in, translations out, through a model's search.

    encode_sources   tokenize and cut raw sentences (the same rules for every engine)
    search_batch     greedy or beam search over one padded source batch
    decode_sources   length-sorted batches, results back in input order, n-best lists
    score_pairs      forced decoding: the model's log-probability of given translations
    NativeEngine     the PyTorch engine behind `Translator` (the reference); `Engine` is the
                     interface every engine follows (engines/ctranslate2.py is the other one)

This layer sits below training (which validates through it) and the translator (which wraps
it); it imports only data, models and search.

Any input is accepted: empty or whitespace-only lines give an empty translation, words unknown
to the vocabulary become <unk>, and inputs longer than `search.max_input_tokens` tokens are cut
there with a warning (and at MAX_CHARS_PER_TOKEN characters per allowed token before tokenizing).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol, Sequence

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


@dataclass
class ScoreResult:
    """The model's score of one given translation (forced decoding)."""

    source_tokens: list[str]       # the tokenized (and possibly cut) source
    target_tokens: list[str]       # the tokenized (and possibly cut) translation, without <eos>
    log_prob: float                # sum of the token log-probabilities, <eos> included
    num_tokens: int                # tokens scored: len(target_tokens) + 1 for <eos>
    warnings: list[str] = field(default_factory=list)

    @property
    def normalized(self) -> float:
        """log_prob per scored token."""
        return self.log_prob / self.num_tokens


def empty_result(source_tokens: list[str], warnings: list[str]) -> TranslationResult:
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
                 bos_id: int, eos_id: int, sampling_topk: int = 1, sampling_temperature: float = 1.0,
                 generator: torch.Generator | None = None):
    """Greedy search (beam_size <= 1), beam search, or random sampling (sampling_topk != 1, with
    beam_size 1) over one source batch; returns the SearchResult."""
    from attnmt.search import beam_search, greedy_search, sample_search

    common = dict(max_len_ratio=search_cfg.max_len_ratio, max_len_offset=search_cfg.max_len_offset,
                  bos_id=bos_id, eos_id=eos_id)
    if sampling_topk != 1:
        return sample_search(model, batch.src_ids, batch.src_mask, batch.src_lengths, topk=sampling_topk,
                             temperature=sampling_temperature, generator=generator, **common)
    if beam_size <= 1:
        return greedy_search(model, batch.src_ids, batch.src_mask, batch.src_lengths, **common)
    return beam_search(model, batch.src_ids, batch.src_mask, batch.src_lengths, beam_size=beam_size,
                       length_penalty=length_penalty, **common)


def check_decoding_args(*, beam_size: int, n_best: int, sampling_topk: int, sampling_temperature: float) -> None:
    """The argument rules both engines share.

    Raises:
        ValueError: naming the argument.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size} must be at least 1")
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    if sampling_topk < 0:
        raise ValueError(f"sampling_topk={sampling_topk} must be >= 0 (0 = the whole vocabulary, 1 = no sampling)")
    if sampling_topk != 1 and beam_size != 1:
        raise ValueError(f"sampling (sampling_topk={sampling_topk}) draws one translation: it needs beam_size=1, "
                         f"got {beam_size}")
    if not sampling_temperature > 0:
        raise ValueError(f"sampling_temperature={sampling_temperature} must be > 0")


@torch.inference_mode()
def decode_sources(model: nn.Module, pipeline: TextPipeline, sentences: Sequence[str], *, beam_size: int,
                   search_cfg: SearchConfig, device: torch.device | str, batch_size: int = 64,
                   length_penalty: float | None = None, n_best: int = 1, sampling_topk: int = 1,
                   sampling_temperature: float = 1.0, seed: int | None = None) -> list[TranslationResult]:
    """Translate raw sentences in length-sorted batches; results come back in input order.

    Each result's `alternatives` holds the best `n_best` hypotheses (at most `beam_size`), best first.
    `sampling_topk` != 1 draws each translation at random from the `sampling_topk` most probable
    tokens (0 = all) at `sampling_temperature`; `seed` makes the draws repeatable.
    """
    check_decoding_args(beam_size=beam_size, n_best=n_best, sampling_topk=sampling_topk,
                        sampling_temperature=sampling_temperature)
    generator = None
    if sampling_topk != 1:
        generator = torch.Generator(device=device)
        generator.manual_seed(seed if seed is not None else int(torch.randint(2**62, ()).item()))
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
                             bos_id=bos_id, eos_id=eos_id, sampling_topk=sampling_topk,
                             sampling_temperature=sampling_temperature, generator=generator)
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
    return [r if r is not None else empty_result(src_tokens[i], warnings[i]) for i, r in enumerate(results)]


def encode_targets(pipeline: TextPipeline, targets: Sequence[str], search_cfg: SearchConfig,
                   warnings: list[list[str]]) -> tuple[list[list[str]], list[list[int]]]:
    """Tokenize given translations for scoring, cut (with a warning) where a source would be cut."""
    return encode_sources(_TargetSide(pipeline), targets, search_cfg, warnings)


@dataclass
class _TargetSide:
    """A pipeline seen from its target side, so that encode_sources' rules apply to targets."""

    pipeline: TextPipeline

    @property
    def src_tokenizer(self):
        return self.pipeline.tgt_tokenizer

    @property
    def src_vocab(self):
        return self.pipeline.tgt_vocab


def prepare_pairs(pipeline: TextPipeline, sources: Sequence[str], targets: Sequence[str], search_cfg: SearchConfig):
    """Tokenize (source, translation) pairs for scoring: (src_tokens, src_ids, tgt_tokens, tgt_ids, warnings).

    Raises:
        ValueError: different numbers of sources and translations.
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} translations to score")
    warnings: list[list[str]] = [[] for _ in sources]
    src_tokens, src_ids = encode_sources(pipeline, sources, search_cfg, warnings)
    tgt_tokens, tgt_ids = encode_targets(pipeline, targets, search_cfg, warnings)
    return src_tokens, src_ids, tgt_tokens, tgt_ids, warnings


@torch.inference_mode()
def score_pairs(model: nn.Module, pipeline: TextPipeline, sources: Sequence[str], targets: Sequence[str], *,
                search_cfg: SearchConfig, device: torch.device | str, batch_size: int = 64) -> list[ScoreResult]:
    """Forced decoding: each translation's log-probability given its source (teacher forcing,
    <eos> included), in length-sorted batches; results in input order. An empty source has no
    score (log_prob nan)."""
    from attnmt.data.batching import make_batches

    src_tokens, src_ids, tgt_tokens, tgt_ids, warnings = prepare_pairs(pipeline, sources, targets, search_cfg)
    vocab = pipeline.tgt_vocab
    log_probs = [float("nan")] * len(sources)
    todo = [i for i in range(len(sources)) if src_ids[i]]
    was_training = model.training
    model.eval()
    batches = make_batches([(src_ids[i], tgt_ids[i]) for i in todo], batch_size=batch_size, shuffle=False,
                           pad_id=vocab.pad_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id) if todo else []
    for batch in batches:
        batch = batch.to(device)
        logits = model(batch.src_ids, batch.src_mask, batch.src_lengths, batch.tgt_in).logits  # (batch, tgt_len, vocab)
        logp = logits.float().log_softmax(dim=-1).gather(2, batch.tgt_out.unsqueeze(2)).squeeze(2)  # (batch, tgt_len)
        sums = logp.masked_fill(batch.tgt_out == vocab.pad_id, 0.0).sum(dim=1).tolist()  # (batch,)
        for row, total in zip(batch.index.tolist(), sums):
            log_probs[todo[row]] = total
    model.train(was_training)
    return [ScoreResult(src_tokens[i], tgt_tokens[i], log_probs[i], len(tgt_ids[i]) + 1, warnings[i])
            for i in range(len(sources))]


class Engine(Protocol):
    """What `Translator` asks of an engine: translate and score raw text (both in input order).

    Both engines take the same arguments with the same meaning (decode_sources' docstring):
    beam_size (1 = greedy), length_penalty (GNMT alpha; None = the run's search config),
    batch_size (sentences per batch), n_best, sampling_topk / sampling_temperature / seed.
    """

    name: str
    pipeline: TextPipeline
    search_cfg: SearchConfig

    def translate(self, sentences: Sequence[str], *, beam_size: int, length_penalty: float | None = None,
                  batch_size: int = 64, n_best: int = 1, layer: int | None = None, head: int | None = None,
                  sampling_topk: int = 1, sampling_temperature: float = 1.0,
                  seed: int | None = None) -> list[TranslationResult]: ...

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64) -> list[ScoreResult]: ...


class NativeEngine:
    """The PyTorch engine: attnmt's own search over the model (the reference engine)."""

    name = "native"

    def __init__(self, model: nn.Module, pipeline: TextPipeline, search_cfg: SearchConfig, device: torch.device | str):
        self.model = model
        self.pipeline = pipeline
        self.search_cfg = search_cfg
        self.device = torch.device(device)

    def translate(self, sentences: Sequence[str], *, beam_size: int, length_penalty: float | None = None,
                  batch_size: int = 64, n_best: int = 1, layer: int | None = None, head: int | None = None,
                  sampling_topk: int = 1, sampling_temperature: float = 1.0,
                  seed: int | None = None) -> list[TranslationResult]:
        """`layer` and `head` pick which cross-attention a Transformer reports (default: the mean)."""
        if layer is not None or head is not None:
            if not hasattr(self.model, "set_attention_view"):
                raise ValueError("layer/head selection needs a Transformer model")
            self.model.set_attention_view(layer=layer, head=head)
        try:
            return decode_sources(self.model, self.pipeline, sentences, beam_size=beam_size,
                                  search_cfg=self.search_cfg, device=self.device, batch_size=batch_size,
                                  length_penalty=length_penalty, n_best=n_best, sampling_topk=sampling_topk,
                                  sampling_temperature=sampling_temperature, seed=seed)
        finally:
            if layer is not None or head is not None:
                self.model.set_attention_view(layer=None, head=None)

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64) -> list[ScoreResult]:
        return score_pairs(self.model, self.pipeline, sources, targets, search_cfg=self.search_cfg,
                           device=self.device, batch_size=batch_size)

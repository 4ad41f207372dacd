"""Translator: load a trained run and translate sentences, with attention weights.

    from attnmt import Translator
    t = Translator.load("runs/multi30k_rnn")
    result = t.translate(["Ein Hund läuft ."], beam_size=5)[0]
    result.text, result.tokens, result.source_tokens, result.attention  # (tgt_len, src_len)

Any input is accepted: empty or whitespace-only lines give an empty translation, words unknown
to the vocabulary become <unk>, and inputs longer than `search.max_input_tokens` tokens (default
250) are cut there with a warning (and at 20 characters per allowed token before tokenizing).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import torch
from torch import nn

from attnmt.config import Config, SearchConfig, load_saved_config
from attnmt.data.batching import Batch, make_batches, make_source_batch
from attnmt.data.pipeline import TextPipeline

log = logging.getLogger(__name__)

# Inputs are cut at search.max_input_tokens tokens; before tokenizing, at this many characters
# per allowed token, so that a megabyte on one line costs no more than a long sentence.
MAX_CHARS_PER_TOKEN = 20


@dataclass
class TranslationResult:
    text: str                      # detokenized translation
    tokens: list[str]              # output tokens (words or subwords), without <eos>
    source_tokens: list[str]       # the tokenized (and possibly cut) input
    attention: "object" = field(repr=False)  # numpy array (len(tokens), len(source_tokens))
    score: float = 0.0             # model score of the hypothesis (length-normalized for beams)


def _empty_result(source_tokens: list[str]):
    import numpy as np

    return TranslationResult("", [], source_tokens, np.zeros((0, len(source_tokens)), dtype=np.float32), 0.0)


def encode_sources(pipeline: TextPipeline, sentences: Sequence[str],
                   search_cfg: SearchConfig) -> tuple[list[list[str]], list[list[int]]]:
    """Tokenize raw sentences for decoding, cut to search.max_input_tokens (and, before
    tokenizing, to a character bound); returns (source tokens, source ids) per sentence."""
    src_tokens, src_ids = [], []
    for i, sentence in enumerate(sentences):
        max_chars = MAX_CHARS_PER_TOKEN * search_cfg.max_input_tokens
        if sentence and len(sentence) > max_chars:  # bound the tokenizer's work on absurd inputs
            log.warning("input %d has %d characters: cut to %d before tokenizing", i, len(sentence), max_chars)
            sentence = sentence[:max_chars]
        tokens = pipeline.src_tokenizer.tokenize(sentence) if sentence and sentence.strip() else []
        if len(tokens) > search_cfg.max_input_tokens:
            log.warning("input %d has %d tokens: cut to search.max_input_tokens=%d", i, len(tokens),
                        search_cfg.max_input_tokens)
            tokens = tokens[: search_cfg.max_input_tokens]
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
                   length_penalty: float | None = None) -> list[TranslationResult]:
    """Translate raw sentences in length-sorted batches; results come back in input order."""
    was_training = model.training
    model.eval()
    src_tokens, src_ids = encode_sources(pipeline, sentences, search_cfg)
    results: list[TranslationResult | None] = [None] * len(sentences)
    todo = sorted((i for i in range(len(sentences)) if src_ids[i]), key=lambda i: len(src_ids[i]))
    lp = search_cfg.length_penalty if length_penalty is None else length_penalty
    eos_id, bos_id = pipeline.tgt_vocab.eos_id, pipeline.tgt_vocab.bos_id
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        batch = make_source_batch([src_ids[i] for i in chunk], pad_id=pipeline.src_vocab.pad_id).to(device)
        found = search_batch(model, batch, beam_size=beam_size, length_penalty=lp, search_cfg=search_cfg,
                             bos_id=bos_id, eos_id=eos_id)
        for row, i in enumerate(chunk):
            ids = [t for t in found.tokens[row] if t != eos_id]
            tokens, text = pipeline.decode_target(ids)
            attention = found.attention[row][: len(ids), : len(src_ids[i])].float().cpu().numpy()
            results[i] = TranslationResult(text, pipeline.tgt_vocab.decode(ids, strip_special=False),
                                           src_tokens[i], attention, float(found.scores[row]))
    model.train(was_training)
    return [r if r is not None else _empty_result(src_tokens[i]) for i, r in enumerate(results)]


class Translator:
    """A trained model with its tokenizers and vocabularies, ready to translate."""

    def __init__(self, model: nn.Module, pipeline: TextPipeline, cfg: Config, *, device: torch.device | str = "cpu",
                 run_dir: Path | None = None):
        self.model = model.to(device).eval()
        self.pipeline = pipeline
        self.cfg = cfg
        self.device = torch.device(device)
        self.run_dir = run_dir

    @classmethod
    def load(cls, run_dir: str | Path, *, checkpoint: str = "best", device: str | None = None) -> Translator:
        """Load a run directory written by `attnmt train` (safetensors + JSON; no pickle)."""
        from attnmt.checkpoint import checkpoint_path, load_weights
        from attnmt.models import build_model

        run_dir = Path(run_dir)
        cfg = load_saved_config(run_dir / "config.json")
        pipeline = TextPipeline.load(run_dir)
        vocab = pipeline.tgt_vocab
        model = build_model(cfg.model, len(pipeline.src_vocab), len(vocab), pad_id=vocab.pad_id,
                            bos_id=vocab.bos_id, eos_id=vocab.eos_id)
        load_weights(model, checkpoint_path(run_dir, checkpoint))
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        return cls(model, pipeline, cfg, device=device, run_dir=run_dir)

    def translate(self, sentences: Sequence[str] | str, *, beam_size: int | None = None,
                  length_penalty: float | None = None, batch_size: int = 64, layer: int | None = None,
                  head: int | None = None) -> list[TranslationResult]:
        """Translate sentences (a list, or one string); beam_size 1 is greedy search.

        `layer` and `head` pick which cross-attention a Transformer reports (default: the mean).
        """
        if isinstance(sentences, str):
            sentences = [sentences]
        if layer is not None or head is not None:
            if not hasattr(self.model, "set_attention_view"):
                raise ValueError("layer/head selection needs a Transformer model")
            self.model.set_attention_view(layer=layer, head=head)
        beam = self.cfg.search.beam_size if beam_size is None else beam_size
        if beam < 1:
            raise ValueError(f"beam_size={beam} must be at least 1")
        try:
            return decode_sources(self.model, self.pipeline, list(sentences), beam_size=beam,
                                  search_cfg=self.cfg.search, device=self.device, batch_size=batch_size,
                                  length_penalty=length_penalty)
        finally:
            if layer is not None or head is not None:
                self.model.set_attention_view(layer=None, head=None)

    def evaluate(self, split: str = "test_2016_flickr", *, beam_size: int | None = None,
                 length_penalty: float | None = None, batch_size: int = 128) -> dict:
        """BLEU, chrF (cased, detokenized; sacreBLEU signature), lowercased BLEUs and perplexity."""
        from attnmt.data.corpus import load_corpus
        from attnmt.evaluation import perplexity, score_translations
        from attnmt.training import corpus_loss, corpus_spec

        corpus = load_corpus(corpus_spec(self.cfg.data), split)
        beam = self.cfg.search.beam_size if beam_size is None else beam_size
        results = self.translate(corpus.src, beam_size=beam, length_penalty=length_penalty, batch_size=batch_size)
        lp = self.cfg.search.length_penalty if length_penalty is None else length_penalty
        report = {"split": split, "sentences": len(corpus.src), "beam": beam,
                  "length_penalty": lp if beam > 1 else None}
        report.update(score_translations([r.text for r in results], corpus.tgt, tgt_lang=self.cfg.data.tgt_lang))
        vocab = self.pipeline.tgt_vocab
        batches = make_batches(self.pipeline.encode_corpus(corpus), batch_size=batch_size, shuffle=False,
                               pad_id=vocab.pad_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
        nll, tokens = corpus_loss(self.model, batches, self.device, pad_id=vocab.pad_id)
        report["ppl"] = round(perplexity(nll, tokens), 2)
        return report


def _read_lines(handle: Iterable[str]) -> Iterable[str]:
    for line in handle:
        yield line.rstrip("\r\n")


def translate_command(args) -> int:
    """`attnmt translate RUN_DIR [-i IN] [-o OUT] [--beam K]`: one translation per input line."""
    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device)
    source = open(args.input, encoding="utf-8", errors="replace") if args.input else sys.stdin
    target = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    chunk_size = max(args.batch_size * 8, 1)
    try:
        chunk: list[str] = []
        for line in _read_lines(source):
            chunk.append(line)
            if len(chunk) >= chunk_size:
                _write(translator, chunk, args, target)
                chunk = []
        if chunk:
            _write(translator, chunk, args, target)
    finally:
        if args.input:
            source.close()
        if args.output:
            target.close()
    return 0


def _write(translator: Translator, lines: list[str], args, target) -> None:
    for result in translator.translate(lines, beam_size=args.beam, length_penalty=args.length_penalty,
                                       batch_size=args.batch_size):
        target.write(result.text.replace("\n", " ") + "\n")
    target.flush()

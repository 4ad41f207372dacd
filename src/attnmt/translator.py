"""Translator: load a trained run and translate sentences, with attention weights.

    from attnmt import Translator
    t = Translator.load("runs/multi30k_rnn")
    result = t.translate(["Ein Hund läuft ."], beam_size=5)[0]
    result.text, result.tokens, result.source_tokens, result.attention  # (tgt_len, src_len)

Any input is accepted: empty or whitespace-only lines give an empty translation, words unknown
to the vocabulary become <unk>, and inputs longer than `search.max_input_tokens` tokens (default
250) are cut there with a warning (and at 20 characters per allowed token before tokenizing);
the result's `warnings` says so. `n_best=K` fills `result.alternatives` with the K best.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

import torch
from torch import nn

from attnmt.config import Config, load_saved_config
from attnmt.data.batching import make_batches
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding import Alternative, TranslationResult, decode_sources
from attnmt.devices import resolve_device

__all__ = ["Alternative", "TranslationResult", "Translator", "translate_command", "evaluate_command"]

log = logging.getLogger(__name__)


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
        device = resolve_device(device or "auto", key="device")
        return cls(model, pipeline, cfg, device=device, run_dir=run_dir)

    def translate(self, sentences: Sequence[str] | str, *, beam_size: int | None = None,
                  length_penalty: float | None = None, batch_size: int = 64, layer: int | None = None,
                  head: int | None = None, n_best: int = 1) -> list[TranslationResult]:
        """Translate sentences (a list, or one string); beam_size 1 is greedy search.

        `layer` and `head` pick which cross-attention a Transformer reports (default: the mean).
        `n_best` (at most the beam size) fills each result's `alternatives`, best first.
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
                                  length_penalty=length_penalty, n_best=n_best)
        finally:
            if layer is not None or head is not None:
                self.model.set_attention_view(layer=None, head=None)

    def evaluate(self, split: str = "test_2016_flickr", *, beam_size: int | None = None,
                 length_penalty: float | None = None, batch_size: int = 128) -> dict:
        """BLEU, chrF (cased, detokenized; sacreBLEU signature), lowercased BLEUs and perplexity."""
        from attnmt.data.corpus import corpus_spec, load_corpus
        from attnmt.evaluation import corpus_loss, perplexity, score_translations

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


def evaluate_command(args) -> int:
    """`attnmt evaluate RUN_DIR [--split S] [--beam K]`: print scores as JSON."""
    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device)
    start = time.perf_counter()
    report = translator.evaluate(args.split, beam_size=args.beam, length_penalty=args.length_penalty,
                                 batch_size=args.batch_size)
    report["seconds"] = round(time.perf_counter() - start, 2)
    report["checkpoint"] = args.checkpoint
    print(json.dumps(report, indent=2, ensure_ascii=False))
    suffix = "" if args.checkpoint == "best" else "_" + Path(args.checkpoint).stem
    if args.length_penalty is not None:
        suffix += f"_lp{args.length_penalty:g}"
    out = Path(args.run_dir) / f"eval_{args.split}_beam{args.beam}{suffix}.json"
    try:
        from attnmt.checkpoint import write_json

        write_json(out, report)
    except OSError as err:  # a read-only run directory still gets its scores printed
        log.warning("could not write %s: %s", out, err)
    return 0

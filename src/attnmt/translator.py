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
from attnmt.decoding import Alternative, Engine, NativeEngine, ScoreResult, TranslationResult
from attnmt.devices import resolve_device
from attnmt.errors import AttnmtError

__all__ = ["Alternative", "ScoreResult", "TranslationResult", "Translator", "translate_command", "evaluate_command",
           "score_command"]

log = logging.getLogger(__name__)


ENGINES = ("native", "ctranslate2")


class Translator:
    """A trained model with its tokenizers and vocabularies, ready to translate, behind an engine.

    `engine` is the decoding engine (decoding.Engine); by default the native PyTorch one over
    `model`. With the CTranslate2 engine `model` is None.
    """

    def __init__(self, model: nn.Module | None, pipeline: TextPipeline, cfg: Config, *,
                 device: torch.device | str = "cpu", run_dir: Path | None = None, engine: Engine | None = None):
        self.model = model.to(device).eval() if model is not None else None
        self.pipeline = pipeline
        self.cfg = cfg
        self.device = torch.device(device)
        self.run_dir = run_dir
        if engine is None:
            if model is None:
                raise ValueError("Translator needs a model or an engine")
            engine = NativeEngine(self.model, pipeline, cfg.search, self.device)
        self.engine = engine

    @classmethod
    def load(cls, path: str | Path, *, checkpoint: str = "best", device: str | None = None,
             engine: str = "native") -> Translator:
        """Load a run directory written by `attnmt train` (safetensors + JSON; no pickle) with the
        native engine, or a folder written by `attnmt export` with engine="ctranslate2".

        Raises:
            AttnmtError: unknown engine, or a folder the engine cannot load (the message says
                which command makes one it can).
        """
        from attnmt.checkpoint import checkpoint_path, load_weights
        from attnmt.engines.ctranslate2 import is_export
        from attnmt.models import build_model

        path = Path(path)
        device = resolve_device(device or "auto", key="device")
        if engine not in ENGINES:
            raise AttnmtError(f"engine={engine!r}: expected one of {', '.join(ENGINES)}")
        if engine == "ctranslate2":
            if not is_export(path):
                raise AttnmtError(f"{path}: not a CTranslate2 export (no attnmt_export.json); make one with "
                                  f"`attnmt export {path} -o DIR` and load DIR")
            from attnmt.engines.ctranslate2 import load_export

            ct2_engine, cfg = load_export(path, device=device.type)
            return cls(None, ct2_engine.pipeline, cfg, device="cpu", run_dir=path, engine=ct2_engine)
        if is_export(path):
            raise AttnmtError(f"{path}: a CTranslate2 export holds no PyTorch weights; load it with "
                              f"engine='ctranslate2' (CLI: --engine ctranslate2), or load the run it came from")
        cfg = load_saved_config(path / "config.json")
        pipeline = TextPipeline.load(path)
        vocab = pipeline.tgt_vocab
        model = build_model(cfg.model, len(pipeline.src_vocab), len(vocab), pad_id=vocab.pad_id,
                            bos_id=vocab.bos_id, eos_id=vocab.eos_id)
        load_weights(model, checkpoint_path(path, checkpoint))
        return cls(model, pipeline, cfg, device=device, run_dir=path)

    def translate(self, sentences: Sequence[str] | str, *, beam_size: int | None = None,
                  length_penalty: float | None = None, batch_size: int = 64, layer: int | None = None,
                  head: int | None = None, n_best: int = 1, sampling_topk: int = 1,
                  sampling_temperature: float = 1.0, seed: int | None = None) -> list[TranslationResult]:
        """Translate sentences (a list, or one string); beam_size 1 is greedy search.

        `layer` and `head` pick which cross-attention a native Transformer reports (default: the
        mean); the CTranslate2 engine reports the layer chosen at export, averaged over heads.
        `n_best` (at most the beam size) fills each result's `alternatives`, best first.
        `sampling_topk` != 1 samples (with beam_size 1): from the K most probable tokens (0 = all)
        at `sampling_temperature`; `seed` makes it repeatable.
        """
        if isinstance(sentences, str):
            sentences = [sentences]
        beam = self.cfg.search.beam_size if beam_size is None else beam_size
        return self.engine.translate(list(sentences), beam_size=beam, length_penalty=length_penalty,
                                     batch_size=batch_size, n_best=n_best, layer=layer, head=head,
                                     sampling_topk=sampling_topk, sampling_temperature=sampling_temperature,
                                     seed=seed)

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64) -> list[ScoreResult]:
        """Forced decoding: each (source, translation) pair's log-probability (<eos> included),
        its length-normalized score and token count; in input order."""
        return self.engine.score(list(sources), list(targets), batch_size=batch_size)

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
        if self.model is not None:
            batches = make_batches(self.pipeline.encode_corpus(corpus), batch_size=batch_size, shuffle=False,
                                   pad_id=vocab.pad_id, bos_id=vocab.bos_id, eos_id=vocab.eos_id)
            nll, tokens = corpus_loss(self.model, batches, self.device, pad_id=vocab.pad_id)
        else:  # forced decoding through the engine gives the same sums
            scored = self.score(corpus.src, corpus.tgt, batch_size=batch_size)
            nll, tokens = -sum(r.log_prob for r in scored), sum(r.num_tokens for r in scored)
        report["engine"] = self.engine.name
        report["ppl"] = round(perplexity(nll, tokens), 2)
        return report


def _read_lines(handle: Iterable[str]) -> Iterable[str]:
    for line in handle:
        yield line.rstrip("\r\n")


def translate_command(args) -> int:
    """`attnmt translate RUN_DIR [-i IN] [-o OUT] [--beam K] [--n-best K] [--sampling-topk K]`:
    one translation per input line; with --n-best K > 1, K lines 'rank<TAB>score<TAB>text' per
    input line, then an empty line."""
    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device,
                                 engine=getattr(args, "engine", "native"))
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
    n_best, topk = getattr(args, "n_best", 1), getattr(args, "sampling_topk", 1)
    beam = args.beam if args.beam is not None else (1 if topk != 1 else 5)
    try:
        results = translator.translate(lines, beam_size=beam, length_penalty=args.length_penalty,
                                       batch_size=args.batch_size, n_best=n_best, sampling_topk=topk,
                                       sampling_temperature=getattr(args, "sampling_temperature", 1.0),
                                       seed=getattr(args, "seed", None))
    except ValueError as err:  # a bad combination of options: a user error, not a traceback
        raise AttnmtError(str(err)) from None
    for result in results:
        if n_best == 1:
            target.write(result.text.replace("\n", " ") + "\n")
            continue
        for rank, alt in enumerate(result.alternatives, 1):
            target.write(f"{rank}\t{alt.score:.6f}\t{alt.text.replace(chr(10), ' ')}\n")
        target.write("\n")
    target.flush()


def score_command(args) -> int:
    """`attnmt score RUN_DIR -i SOURCE -r TRANSLATION`: per line 'log_prob<TAB>normalized<TAB>tokens'
    (forced decoding; normalized = log_prob / tokens; tokens count <eos>)."""
    sources = _read_file(args.input)
    targets = _read_file(args.reference)
    if len(sources) != len(targets):
        raise AttnmtError(f"{args.input} has {len(sources)} lines, {args.reference} has {len(targets)}")
    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device,
                                 engine=getattr(args, "engine", "native"))
    target = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for result in translator.score(sources, targets, batch_size=args.batch_size):
            target.write(f"{result.log_prob:.6f}\t{result.normalized:.6f}\t{result.num_tokens}\n")
    finally:
        if args.output:
            target.close()
    return 0


def _read_file(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return list(_read_lines(handle))
    except OSError as err:
        raise AttnmtError(f"{path}: cannot read ({err.strerror})") from None


def evaluate_command(args) -> int:
    """`attnmt evaluate RUN_DIR [--split S] [--beam K]`: print scores as JSON."""
    translator = Translator.load(args.run_dir, checkpoint=args.checkpoint, device=args.device,
                                 engine=getattr(args, "engine", "native"))
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

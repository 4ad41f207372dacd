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

import logging
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from attnmt.config import Config
from attnmt.data.batching import make_batches
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding import Alternative, Engine, ScoreResult, TranslationResult
from attnmt.devices import resolve_device
from attnmt.engines.native import NativeEngine
from attnmt.errors import AttnmtError
from attnmt.run_dir import RunDir

__all__ = ["Alternative", "ScoreResult", "TranslationResult", "Translator"]

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
        run = RunDir(path)
        device = resolve_device(device or "auto", key="device")
        if engine not in ENGINES:
            raise AttnmtError(f"engine={engine!r}: expected one of {', '.join(ENGINES)}")
        if engine == "ctranslate2":
            from attnmt.engines.ctranslate2 import load_export

            ct2_engine, cfg = load_export(run.path, device=device.type)
            return cls(None, ct2_engine.pipeline, cfg, device="cpu", run_dir=run.path, engine=ct2_engine)
        run.require_run()
        cfg, pipeline = run.config(), run.pipeline()
        return cls(run.load_model(checkpoint, cfg, pipeline), pipeline, cfg, device=device, run_dir=run.path)

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

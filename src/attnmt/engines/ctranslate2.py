"""The CTranslate2 engine: translate and score with a folder written by `attnmt export`
(ctranslate2_export.py), with the same arguments and results as the native engine.

Shapes:
    batch: sentences; src_len, tgt_len: source / output tokens.

Attention: CTranslate2 returns the cross-attention of one decoder layer, averaged over its heads
(the layer is chosen at export: ``--attention-layer``, default the last); the native engine
can report any layer or head, or their mean.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from attnmt.config import Config, SearchConfig
from attnmt.data.batching import length_sorted_chunks
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding import (Alternative, ScoreResult, TranslationResult, check_decoding_args, empty_result,
                             encode_prefixes, encode_sources, prepare_pairs)
from attnmt.engines.ctranslate2_export import _ctranslate2
from attnmt.errors import AttnmtError
from attnmt.run_dir import RunDir
from attnmt.search import gnmt_penalty, output_budget

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the engine

def load_export(path: str | Path, *, device: str = "cpu") -> tuple[CTranslate2Engine, Config]:
    """Open a folder written by `export_run`: the engine and the run's config.

    Raises:
        AttnmtError: not an export, or CTranslate2 cannot read it.
    """
    ctranslate2 = _ctranslate2()
    run = RunDir(path)
    run.require_export()
    run.verify_all()  # the model, vocabularies and config as they were exported
    path, info, cfg, pipeline = run.path, run.export_info(), run.config(), run.pipeline()
    device = "cuda" if str(device).startswith("cuda") else "cpu"
    # on a CPU, the same threads as the rest of attnmt (torch.set_num_threads / train.num_threads)
    threads = torch.get_num_threads() if device == "cpu" else 0

    def open_model():
        return ctranslate2.Translator(str(path), device=device, inter_threads=1, intra_threads=threads)

    try:
        translator = open_model()
    except (RuntimeError, ValueError) as err:
        raise AttnmtError(f"{path}: CTranslate2 cannot load this model: {err}") from None
    engine = CTranslate2Engine(translator, pipeline, cfg.search, info, reopen=open_model)
    engine.intra_threads = threads
    return engine, cfg


class CTranslate2Engine:
    """Translate and score with an exported model; the same arguments and results as NativeEngine.

    Beam search: CTranslate2 normalizes finished hypotheses by length^alpha, not attnmt's GNMT
    penalty ((5 + len) / 6)^alpha. So that `length_penalty` means the same in both engines,
    beams run with alpha=0 (plain log-probs) and return their `beam_size` finished hypotheses,
    which are then ranked here by log_prob / gnmt_penalty(len + 1, alpha), as the native engine
    ranks its finished hypotheses; with alpha > 0 the two searches may still keep slightly
    different candidates (their stopping rules differ). Greedy search is the same algorithm in
    both. Output budgets (search.max_len_ratio / max_len_offset) are applied per sentence.
    """

    name = "ctranslate2"
    intra_threads = 0  # CPU threads per batch (load_export sets torch.get_num_threads()); 0 = CTranslate2's choice

    def __init__(self, translator, pipeline: TextPipeline, search_cfg: SearchConfig, info: dict, *,
                 reopen=None):
        self.translator = translator
        self.pipeline = pipeline
        self.search_cfg = search_cfg
        self.info = info
        self._reopen = reopen  # loads the model afresh: a seed takes effect only in a new translator

    def _sampler(self, seed: int | None):
        """The translator to sample with: CTranslate2's worker threads draw their random state when
        they start, so a seed needs a freshly loaded model (cheap next to a sampling job)."""
        import ctranslate2

        if seed is None or self._reopen is None:
            return self.translator
        ctranslate2.set_random_seed(seed)
        return self._reopen()

    def _source_tokens(self, ids: list[int]) -> list[str]:
        """The vocabulary's token for each id, so unknown words reach CTranslate2 as <unk>."""
        itos = self.pipeline.src_vocab.itos
        return [itos[i] for i in ids]

    def translate(self, sentences: Sequence[str], *, beam_size: int, length_penalty: float | None = None,
                  batch_size: int = 64, n_best: int = 1, layer: int | None = None, head: int | None = None,
                  sampling_topk: int = 1, sampling_temperature: float = 1.0,
                  seed: int | None = None, target_prefix: Sequence[str | None] | None = None) -> list[TranslationResult]:
        """As NativeEngine.translate; `layer`/`head` must be None or the exported attention layer
        (CTranslate2 returns that layer's attention averaged over heads); `target_prefix` is
        CTranslate2's own, with budgets raised to the prefix length + 1 as in search.py."""
        check_decoding_args(beam_size=beam_size, n_best=n_best, sampling_topk=sampling_topk,
                            sampling_temperature=sampling_temperature, length_penalty=length_penalty, seed=seed)
        exported, layers = self.info["attention_layer"], self.info["decoder_layers"]
        if head is not None or (layer is not None and not (-layers <= layer < layers and layer % layers == exported)):
            raise ValueError(f"the CTranslate2 engine reports the attention of decoder layer {exported} "
                             f"(chosen at export: attnmt export --attention-layer), averaged over heads; "
                             f"got layer={layer}, head={head}")
        translator = self._sampler(seed) if sampling_topk != 1 else self.translator
        cfg = self.search_cfg
        alpha = cfg.length_penalty if length_penalty is None else length_penalty
        warnings: list[list[str]] = [[] for _ in sentences]
        src_tokens, src_ids = encode_sources(self.pipeline, sentences, cfg, warnings)
        prefix_ids = encode_prefixes(self.pipeline, target_prefix, len(sentences), cfg, warnings)
        budgets = output_budget(torch.tensor([len(ids) for ids in src_ids]), cfg.max_len_ratio,
                                cfg.max_len_offset).tolist() if sentences else []
        budgets = [max(budget, len(ids) + 1) for budget, ids in zip(budgets, prefix_ids)]
        itos = self.pipeline.tgt_vocab.itos
        results: list[TranslationResult | None] = [None] * len(sentences)
        options = dict(beam_size=beam_size, num_hypotheses=beam_size if beam_size > 1 else n_best,
                       length_penalty=0.0, return_scores=True, return_attention=True, max_input_length=0,
                       min_decoding_length=0,
                       sampling_topk=sampling_topk, sampling_temperature=sampling_temperature)
        for chunk in length_sorted_chunks([len(ids) for ids in src_ids], batch_size):
            for group in _same_budget(chunk, budgets):  # CTranslate2 takes one budget per call
                prefixes = [[itos[t] for t in prefix_ids[i]] or None for i in group]
                found = translator.translate_batch([self._source_tokens(src_ids[i]) for i in group],
                                                   target_prefix=prefixes if any(prefixes) else None,
                                                   max_decoding_length=budgets[group[0]], **options)
                for i, result in zip(group, found):
                    results[i] = self._result(result, src_tokens[i], warnings[i], n_best, alpha,
                                              beam_size > 1, budgets[i], gnmt_penalty)
        return [r if r is not None else empty_result(src_tokens[i], warnings[i]) for i, r in enumerate(results)]

    def _result(self, found, source_tokens: list[str], warnings: list[str], n_best: int, alpha: float,
                rerank: bool, budget: int, penalty) -> TranslationResult:
        """One CTranslate2 result -> TranslationResult; beams re-ranked with the GNMT penalty."""
        tokenizer = self.pipeline.tgt_tokenizer
        hyps = []
        for tokens, log_prob, attention in zip(found.hypotheses, found.scores, found.attention):
            scored = len(tokens) + (1 if len(tokens) < budget else 0)  # eos, unless cut at the budget
            score = log_prob / penalty(scored, alpha) if rerank else log_prob
            hyps.append((score, tokens, attention))
        if rerank:
            hyps.sort(key=lambda h: h[0], reverse=True)
        alternatives = [Alternative(tokenizer.detokenize(list(tokens)), list(tokens), float(score),
                                    np.asarray(attention, dtype=np.float32).reshape(len(tokens), len(source_tokens)))
                        for score, tokens, attention in hyps[:n_best]]
        best = alternatives[0]
        return TranslationResult(best.text, best.tokens, source_tokens, best.attention, best.score, alternatives,
                                 warnings)

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64) -> list[ScoreResult]:
        """Forced decoding with CTranslate2's score_batch (per-token log-probabilities too; its
        score_batch returns no attention, so `attention` is None); an empty source has no score (nan)."""
        src_tokens, src_ids, tgt_tokens, tgt_ids, warnings = prepare_pairs(self.pipeline, sources, targets,
                                                                           self.search_cfg)
        itos = self.pipeline.tgt_vocab.itos
        log_probs = [float("nan")] * len(sources)
        token_log_probs: list[list[float]] = [[] for _ in sources]
        for chunk in length_sorted_chunks([len(ids) for ids in src_ids], batch_size):
            found = self.translator.score_batch([self._source_tokens(src_ids[i]) for i in chunk],
                                                [[itos[t] for t in tgt_ids[i]] for i in chunk], max_input_length=0)
            for i, result in zip(chunk, found):
                token_log_probs[i] = [float(x) for x in result.log_probs]
                log_probs[i] = float(sum(result.log_probs))
        return [ScoreResult(src_tokens[i], tgt_tokens[i], log_probs[i], len(tgt_ids[i]) + 1, warnings[i],
                            token_log_probs[i]) for i in range(len(sources))]


def _same_budget(chunk: list[int], budgets: list[int]) -> list[list[int]]:
    """Split a length-sorted chunk where the output budget changes."""
    groups: list[list[int]] = []
    for i in chunk:
        if groups and budgets[groups[-1][0]] == budgets[i]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups

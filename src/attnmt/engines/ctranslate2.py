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
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from attnmt.config import Config, SearchConfig
from attnmt.data.batching import length_sorted_chunks
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding.inputs import budget_lengths, encode_prefixes, encode_sources, prepare_pairs
from attnmt.decoding.options import DecodingOptions
from attnmt.decoding.results import Alternative, ScoreResult, TranslationResult, empty_result
from attnmt.decoding.search import gnmt_penalty, output_budget
from attnmt.engines.ctranslate2_export import import_ctranslate2
from attnmt.errors import AttnmtError
from attnmt.run_dir import RunDir

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the engine

def load_export(path: str | Path, *, device: str = "cpu", inter_threads: int | None = None,
                intra_threads: int | None = None, use_vmap: bool | None = None) -> tuple[CTranslate2Engine, Config]:
    """Open a folder written by `export_run`: the engine and the run's config.

    `use_vmap`: decode with the export's vocabulary map (vmap.txt, `attnmt export --vocab-map`;
    engines/vocab_map.py); default: when the export has one. True without one is an AttnmtError.

    Threads on a CPU: by default `inter_threads` = torch.get_num_threads() (the threads of the
    rest of attnmt) translating sub-batches side by side, each with `intra_threads=1`; measured
    faster than one batch at a time on all threads (docs/performance.md, "CTranslate2 engine").
    The environment variables ATTNMT_CT2_INTER_THREADS / ATTNMT_CT2_INTRA_THREADS override the
    defaults where no argument is given. On a GPU: one translator thread, CTranslate2's choice.

    Raises:
        AttnmtError: not an export, or CTranslate2 cannot read it.
        ValueError: a thread count below 0 (inter_threads below 1).
    """
    ctranslate2 = import_ctranslate2()
    run = RunDir(path)
    run.require_export()
    run.verify_all()  # the model, vocabularies and config as they were exported
    path, info, cfg, pipeline = run.path, run.export_info(), run.config(), run.pipeline()
    device = "cuda" if str(device).startswith("cuda") else "cpu"
    inter, intra = thread_settings(device, inter_threads, intra_threads)

    def open_model():
        # CTranslate2 sets the process's OpenMP thread count to intra_threads when it opens a
        # model, which torch reads as its own: without the restore, torch and the default
        # inter_threads of the next translator opened in this process drop to 1 (measured:
        # a second export decoded at 0.55x, docs/performance.md).
        torch_threads = torch.get_num_threads()
        try:
            return ctranslate2.Translator(str(path), device=device, inter_threads=inter, intra_threads=intra)
        finally:
            torch.set_num_threads(torch_threads)

    try:
        translator = open_model()
    except (RuntimeError, ValueError) as err:
        raise AttnmtError(f"{path}: CTranslate2 cannot load this model: {err}") from None
    has_vmap = (path / "vmap.txt").is_file()
    if use_vmap and not has_vmap:
        raise AttnmtError(f"{path}: has no vocabulary map (vmap.txt): export with --vocab-map, or decode without it")
    engine = CTranslate2Engine(translator, pipeline, cfg.search, info, reopen=open_model)
    engine.inter_threads, engine.intra_threads = inter, intra
    engine.use_vmap = has_vmap if use_vmap is None else use_vmap
    if engine.use_vmap:
        log.info("%s: decoding with its vocabulary map (vmap.txt)", path)
    return engine, cfg


def thread_settings(device: str, inter_threads: int | None = None,
                    intra_threads: int | None = None) -> tuple[int, int]:
    """(inter_threads, intra_threads) for a translator: arguments, else the environment
    (ATTNMT_CT2_INTER_THREADS / ATTNMT_CT2_INTRA_THREADS), else torch's threads x 1 on a CPU
    and 1 x 0 (CTranslate2's choice) on a GPU.

    Raises:
        ValueError: inter_threads < 1 or intra_threads < 0 (naming the value and its source).
    """
    cpu = device == "cpu"
    defaults = {"inter_threads": torch.get_num_threads() if cpu else 1, "intra_threads": 1 if cpu else 0}
    given = {"inter_threads": inter_threads, "intra_threads": intra_threads}
    chosen = {}
    for name, lowest in (("inter_threads", 1), ("intra_threads", 0)):
        value, source = given[name], name
        if value is None and os.environ.get(f"ATTNMT_CT2_{name.upper()}"):
            source = f"ATTNMT_CT2_{name.upper()}"
            try:
                value = int(os.environ[source])
            except ValueError:
                raise ValueError(f"{source}={os.environ[source]!r} must be an integer") from None
        if value is None:
            value = defaults[name]
        if value < lowest:
            raise ValueError(f"{source}={value} must be >= {lowest}")
        chosen[name] = value
    return chosen["inter_threads"], chosen["intra_threads"]


class CTranslate2Engine:
    """Translate and score with an exported model; the same arguments and results as NativeEngine.

    Beam search: CTranslate2 normalizes finished hypotheses by length^alpha, not attnmt's GNMT
    penalty ((5 + len) / 6)^alpha. So that `length_penalty` means the same in both engines,
    beams run with alpha=0 (plain log-probs) and return their `beam_size` finished hypotheses,
    which are then ranked here by log_prob / gnmt_penalty(len + 1, alpha), as the native engine
    ranks its finished hypotheses; with alpha > 0 the two searches may still keep slightly
    different candidates (their stopping rules differ). Greedy search is the same algorithm in
    both.

    Output budgets (search.max_len_ratio / max_len_offset) are per sentence, but CTranslate2 takes
    one per call: all sentences of a call go into one translate_batch with the largest budget.
    Greedy and sampled hypotheses are then cut to their own sentence's budget (exact: a sentence's
    tokens do not depend on the budget). A beam with a hypothesis that reached the sentence's own
    budget (its last step) is decoded again with it, unless its budget is the call's largest (one
    sentence alone: never); one whose hypotheses all ended earlier is kept, which is exact unless
    its search ran past its own budget while returning only shorter hypotheses (possible, rare:
    budgets are 2 x source + 10 tokens by default).
    """

    name = "ctranslate2"
    inter_threads = 1  # sub-batches translated side by side (load_export: torch.get_num_threads() on a CPU)
    intra_threads = 0  # CPU threads per sub-batch (load_export: 1 on a CPU); 0 = CTranslate2's choice
    use_vmap = False  # decode with the export's vocabulary map (load_export: when it has one)

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

    def _suppressed(self) -> dict:
        """translate_batch's option for the tokens the target vocabulary suppresses (none: no option)."""
        suppressed = self.pipeline.tgt_vocab.suppressed
        return {"suppress_sequences": [[token] for token in suppressed]} if suppressed else {}

    def _source_tokens(self, ids: list[int]) -> list[str]:
        """The vocabulary's token for each id, so unknown words reach CTranslate2 as <unk>."""
        itos = self.pipeline.src_vocab.itos
        return [itos[i] for i in ids]

    def translate(self, sentences: Sequence[str], options: DecodingOptions, *,
                  target_prefix: Sequence[str | None] | None = None, constraints=None,
                  target_lang: str | None = None) -> list[TranslationResult]:
        """As NativeEngine.translate; `options.layer`/`head` must be None or the exported attention
        layer (CTranslate2 returns that layer's attention averaged over heads); `target_prefix` is
        CTranslate2's own, with budgets raised to the prefix length + 1 as in decoding/search.py; a
        multilingual model's language token (`target_lang`) goes before the source tokens or
        first in that target prefix, and is left out of the results. CTranslate2 has no
        constrained search: `constraints` are refused (Translator says so before they get here)."""
        if constraints is not None and any(constraints):
            raise ValueError("constraints: the ctranslate2 engine has no lexically constrained search")
        options = options.with_defaults(self.search_cfg)
        beam_size, n_best, layer, head = options.beam_size, options.n_best, options.layer, options.head
        batch_size = options.batch_size
        exported, layers = self.info["attention_layer"], self.info["decoder_layers"]
        if head is not None or (layer is not None and not (-layers <= layer < layers and layer % layers == exported)):
            raise ValueError(f"the CTranslate2 engine reports the attention of decoder layer {exported} "
                             f"(chosen at export: attnmt export --attention-layer), averaged over heads; "
                             f"got layer={layer}, head={head}")
        translator = self._sampler(options.seed) if options.sampling else self.translator
        cfg = self.search_cfg
        alpha = options.length_penalty
        warnings: list[list[str]] = [[] for _ in sentences]
        before, first = self.pipeline.language_ids(target_lang)
        src_tokens, src_ids = encode_sources(self.pipeline, sentences, cfg, warnings)
        lengths = budget_lengths(self.pipeline, sentences, src_ids, cfg, extra=len(before))
        src_ids = [before + ids if ids else ids for ids in src_ids]
        prefix_ids = [first + ids for ids in encode_prefixes(self.pipeline, target_prefix, len(sentences), cfg,
                                                             warnings)]
        budgets = output_budget(torch.tensor(lengths), cfg.max_len_ratio,
                                cfg.max_len_offset).tolist() if sentences else []
        budgets = [max(budget, len(ids) + 1) for budget, ids in zip(budgets, prefix_ids)]
        settings = dict(beam_size=beam_size, num_hypotheses=beam_size if beam_size > 1 else n_best,
                        length_penalty=0.0, return_scores=True, return_attention=True, max_input_length=0,
                        min_decoding_length=0,
                        sampling_topk=options.sampling_topk, sampling_temperature=options.sampling_temperature,
                        use_vmap=self.use_vmap, **self._suppressed())
        todo = [i for i, ids in enumerate(src_ids) if ids]  # an empty source gets an empty result
        largest = max((budgets[i] for i in todo), default=1)
        found = dict(zip(todo, self._decode(translator, todo, src_ids, prefix_ids, largest, batch_size, settings)))
        if beam_size == 1:  # greedy / sampling: each sentence's tokens do not depend on the budget
            self._cut_to_budgets(found, src_ids, prefix_ids, budgets)
        else:  # a beam may end differently with a smaller budget: those that reached it run again
            # (a hypothesis of budget - 1 tokens ended with eos at the budget's last step); one whose
            # budget is the call's largest already ran with it
            again = [i for i in todo if budgets[i] < largest
                     and any(len(tokens) + 1 >= budgets[i] for tokens, _, _ in found[i])]
            for budget in sorted({budgets[i] for i in again}):
                group = [i for i in again if budgets[i] == budget]
                found.update(zip(group, self._decode(translator, group, src_ids, prefix_ids, budget,
                                                     batch_size, settings)))
            self._fix_first_attention(found, src_ids, batch_size)
        results = [self._result(found[i], src_tokens[i], warnings[i], n_best, alpha, beam_size > 1, budgets[i],
                                gnmt_penalty, skip=(len(first), len(before)))
                   if i in found else empty_result(src_tokens[i], warnings[i]) for i in range(len(sentences))]
        return results

    def _decode(self, translator, group: list[int], src_ids: list[list[int]], prefix_ids: list[list[int]],
                budget: int, batch_size: int, options: dict) -> list[list[tuple[list[str], float, list]]]:
        """One translate_batch over the sentences `group` with one output budget: CTranslate2 sorts
        them by length into sub-batches of at most `batch_size`, small enough that every
        inter-op thread gets one. Returns each sentence's (tokens, log_prob, attention) hypotheses."""
        if not group:
            return []
        itos = self.pipeline.tgt_vocab.itos
        prefixes = [[itos[t] for t in prefix_ids[i]] or None for i in group]
        workers = max(1, getattr(translator, "num_translators", 1))
        found = translator.translate_batch([self._source_tokens(src_ids[i]) for i in group],
                                           target_prefix=prefixes if any(prefixes) else None,
                                           max_batch_size=max(1, min(batch_size, math.ceil(len(group) / workers))),
                                           batch_type="examples", max_decoding_length=budget, **options)
        return [list(zip(r.hypotheses, r.scores, r.attention)) for r in found]

    def _fix_first_attention(self, found: dict, src_ids: list[list[int]], batch_size: int) -> None:
        """Replace the first step's attention of every beam hypothesis with that of a one-step
        greedy decode. CTranslate2 4.x on a CPU runs a beam's first step unexpanded and then
        gathers its attention with the sentence's index into the expanded (batch * beam) rows:
        sentence b of a sub-batch gets the first attention row of sentence b // beam_size
        (decoding.cc, BeamSearch::search; the tokens and scores are right). The first step is
        the same for every beam of a sentence, and the same as greedy search's first step."""
        group = [i for i, hyps in found.items() if any(len(tokens) for tokens, _, _ in hyps)]
        first = self._decode(self.translator, group, src_ids, [[] for _ in src_ids], 1, batch_size,
                             dict(beam_size=1, num_hypotheses=1, length_penalty=0.0, return_scores=True,
                                  return_attention=True, max_input_length=0, min_decoding_length=1,
                                  **self._suppressed()))
        for i, hyps in zip(group, first):
            row = hyps[0][2][0]  # (src_len,) the first step's attention
            found[i] = [(tokens, log_prob, [row, *attention[1:]] if tokens else attention)
                        for tokens, log_prob, attention in found[i]]

    def _cut_to_budgets(self, found: dict, src_ids: list[list[int]], prefix_ids: list[list[int]],
                        budgets: list[int]) -> None:
        """Greedy or sampled hypotheses decoded with the call's largest budget, cut in place to
        their own sentence's budget, as search.greedy_search ends them: a hypothesis of at least
        `budget` tokens keeps its first `budget` tokens and no eos, and its log-prob becomes the
        sum of those tokens' log-probs (prefix tokens count 0, as when decoding), read from
        score_batch. The rest ended with eos within their budget and stay as they are."""
        cut = [(i, k) for i, hyps in found.items() for k, (tokens, _, _) in enumerate(hyps)
               if len(tokens) >= budgets[i]]
        if not cut:
            return
        itos = self.pipeline.tgt_vocab.itos
        scored = self.translator.score_batch([self._source_tokens(src_ids[i]) for i, _ in cut],
                                             [found[i][k][0][:budgets[i]] for i, k in cut], max_input_length=0,
                                             max_batch_size=64)
        for (i, k), result in zip(cut, scored):
            tokens, _, attention = found[i][k]
            budget, forced = budgets[i], len(prefix_ids[i])
            assert [itos[t] for t in prefix_ids[i]] == list(tokens[:forced])
            found[i][k] = (tokens[:budget], float(sum(result.log_probs[forced:budget])), attention[:budget])
        for i in {i for i, _ in cut}:
            found[i].sort(key=lambda hyp: hyp[1], reverse=True)  # best first, as CTranslate2 returns them

    def _result(self, hyps: list[tuple[list[str], float, list]], source_tokens: list[str], warnings: list[str],
                n_best: int, alpha: float, rerank: bool, budget: int, penalty,
                skip: tuple[int, int] = (0, 0)) -> TranslationResult:
        """One sentence's hypotheses -> TranslationResult; beams re-ranked with the GNMT penalty;
        `skip`: the language tokens forced first and put before the source, left out."""
        first, before = skip
        ranked = []
        for tokens, log_prob, attention in hyps:
            scored = len(tokens) + (1 if len(tokens) < budget else 0)  # eos, unless cut at the budget
            score = log_prob / penalty(scored, alpha) if rerank else log_prob
            weights = np.asarray(attention, dtype=np.float32).reshape(len(tokens), before + len(source_tokens))
            ranked.append((score, list(tokens)[first:], weights[first:, before:], len(tokens) >= budget, log_prob))
        if rerank:
            ranked.sort(key=lambda h: h[0], reverse=True)
        alternatives = [Alternative(self.pipeline.target_text(tokens), tokens, float(score), attention,
                                    log_prob=float(log_prob))
                        for score, tokens, attention, _, log_prob in ranked[:n_best]]
        best = alternatives[0]
        return TranslationResult(best.text, best.tokens, source_tokens, best.attention, best.score, alternatives,
                                 warnings, log_prob=float(ranked[0][4]), beam_scores=[float(h[0]) for h in ranked],
                                 beam_tokens=[h[1] for h in ranked],
                                 at_length_bound=ranked[0][3])  # not ended by the model

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64,
              target_lang: str | None = None) -> list[ScoreResult]:
        """Forced decoding with CTranslate2's score_batch (per-token log-probabilities too; its
        score_batch returns no attention, so `attention` is None); an empty source has no score
        (nan). A language token forced first in the output is not scored (as NativeEngine.score)."""
        src_tokens, src_ids, tgt_tokens, tgt_ids, warnings = prepare_pairs(self.pipeline, sources, targets,
                                                                           self.search_cfg)
        before, first = self.pipeline.language_ids(target_lang)
        src_ids = [before + ids if ids else ids for ids in src_ids]
        tgt_ids = [first + ids for ids in tgt_ids]
        itos = self.pipeline.tgt_vocab.itos
        log_probs = [float("nan")] * len(sources)
        token_log_probs: list[list[float]] = [[] for _ in sources]
        for chunk in length_sorted_chunks([len(ids) for ids in src_ids], batch_size):
            found = self.translator.score_batch([self._source_tokens(src_ids[i]) for i in chunk],
                                                [[itos[t] for t in tgt_ids[i]] for i in chunk], max_input_length=0)
            for i, result in zip(chunk, found):
                token_log_probs[i] = [float(x) for x in result.log_probs][len(first):]
                log_probs[i] = float(sum(token_log_probs[i]))
        return [ScoreResult(src_tokens[i], tgt_tokens[i], log_probs[i], len(tgt_ids[i]) + 1 - len(first), warnings[i],
                            token_log_probs[i]) for i in range(len(sources))]


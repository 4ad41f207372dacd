"""CTranslate2: export an attnmt Transformer run (a TransformerSpec filled from its weights) and
translate / score with the exported model.

Shapes:
    batch: sentences; src_len, tgt_len: source / output tokens; hidden: d_model; vocab.

Export (`export_run`, `attnmt export RUN_DIR -o DIR`) fills CTranslate2's spec in model order,
one small ``set_*`` helper per layer, like CTranslate2's own fairseq converter. What differs
from the spec's defaults, and how it is mapped:

    * Q/K/V: attnmt keeps separate query/key/value projections; CTranslate2 fuses them
      (self-attention: one [q; k; v] linear; cross-attention: q, then one [k; v] linear).
    * pre- or post-norm: ``model.pre_norm`` picks the spec's layout; pre-norm also has the final
      encoder / decoder LayerNorms. LayerNorm epsilon is torch's 1e-5 (CTranslate2's
      default differs), written into the model's config.
    * shared source/target embeddings and the tied output layer: the same arrays are written
      (CTranslate2 stores aliased variables once); the output layer's bias is always written.
    * embedding scale: ``sqrt(d_model)``, written as a number.
    * positions: attnmt's sinusoidal table interleaves sin/cos (even/odd dimensions) while
      CTranslate2 generates [sin | cos] halves, so the table (or the learned one) is written out.
    * special tokens: <unk>, <bos> (decoder start), <eos>; no bos/eos added to the source.
    * vocabularies: the run's source and target token lists, in id order.

The exported folder also holds the run's config.json (as attnmt_config.json: CTranslate2's
config.json is its own), tokenizers.json (+ sentencepiece models)
and vocab.*.json, and attnmt_export.json (what was exported, how), so it translates raw text on
its own: ``Translator.load(DIR, engine="ctranslate2")``.

Attention: CTranslate2 returns the cross-attention of one decoder layer, averaged over its heads
(the layer is chosen at export: ``--attention-layer``, default the last); the native engine
can report any layer or head, or their mean.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from attnmt.checkpoint import read_json, write_json
from attnmt.config import Config, SearchConfig, load_saved_config
from attnmt.data.pipeline import TextPipeline
from attnmt.decoding import (Alternative, ScoreResult, TranslationResult, check_decoding_args,
                             empty_result, encode_sources, encode_targets)
from attnmt.errors import AttnmtError
from attnmt.search import output_budget

log = logging.getLogger(__name__)

EXPORT_INFO = "attnmt_export.json"
RUN_CONFIG = "attnmt_config.json"  # CTranslate2 owns config.json
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "float32")


def _ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise AttnmtError("the ctranslate2 package is not installed: pip install ctranslate2") from None
    return ctranslate2


# ----------------------------------------------------------------------------- export: set_* helpers

def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().to("cpu", torch.float32).contiguous().numpy()


def set_linear(spec, linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def set_fused_linear(spec, linears) -> None:
    """One linear whose outputs are the given linears' outputs, stacked (q, k, v order)."""
    spec.weight = np.concatenate([_array(lin.weight) for lin in linears], axis=0)
    if linears[0].bias is not None:
        spec.bias = np.concatenate([_array(lin.bias) for lin in linears], axis=0)


def set_layer_norm(spec, norm) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias)


def set_self_attention(spec, attn, norm) -> None:
    """Self-attention: fused [q; k; v] then the output projection, with its LayerNorm."""
    set_layer_norm(spec.layer_norm, norm)
    set_fused_linear(spec.linear[0], [attn.query_proj, attn.key_proj, attn.value_proj])
    set_linear(spec.linear[1], attn.out_proj)


def set_cross_attention(spec, attn, norm) -> None:
    """Encoder-decoder attention: q, fused [k; v], then the output projection."""
    set_layer_norm(spec.layer_norm, norm)
    set_linear(spec.linear[0], attn.query_proj)
    set_fused_linear(spec.linear[1], [attn.key_proj, attn.value_proj])
    set_linear(spec.linear[2], attn.out_proj)


def set_feed_forward(spec, ff, norm) -> None:
    set_layer_norm(spec.layer_norm, norm)
    set_linear(spec.linear_0, ff.in_proj)
    set_linear(spec.linear_1, ff.out_proj)


def set_input_layers(spec, model, embedding) -> None:
    """Token embeddings, their scale and the explicit position table."""
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _array(embedding.weight)
    spec.scale_embeddings = float(model.embed_scale)
    table = model.pos_embed.weight if model.positions == "learned" else model.pos_table
    spec.position_encodings.encodings = _array(table)  # (max_positions, hidden)


def set_encoder(spec, model) -> None:
    set_input_layers(spec, model, model.src_embed)
    for layer_spec, layer in zip(spec.layer, model.encoder_layers):
        set_self_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_norm)
        set_feed_forward(layer_spec.ffn, layer.feed_forward, layer.ff_norm)
    if model.pre_norm:
        set_layer_norm(spec.layer_norm, model.encoder_norm)


def set_decoder(spec, model) -> None:
    set_input_layers(spec, model, model.tgt_embed)
    for layer_spec, layer in zip(spec.layer, model.decoder_layers):
        set_self_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_norm)
        set_cross_attention(layer_spec.attention, layer.cross_attn, layer.cross_attn_norm)
        set_feed_forward(layer_spec.ffn, layer.feed_forward, layer.ff_norm)
    if model.pre_norm:
        set_layer_norm(spec.layer_norm, model.decoder_norm)
    set_linear(spec.projection, model.generator)  # tied: the target embedding, plus the bias


def build_spec(model, pipeline: TextPipeline, *, attention_layer: int = -1):
    """A CTranslate2 TransformerSpec holding `model`'s weights and `pipeline`'s vocabularies.

    Raises:
        AttnmtError: attention_layer outside the decoder's layers.
    """
    from ctranslate2.specs import transformer_spec

    layers, heads = len(model.decoder_layers), model.heads
    if not -layers <= attention_layer < layers:
        raise AttnmtError(f"--attention-layer {attention_layer} out of range for {layers} decoder layers")
    encoder = transformer_spec.TransformerEncoderSpec(len(model.encoder_layers), heads, pre_norm=model.pre_norm)
    decoder = transformer_spec.TransformerDecoderSpec(
        layers, heads, pre_norm=model.pre_norm, alignment_layer=attention_layer % layers,
        alignment_heads=heads)  # all heads, averaged
    spec = transformer_spec.TransformerSpec(encoder, decoder)
    set_encoder(spec.encoder, model)
    set_decoder(spec.decoder, model)
    src_vocab, tgt_vocab = pipeline.src_vocab, pipeline.tgt_vocab
    spec.register_source_vocabulary(list(src_vocab.itos))
    spec.register_target_vocabulary(list(tgt_vocab.itos))
    config = spec.config
    config.unk_token, config.bos_token, config.eos_token = tgt_vocab.UNK, tgt_vocab.BOS, tgt_vocab.EOS
    config.decoder_start_token = tgt_vocab.BOS
    config.add_source_bos = config.add_source_eos = False
    config.layer_norm_epsilon = float(model.encoder_layers[0].ff_norm.eps)
    return spec


def export_run(run_dir: str | Path, output_dir: str | Path, *, checkpoint: str = "best",
               quantization: str = "float32", attention_layer: int = -1, force: bool = False) -> Path:
    """Write a CTranslate2 model directory for a Transformer run, with its tokenizers and config.

    Raises:
        AttnmtError: not a Transformer run, unknown quantization, output exists without force.
    """
    from attnmt.checkpoint import checkpoint_path, load_weights
    from attnmt.models import build_model

    ctranslate2 = _ctranslate2()
    run_dir, output_dir = Path(run_dir), Path(output_dir)
    if quantization not in QUANTIZATIONS:
        raise AttnmtError(f"--quantization {quantization!r}: expected one of {', '.join(QUANTIZATIONS)}")
    cfg = load_saved_config(run_dir / "config.json")
    if cfg.model.arch != "transformer":
        raise AttnmtError(f"{run_dir / 'config.json'}: model.arch={cfg.model.arch}: CTranslate2 has no "
                          f"RNN models; only Transformer runs can be exported (the native engine translates "
                          f"this run)")
    if output_dir.exists() and any(output_dir.iterdir()) and not force:
        raise AttnmtError(f"{output_dir}: exists and is not empty (use --force to replace it)")
    pipeline = TextPipeline.load(run_dir)
    vocab = pipeline.tgt_vocab
    model = build_model(cfg.model, len(pipeline.src_vocab), len(vocab), pad_id=vocab.pad_id,
                        bos_id=vocab.bos_id, eos_id=vocab.eos_id)
    weights = checkpoint_path(run_dir, checkpoint)
    load_weights(model, weights)
    model.eval()
    spec = build_spec(model, pipeline, attention_layer=attention_layer)
    spec.validate()
    spec.optimize(quantization=quantization)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.", dir=output_dir.parent))
    try:
        spec.save(str(staging))
        pipeline.save(staging)
        shutil.copyfile(run_dir / "config.json", staging / RUN_CONFIG)
        write_json(staging / EXPORT_INFO, {
            "format": "ctranslate2", "ctranslate2_version": ctranslate2.__version__,
            "quantization": quantization, "attention_layer": attention_layer % len(model.decoder_layers),
            "decoder_layers": len(model.decoder_layers),
            "run_dir": str(run_dir), "checkpoint": str(weights)})
        if output_dir.exists():
            shutil.rmtree(output_dir)
        staging.rename(output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("exported %s (%s) -> %s", weights, quantization, output_dir)
    return output_dir


def is_export(path: str | Path) -> bool:
    """True for a folder written by `export_run`."""
    return (Path(path) / EXPORT_INFO).is_file()


def export_command(args) -> int:
    """`attnmt export RUN_DIR -o DIR [--quantization Q] [--attention-layer L]`; without -o the
    folder is RUN_DIR-ct2-Q beside the run."""
    if args.format != "ctranslate2":
        raise AttnmtError(f"--format {args.format!r}: only 'ctranslate2' is supported")
    output = args.output or str(args.run_dir).rstrip("/") + f"-ct2-{args.quantization}"
    out = export_run(args.run_dir, output, checkpoint=args.checkpoint, quantization=args.quantization,
                     attention_layer=args.attention_layer, force=args.force)
    print(f"exported {args.run_dir} ({args.quantization}) -> {out}")
    return 0


# ----------------------------------------------------------------------------- the engine

def load_export(path: str | Path, *, device: str = "cpu") -> tuple[CTranslate2Engine, Config]:
    """Open a folder written by `export_run`: the engine and the run's config.

    Raises:
        AttnmtError: not an export, or CTranslate2 cannot read it.
    """
    ctranslate2 = _ctranslate2()
    path = Path(path)
    info = read_json(path / EXPORT_INFO)
    cfg = load_saved_config(path / RUN_CONFIG)
    pipeline = TextPipeline.load(path)
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
                  seed: int | None = None) -> list[TranslationResult]:
        """As NativeEngine.translate; `layer`/`head` must be None or the exported attention layer
        (CTranslate2 returns that layer's attention averaged over heads)."""
        from attnmt.search import gnmt_penalty

        check_decoding_args(beam_size=beam_size, n_best=n_best, sampling_topk=sampling_topk,
                            sampling_temperature=sampling_temperature)
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
        budgets = output_budget(torch.tensor([len(ids) for ids in src_ids]), cfg.max_len_ratio,
                                cfg.max_len_offset).tolist() if sentences else []
        results: list[TranslationResult | None] = [None] * len(sentences)
        todo = sorted((i for i in range(len(sentences)) if src_ids[i]), key=lambda i: len(src_ids[i]))
        options = dict(beam_size=beam_size, num_hypotheses=beam_size if beam_size > 1 else n_best,
                       length_penalty=0.0, return_scores=True, return_attention=True, max_input_length=0,
                       min_decoding_length=0,
                       sampling_topk=sampling_topk, sampling_temperature=sampling_temperature)
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            for group in _same_budget(chunk, budgets):  # CTranslate2 takes one budget per call
                found = translator.translate_batch([self._source_tokens(src_ids[i]) for i in group],
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
        alternatives = [Alternative(tokenizer.detokenize(list(tokens)), list(tokens), float(score))
                        for score, tokens, _ in hyps[:n_best]]
        best = alternatives[0]
        attention = np.asarray(hyps[0][2], dtype=np.float32).reshape(len(best.tokens), len(source_tokens))
        return TranslationResult(best.text, best.tokens, source_tokens, attention, best.score, alternatives,
                                 warnings)

    def score(self, sources: Sequence[str], targets: Sequence[str], *, batch_size: int = 64) -> list[ScoreResult]:
        """Forced decoding with CTranslate2's score_batch; an empty source has no score (nan)."""
        from attnmt.decoding import prepare_pairs

        src_tokens, src_ids, tgt_tokens, tgt_ids, warnings = prepare_pairs(self.pipeline, sources, targets,
                                                                           self.search_cfg)
        itos = self.pipeline.tgt_vocab.itos
        log_probs = [float("nan")] * len(sources)
        todo = sorted((i for i in range(len(sources)) if src_ids[i]), key=lambda i: len(src_ids[i]))
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            found = self.translator.score_batch([self._source_tokens(src_ids[i]) for i in chunk],
                                                [[itos[t] for t in tgt_ids[i]] for i in chunk], max_input_length=0)
            for i, result in zip(chunk, found):
                log_probs[i] = float(sum(result.log_probs))
        return [ScoreResult(src_tokens[i], tgt_tokens[i], log_probs[i], len(tgt_ids[i]) + 1, warnings[i])
                for i in range(len(sources))]


def _same_budget(chunk: list[int], budgets: list[int]) -> list[list[int]]:
    """Split a length-sorted chunk where the output budget changes."""
    groups: list[list[int]] = []
    for i in chunk:
        if groups and budgets[groups[-1][0]] == budgets[i]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups

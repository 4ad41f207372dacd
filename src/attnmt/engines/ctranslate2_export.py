"""CTranslate2: export an attnmt Transformer run (a TransformerSpec filled from its weights) and
translate / score with the exported model.

Shapes:
    batch: sentences; src_len, tgt_len: source / output tokens; hidden: d_model; vocab.

Export (`export_run`, `attnmt export RUN_DIR -o DIR`) fills CTranslate2's spec in model order, one
small ``set_*`` helper per layer; what differs from the spec's defaults and how it is mapped, and what
the exported folder holds: docs/decoding.md.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import torch

from attnmt.data.pipeline import TextPipeline
from attnmt.errors import AttnmtError
from attnmt.files import check_folder_output, staged_folder, write_json, writer_lock, writing
from attnmt.run_dir import EXPORT_CONFIG, EXPORT_INFO, RunDir

log = logging.getLogger(__name__)

QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "float32")
KIND = f"a CTranslate2 export ({EXPORT_INFO})"  # `--force` replaces what such an export recorded writing (files.WRITTEN)
# what an export folder holds: CTranslate2's model, config and vocabularies, attnmt's pipeline
# (tokenizers.json, vocab.*.json, sentencepiece *.model), attnmt_*.json and checksums.json (names,
# not a rule for deleting: only files.WRITTEN's record says what an export wrote)
EXPORT_FILES = ("model.bin", "config.json", "*_vocabulary.json", "*_vocabulary.txt", "tokenizers.json", "vocab.*.json",
                "*.model", "attnmt_*.json", "checksums.json", "vmap.txt")


def export_owns(name: str) -> bool:
    """Whether `name` is a file `attnmt export` writes into its folder."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in EXPORT_FILES)


def import_ctranslate2():
    """The ctranslate2 module (an optional dependency), imported when first needed.

    Raises:
        AttnmtError: it is not installed, with the pip command that installs it.
    """
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

    from ctranslate2.specs import common_spec

    layers, heads = len(model.decoder_layers), model.heads
    if not -layers <= attention_layer < layers:
        raise AttnmtError(f"--attention-layer {attention_layer} out of range for {layers} decoder layers")
    activation = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                  "swish": common_spec.Activation.SWISH}[model.activation]
    encoder = transformer_spec.TransformerEncoderSpec(len(model.encoder_layers), heads, pre_norm=model.pre_norm,
                                                      activation=activation)
    decoder = transformer_spec.TransformerDecoderSpec(
        layers, heads, pre_norm=model.pre_norm, activation=activation, alignment_layer=attention_layer % layers,
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
               quantization: str = "float32", attention_layer: int = -1, force: bool = False,
               vocab_map=None) -> Path:
    """Write a CTranslate2 model directory for a Transformer run, with its tokenizers and config;
    with `vocab_map` (a vocab_map.VocabMapSettings) also vmap.txt, the vocabulary shortlist built
    from the run's training data (engines/vocab_map.py), which the engine then uses.

    Raises:
        AttnmtError: not a Transformer run, unknown quantization, output exists without force.
    """
    ctranslate2 = import_ctranslate2()
    run, output_dir = RunDir(run_dir), Path(output_dir)
    if quantization not in QUANTIZATIONS:
        raise AttnmtError(f"--quantization {quantization!r}: expected one of {', '.join(QUANTIZATIONS)}")
    run.require_run()
    cfg = run.config()
    if cfg.model.arch != "transformer":
        raise AttnmtError(f"{run.config_path}: model.arch={cfg.model.arch}: CTranslate2 has no "
                          f"RNN models; only Transformer runs can be exported (the native engine translates "
                          f"this run)")
    check_folder_output(output_dir, {"run": run.path}, force=force, kind=KIND)  # before the lock is made
    target = Path(os.path.abspath(output_dir))
    with writer_lock(target.parent, name=f".{target.name}.lock"):  # one export into it at a time
        return _export(run, cfg, output_dir, ctranslate2, checkpoint, quantization, attention_layer, vocab_map)


def _export(run: RunDir, cfg, output_dir: Path, ctranslate2, checkpoint: str, quantization: str,
            attention_layer: int, vocab_map=None) -> Path:
    from attnmt.engines.vocab_map import VMAP_FILE, build_vocab_map, write_vocab_map

    vmap_lines = build_vocab_map(run, vocab_map) if vocab_map is not None else None  # before any writing
    pipeline = run.pipeline()
    weights = run.weights(checkpoint)
    model = run.load_model(checkpoint, cfg, pipeline)
    spec = build_spec(model, pipeline, attention_layer=attention_layer)
    spec.validate()
    spec.optimize(quantization=quantization)
    kept = f"{output_dir} is as it was" if output_dir.exists() else f"nothing was written to {output_dir}"
    with staged_folder(output_dir, kind=KIND) as staging:  # its files recorded: --force deletes only them
        with writing(staging, kept):  # a full disk: one line naming the file, the output untouched
            spec.save(str(staging))
            pipeline.save(staging)
            shutil.copyfile(run.config_path, staging / EXPORT_CONFIG)
            if vmap_lines is not None:
                write_vocab_map(staging / VMAP_FILE, vmap_lines)
            write_json(staging / EXPORT_INFO, {
                "format": "ctranslate2", "ctranslate2_version": ctranslate2.__version__,
                "quantization": quantization, "attention_layer": attention_layer % len(model.decoder_layers),
                "decoder_layers": len(model.decoder_layers),
                "run_dir": str(run.path), "checkpoint": str(weights),
                **({"vocab_map": {"top_k": vocab_map.top_k, "frequent": vocab_map.frequent,
                                  "source_tokens": len(vmap_lines) - 1}} if vmap_lines is not None else {})})
            RunDir(staging).record_checksums(sorted(p.name for p in staging.iterdir() if p.is_file()))
    log.info("exported %s (%s) -> %s", weights, quantization, output_dir)
    return output_dir

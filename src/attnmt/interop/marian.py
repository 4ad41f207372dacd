"""Marian (OPUS-MT) checkpoints in the Hugging Face `transformers` layout <-> attnmt runs, read
and written without `transformers`.

Shapes:
    vocab: the shared vocabulary; hidden: d_model; ff_dim: the feed-forward size.

`import_marian(FOLDER, RUN)` reads a `MarianMTModel` folder (config.json, model.safetensors or
pytorch_model.bin, source.spm, target.spm, vocab.json; tokenizer_config.json and
generation_config.json when present) and writes an attnmt run directory: config.json, the two
sentencepiece models, the vocabulary in Marian's own order, the weights as
checkpoints/imported.safetensors, best.json / last.json pointing at them, and checksums.json.
The model is attnmt's own Transformer, configured as Marian's: post-norm, the activation,
sqrt(d_model) embedding scale, sin|cos position halves, the output bias, the decoder starting
from the pad token, sources ending with </s>, and pad never produced (`bad_words_ids`).

`export_marian(RUN, FOLDER)` writes the same layout back from a run whose configuration Marian
can express. docs/interop.md maps every weight and setting.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnmt.untrusted import load_json
from attnmt.bounds import BEAM
from attnmt.checkpoint import load_weights_file, save_tensors, save_weights
from attnmt.config import Config, config_from_dict, save_config
from attnmt.data.corpus import MULTI30K_LANGS
from attnmt.data.pipeline import TextPipeline
from attnmt.data.tokenizers import SentencePieceTokenizer
from attnmt.data.vocab import Vocab
from attnmt.direction import LANG_CODE_EXAMPLES, is_language
from attnmt.errors import AttnmtError, CheckpointError
from attnmt.files import (atomic_copy, check_folder_output, refuse_overwrite, staged_folder, write_json,
                          writer_lock)
from attnmt.models.transformer import sinusoidal_positions
from attnmt.run_dir import CONFIG, RunDir, model_for

log = logging.getLogger(__name__)

WEIGHTS = "checkpoints/imported.safetensors"  # in the run directory
HF_EXPORT_INFO = "attnmt_hf_export.json"  # in an `attnmt export --format hf` folder: which run, which weights
HF_EXPORT_FILES = ("model.safetensors", "config.json", "generation_config.json", "vocab.json", "source.spm",
                   "target.spm", "tokenizer_config.json", HF_EXPORT_INFO)  # all it writes
HF_KIND = f"a Marian export ({HF_EXPORT_INFO})"  # what --force replaces: files.refuse_replacing's record of one
SOURCE_MODEL, TARGET_MODEL = "source.model", "target.model"  # the sentencepiece models, in the run directory
MAX_JSON_BYTES = 64 * 1024 * 1024  # vocab.json of an OPUS-MT model is about 1.5 MB
# transformers' ACT2FN names -> attnmt's model.activation
ACTIVATIONS = {"swish": "swish", "silu": "swish", "gelu": "gelu", "relu": "relu"}
# settings of BART-family configs that Marian leaves off; True would need layers attnmt lacks
UNSUPPORTED_FLAGS = ("normalize_before", "normalize_embedding", "add_final_layer_norm", "add_bias_logits",
                     "scale_attention")


# ----------------------------------------------------------------------------- the weight map

def layer_weight_names(enc_layers: int, dec_layers: int) -> list[tuple[str, str]]:
    """(attnmt name, transformers name) of every layer tensor: attention projections, LayerNorms,
    feed-forward (the embeddings, output layer and its bias are mapped by the callers)."""
    pairs: list[tuple[str, str]] = []

    def linear(ours: str, theirs: str) -> None:
        pairs.extend((f"{ours}.{p}", f"{theirs}.{p}") for p in ("weight", "bias"))

    def attention(ours: str, theirs: str) -> None:
        for a, b in (("query_proj", "q_proj"), ("key_proj", "k_proj"), ("value_proj", "v_proj"),
                     ("out_proj", "out_proj")):
            linear(f"{ours}.{a}", f"{theirs}.{b}")

    def feed_forward(ours: str, theirs: str) -> None:
        linear(f"{ours}.feed_forward.in_proj", f"{theirs}.fc1")
        linear(f"{ours}.feed_forward.out_proj", f"{theirs}.fc2")
        linear(f"{ours}.ff_norm", f"{theirs}.final_layer_norm")

    for i in range(enc_layers):
        ours, theirs = f"encoder_layers.{i}", f"model.encoder.layers.{i}"
        attention(f"{ours}.self_attn", f"{theirs}.self_attn")
        linear(f"{ours}.self_attn_norm", f"{theirs}.self_attn_layer_norm")
        feed_forward(ours, theirs)
    for i in range(dec_layers):
        ours, theirs = f"decoder_layers.{i}", f"model.decoder.layers.{i}"
        attention(f"{ours}.self_attn", f"{theirs}.self_attn")
        linear(f"{ours}.self_attn_norm", f"{theirs}.self_attn_layer_norm")
        attention(f"{ours}.cross_attn", f"{theirs}.encoder_attn")
        linear(f"{ours}.cross_attn_norm", f"{theirs}.encoder_attn_layer_norm")
        feed_forward(ours, theirs)
    return pairs


# ----------------------------------------------------------------------------- reading the folder

def _read_json(path: Path, *, required: bool = True) -> dict:
    """A JSON object from `path` (bounded in size and depth); {} for a missing optional file.

    Raises:
        CheckpointError: missing (when required), too large, not UTF-8 JSON, or not an object.
    """
    if not path.is_file():
        if required:
            raise CheckpointError(f"{path}: not found (is {path.parent} a Marian model folder from the Hugging "
                                  f"Face hub? It holds config.json, model.safetensors, source.spm, target.spm "
                                  f"and vocab.json)")
        return {}
    with open(path, "rb") as f:
        data = f.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise CheckpointError(f"{path}: larger than {MAX_JSON_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CheckpointError(f"{path}: not UTF-8 text: {err}") from None
    found = load_json(text, source=str(path), error=CheckpointError)
    if not isinstance(found, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(found).__name__}")
    return found


class _Fields:
    """The fields of one JSON file, read with their types checked; errors name the file and field."""

    def __init__(self, values: dict, path: Path):
        self.values, self.path = values, path

    def error(self, name: str, problem: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: {name}={self.values.get(name)!r:.80} {problem}")

    def int(self, name: str, default: Any = ..., *, low: int = 1) -> int:
        if name not in self.values and default is not ...:
            return default
        value = self.values.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise self.error(name, f"must be an integer >= {low}" if name in self.values else "is missing")
        return value

    def float(self, name: str, default: float) -> float:
        value = self.values.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise self.error(name, "must be a number in [0, 1)")
        return float(value)

    def bool(self, name: str, default: bool) -> bool:
        value = self.values.get(name, default)
        if not isinstance(value, bool):
            raise self.error(name, "must be true or false")
        return value

    def str(self, name: str, default: str | None) -> str | None:
        value = self.values.get(name, default)
        if value is not None and not isinstance(value, str):
            raise self.error(name, "must be a string")
        return value


@dataclass
class MarianSettings:
    """What config.json (and generation_config.json) say, checked: attnmt's model section and the
    special tokens' ids."""

    model: dict
    vocab_size: int
    pad_id: int
    eos_id: int
    start_id: int           # decoder_start_token_id (Marian: the pad id)
    suppressed_ids: list[int]  # bad_words_ids of one token
    beam_size: int | None
    share: bool
    tie: bool


def read_settings(folder: Path) -> MarianSettings:
    """config.json (+ generation_config.json) -> MarianSettings.

    Raises:
        CheckpointError: another architecture, or a setting attnmt's Transformer cannot express;
            names the file and the field.
    """
    path = folder / "config.json"
    f = _Fields(_read_json(path), path)
    if f.values.get("model_type") != "marian":
        raise f.error("model_type", "is not 'marian': only Marian (OPUS-MT) models can be imported")
    architectures = f.values.get("architectures")
    if architectures is not None and (not isinstance(architectures, list) or "MarianMTModel" not in architectures):
        raise f.error("architectures", "does not name MarianMTModel: only the translation model can be imported")
    for flag in UNSUPPORTED_FLAGS:
        if f.bool(flag, False):
            raise f.error(flag, "is not supported (attnmt's imported Transformer is post-norm, with no extra "
                                "LayerNorm on the embeddings or the stacks)")
    if not f.bool("static_position_embeddings", True):
        raise f.error("static_position_embeddings", "is not supported: learned positions are not Marian's")
    activation = f.str("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        raise f.error("activation_function", f"is not supported (supported: {', '.join(ACTIVATIONS)})")
    heads = f.int("encoder_attention_heads")
    if f.int("decoder_attention_heads") != heads:
        raise f.error("decoder_attention_heads", f"differs from encoder_attention_heads={heads}: attnmt's "
                                                 f"Transformer has one head count")
    ff_dim = f.int("encoder_ffn_dim")
    if f.int("decoder_ffn_dim") != ff_dim:
        raise f.error("decoder_ffn_dim", f"differs from encoder_ffn_dim={ff_dim}: attnmt's Transformer has one "
                                         f"feed-forward size")
    vocab_size = f.int("vocab_size")
    share = f.bool("share_encoder_decoder_embeddings", True)
    if not share and f.int("decoder_vocab_size", vocab_size) != vocab_size:
        raise f.error("decoder_vocab_size", f"differs from vocab_size={vocab_size}: separate source and target "
                                            f"vocabularies are not supported")
    for name in ("encoder_layerdrop", "decoder_layerdrop"):
        if f.float(name, 0.0) != 0.0:
            raise f.error(name, "is not supported (attnmt has no layer drop): set it to 0")
    pad_id, eos_id = f.int("pad_token_id", low=0), f.int("eos_token_id", low=0)
    start_id = f.int("decoder_start_token_id", pad_id, low=0)
    for name, value in (("pad_token_id", pad_id), ("eos_token_id", eos_id), ("decoder_start_token_id", start_id)):
        if value >= vocab_size:
            raise f.error(name, f"is outside the vocabulary of vocab_size={vocab_size}")
    if start_id == eos_id:
        raise f.error("decoder_start_token_id", "is the eos token: attnmt starts decoding from pad or its own token")
    generation = folder / "generation_config.json"
    g = _Fields(_read_json(generation, required=False), generation)
    suppressed = []
    for source in (f, g):
        bad = source.values.get("bad_words_ids")
        if bad is None:
            continue
        if not isinstance(bad, list) or not all(isinstance(b, list) and len(b) == 1 and isinstance(b[0], int)
                                                and not isinstance(b[0], bool) and 0 <= b[0] < vocab_size for b in bad):
            raise source.error("bad_words_ids", "is not supported: only single tokens of the vocabulary can be "
                                                "banned (attnmt suppresses tokens, not sequences)")
        suppressed = list(dict.fromkeys(suppressed + [b[0] for b in bad]))  # in order, each once
    beams = g.values.get("num_beams", f.values.get("num_beams"))
    model = {
        "arch": "transformer", "d_model": f.int("d_model"), "heads": heads, "ff_dim": ff_dim,
        "enc_layers": f.int("encoder_layers"), "dec_layers": f.int("decoder_layers"),
        "dropout": f.float("dropout", 0.1), "attn_dropout": f.float("attention_dropout", 0.0),
        "ff_dropout": f.float("activation_dropout", 0.0), "activation": ACTIVATIONS[activation],
        "positions": "sinusoidal_halves", "pre_norm": False, "scale_embeddings": f.bool("scale_embedding", False),
        "share_embeddings": share, "tie_embeddings": f.bool("tie_word_embeddings", True)}
    return MarianSettings(model, vocab_size, pad_id, eos_id, start_id, suppressed,
                          beams if isinstance(beams, int) and not isinstance(beams, bool) and beams > 0 else None,
                          share, model["tie_embeddings"])


def read_vocab(folder: Path, settings: MarianSettings) -> Vocab:
    """vocab.json ({token: id}, ids 0..vocab_size-1) as a Vocab in Marian's order, with its specials.

    Raises:
        CheckpointError: not such a mapping, the wrong size, or the specials missing; names the file.
    """
    tokenizer_path = folder / "tokenizer_config.json"
    t = _Fields(_read_json(tokenizer_path, required=False), tokenizer_path)
    if t.bool("separate_vocabs", False):
        raise t.error("separate_vocabs", "is not supported: attnmt imports Marian models with one vocabulary")
    path = folder / "vocab.json"
    mapping = _read_json(path)
    ids = sorted(mapping.values(), key=lambda i: (not isinstance(i, int), i if isinstance(i, int) else 0))
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids) or ids != list(range(len(ids))):
        raise CheckpointError(f"{path}: expected {{token: id}} with the ids 0..{len(mapping) - 1}, each once")
    if len(ids) != settings.vocab_size:
        raise CheckpointError(f"{path}: holds {len(ids)} tokens, but config.json says vocab_size="
                              f"{settings.vocab_size}")
    tokens = [""] * len(ids)
    for token, i in mapping.items():
        tokens[i] = token
    unk = t.str("unk_token", "<unk>")
    if unk not in mapping:
        raise t.error("unk_token", f"is not in {path}")
    specials = {"pad": tokens[settings.pad_id], "unk": unk, "bos": tokens[settings.start_id],
                "eos": tokens[settings.eos_id]}
    try:
        return Vocab(tokens, specials=specials, suppressed=[tokens[i] for i in settings.suppressed_ids])
    except ValueError as err:
        raise CheckpointError(f"{path}: {err}") from None


def read_tensors(folder: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The checkpoint's tensors as float32: model.safetensors, else pytorch_model.bin loaded with
    torch.load(weights_only=True) (a pickle that needs more is refused: it could run code).

    Raises:
        CheckpointError: neither file, sharded weights, or a file that cannot be read safely.
    """
    safetensors, pickle = folder / "model.safetensors", folder / "pytorch_model.bin"
    if safetensors.is_file():
        tensors, path = load_weights_file(safetensors), safetensors
    elif pickle.is_file():
        path = pickle
        try:
            tensors = torch.load(pickle, map_location="cpu", weights_only=True)
        except Exception as err:  # UnpicklingError for code; anything else for a damaged file
            raise CheckpointError(f"{pickle}: refused: it cannot be loaded with torch.load(weights_only=True) "
                                  f"({type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}); "
                                  f"convert it to model.safetensors with a tool you trust") from None
        if not isinstance(tensors, dict) or not all(isinstance(v, torch.Tensor) for v in tensors.values()):
            raise CheckpointError(f"{pickle}: expected a state dict of tensors")
    elif any(folder.glob("*.index.json")):
        raise CheckpointError(f"{folder}: sharded weights (*.index.json) are not supported: OPUS-MT models come "
                              f"in one model.safetensors")
    else:
        raise CheckpointError(f"{folder}: no model.safetensors or pytorch_model.bin")
    out = {}
    for name, tensor in tensors.items():
        if tensor.is_floating_point():
            tensor = tensor.float()
            if not bool(torch.isfinite(tensor).all()):
                raise CheckpointError(f"{path}: {name} holds NaN or infinite values")
        out[name] = tensor
    return out, path


# ----------------------------------------------------------------------------- import

def _take(tensors: dict[str, torch.Tensor], names: tuple[str, ...], path: Path, why: str) -> torch.Tensor:
    """The first of `names` in the checkpoint; every other one present must hold the same values
    (tied weights that transformers may store several times)."""
    found = [(name, tensors[name]) for name in names if name in tensors]
    if not found:
        raise CheckpointError(f"{path}: none of {', '.join(names)} ({why})")
    first_name, first = found[0]
    for name, other in found[1:]:
        if other.shape != first.shape or not torch.equal(other, first):
            raise CheckpointError(f"{path}: {name} differs from {first_name}, but the config ties them ({why})")
    return first


def marian_state_dict(tensors: dict[str, torch.Tensor], settings: MarianSettings, path: Path) -> dict:
    """attnmt's state dict (TransformerSeq2Seq names) from a Marian checkpoint's tensors."""
    m = settings.model
    # the tensors transformers' forward uses: each stack's embed_tokens (saved files may keep only
    # model.shared.weight, the tensor they are tied to)
    src, tgt = (_take(tensors, (own,) if own in tensors else ("model.shared.weight",), path, f"the {side}'s embeddings")
                for own, side in (("model.encoder.embed_tokens.weight", "encoder"),
                                  ("model.decoder.embed_tokens.weight", "decoder")))
    # shared when config.json says so and the two tensors are one (transformers 5 unties them,
    # shared or not, when tie_word_embeddings is false)
    m["share_embeddings"] = settings.share and src.shape == tgt.shape and torch.equal(src, tgt)
    state = {"src_embed.weight": src, "tgt_embed.weight": tgt}
    if settings.tie:
        if "lm_head.weight" in tensors and not torch.equal(tensors["lm_head.weight"], state["tgt_embed.weight"]):
            raise CheckpointError(f"{path}: lm_head.weight differs from the target embeddings, but config.json "
                                  f"says tie_word_embeddings=true")
        state["generator.weight"] = state["tgt_embed.weight"]
    else:
        state["generator.weight"] = _take(tensors, ("lm_head.weight",), path, "tie_word_embeddings is false")
    bias = tensors.get("final_logits_bias", torch.zeros(1, settings.vocab_size))  # transformers: zeros if absent
    state["generator.bias"] = bias.reshape(-1)
    for ours, theirs in layer_weight_names(m["enc_layers"], m["dec_layers"]):
        state[ours] = _take(tensors, (theirs,), path, "a layer of the config's size")
    for name in ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"):
        if name not in tensors:  # transformers no longer saves them: they are the formula's
            continue
        table = sinusoidal_positions(tensors[name].shape[0], m["d_model"], halves=True)
        if tensors[name].shape != table.shape or not torch.allclose(tensors[name], table, atol=1e-5):
            raise CheckpointError(f"{path}: {name} is not Marian's sinusoidal table (sin | cos halves): "
                                  f"trained positions are not supported")
    return state


def _languages(folder: Path, src_lang: str | None, tgt_lang: str | None) -> tuple[str, str]:
    """The language pair: given, else tokenizer_config.json's source_lang / target_lang."""
    path = folder / "tokenizer_config.json"
    t = _Fields(_read_json(path, required=False), path)
    given_src, given_tgt = bool(src_lang), bool(tgt_lang)
    src_lang = src_lang or t.str("source_lang", None)
    tgt_lang = tgt_lang or t.str("target_lang", None)
    if not src_lang or not tgt_lang:
        raise AttnmtError(f"{path}: names no source_lang / target_lang: give the language pair "
                          f"(attnmt import --src-lang de --tgt-lang en)")
    for lang, given, field in ((src_lang, given_src, "source_lang"), (tgt_lang, given_tgt, "target_lang")):
        if not is_language(lang):  # the run's data.src_lang / tgt_lang: one language-code rule (direction.py)
            where = f"--{field[:3]}-lang" if given else f"{path}: {field}"
            raise AttnmtError(f"{where}={lang!r:.60} is not a language code ({LANG_CODE_EXAMPLES}): give the "
                              f"language pair (attnmt import --src-lang de --tgt-lang en)")
    return src_lang, tgt_lang


def imported_config(settings: MarianSettings, src_lang: str, tgt_lang: str, vocab_size: int, source: str) -> Config:
    """The run's config: the model as Marian's, sentencepiece on both sides, corpus Multi30k when
    it has the pair (so that `attnmt evaluate` works at once), else none. Its output budget counts
    the source's pieces as typed (search.budget_in_lower_case false), as Marian and transformers
    count them: a model trained on what the web holds answers capitals in capitals."""
    multi30k = src_lang in MULTI30K_LANGS and tgt_lang in MULTI30K_LANGS and src_lang != tgt_lang
    raw = {"data": {"corpus": "multi30k" if multi30k else "none", "src_lang": src_lang, "tgt_lang": tgt_lang,
                    "tokenizer": "sentencepiece", "spm_joint": False, "spm_vocab_size": vocab_size},
           "model": settings.model, "search": {"budget_in_lower_case": False}}
    if settings.beam_size is not None:
        raw["search"]["beam_size"] = min(settings.beam_size, BEAM.high)
    return config_from_dict(raw, source=source)


def import_marian(folder: str | Path, run_dir: str | Path, *, src_lang: str | None = None,
                  tgt_lang: str | None = None, overwrite: bool = False) -> RunDir:
    """Write the attnmt run directory `run_dir` from the Marian model folder `folder`.

    Raises:
        AttnmtError: the folder is not an importable Marian model (naming the file and field), or
            `run_dir` holds a run and `overwrite` is False.
    """
    folder, run = Path(folder), RunDir(run_dir)
    if not folder.is_dir():
        raise AttnmtError(f"{folder}: not a folder (download one with `huggingface-cli download "
                          f"Helsinki-NLP/opus-mt-de-en --local-dir opus-mt-de-en`)")
    settings = read_settings(folder)
    vocab = read_vocab(folder, settings)
    src_lang, tgt_lang = _languages(folder, src_lang, tgt_lang)
    tensors, weights_path = read_tensors(folder)
    state = marian_state_dict(tensors, settings, weights_path)
    for side in ("source", "target"):
        SentencePieceTokenizer(folder / f"{side}.spm")  # refused here, before the run is written, if not a model
    cfg = imported_config(settings, src_lang, tgt_lang, len(vocab), f"{folder / 'config.json'} (as attnmt's config)")
    refuse_overwrite(run.path, {}, {"Marian folder": folder})
    run.check_new(resume=False, overwrite=overwrite)
    # everything is checked before the first write: a refused import leaves RUN_DIR as it was
    model = model_for(cfg, TextPipeline(SentencePieceTokenizer(folder / "source.spm"),
                                        SentencePieceTokenizer(folder / "target.spm"), vocab, vocab, source_eos=True))
    own = model.state_dict()
    for name, tensor in state.items():
        if tensor.shape != own[name].shape:
            raise CheckpointError(f"{weights_path}: the tensor for attnmt's {name} has shape {tuple(tensor.shape)}; "
                                  f"config.json's sizes give {tuple(own[name].shape)}")
    model.load_state_dict(state, strict=True)
    if overwrite:
        run.clear()
    run.path.mkdir(parents=True, exist_ok=True)
    for side, name in (("source", SOURCE_MODEL), ("target", TARGET_MODEL)):
        atomic_copy(folder / f"{side}.spm", run.path / name)
    pipeline = TextPipeline(SentencePieceTokenizer(run.path / SOURCE_MODEL), SentencePieceTokenizer(run.path / TARGET_MODEL),
                            vocab, vocab, source_eos=True)
    pipeline.save(run.path)
    save_config(cfg, run.path / CONFIG)
    (run.path / "checkpoints").mkdir(exist_ok=True)
    digest = save_weights(model, run.path / WEIGHTS, metadata={"imported_from": str(folder)})
    run.record_checksums([CONFIG, *run.pipeline_files()])
    info = {"file": WEIGHTS, "sha256": digest, "imported_from": str(folder.resolve()), "format": "marian"}
    run.write_pointer("best", info)
    run.write_pointer("last", info)
    log.info("imported %s (%s-%s, %d tokens, %d+%d layers) -> %s", folder, src_lang, tgt_lang, len(vocab),
             cfg.model.enc_layers, cfg.model.dec_layers, run.path)
    return run


# ----------------------------------------------------------------------------- export

def marian_expressible(cfg: Config, pipeline: TextPipeline) -> list[str]:
    """Why a run cannot be written as a Marian model (empty: it can)."""
    m, problems = cfg.model, []
    if m.arch != "transformer":
        problems.append(f"model.arch={m.arch!r} (Marian is a Transformer)")
        return problems
    if m.pre_norm:
        problems.append("model.pre_norm=true (MarianMTModel is post-norm)")
    if m.positions != "sinusoidal_halves":
        problems.append(f"model.positions={m.positions!r} (MarianMTModel has sinusoidal_halves only)")
    if pipeline.src_vocab != pipeline.tgt_vocab:
        problems.append("different source and target vocabularies (MarianTokenizer has one vocab.json)")
    if not all(isinstance(t, SentencePieceTokenizer) for t in (pipeline.src_tokenizer, pipeline.tgt_tokenizer)):
        problems.append(f"data.tokenizer={cfg.data.tokenizer!r} (MarianTokenizer is sentencepiece on both sides)")
    elif any(t.lowercase for t in (pipeline.src_tokenizer, pipeline.tgt_tokenizer)):
        problems.append("data.lowercase=true (MarianTokenizer gives the model the text as it is)")
    if not pipeline.source_eos:
        problems.append("sources without </s> (MarianTokenizer ends every source with eos; the run was trained "
                        "without it)")
    return problems


def export_marian(run_dir: str | Path, output_dir: str | Path, *, checkpoint: str = "best",
                  force: bool = False) -> Path:
    """Write a folder that `MarianMTModel.from_pretrained` and `MarianTokenizer.from_pretrained`
    load and that translates as the run does (greedy and beam, length_penalty=0).

    Raises:
        AttnmtError: the run's configuration is not one Marian can express (each reason named),
            or the output exists without `force`.
    """
    run, output_dir = RunDir(run_dir), Path(output_dir)
    run.require_run()
    cfg, pipeline = run.config(), run.pipeline()
    problems = marian_expressible(cfg, pipeline)
    if problems:
        raise AttnmtError(f"{run.path}: cannot be written as a Marian model: {'; '.join(problems)}")
    check_folder_output(output_dir, {"run": run.path}, force=force, kind=HF_KIND)  # before the lock is made
    target = Path(os.path.abspath(output_dir))
    with writer_lock(target.parent, name=f".{target.name}.lock"):  # one export into it at a time
        _write_marian(run, cfg, pipeline, checkpoint, output_dir)
    log.info("exported %s as a Marian model -> %s", run.path, output_dir)
    return output_dir


def _write_marian(run: RunDir, cfg: Config, pipeline: TextPipeline, checkpoint: str, output_dir: Path) -> None:
    """The Marian folder, written into a staging folder renamed into `output_dir`'s place."""
    model = run.load_model(checkpoint, cfg, pipeline)
    m, vocab = cfg.model, pipeline.tgt_vocab
    with staged_folder(output_dir, kind=HF_KIND) as staging:  # its files recorded: --force deletes only them
        save_tensors(marian_tensors(model, m.share_embeddings), staging / "model.safetensors",
                     metadata={"format": "pt"})
        write_json(staging / "config.json", marian_config(cfg, model, vocab))
        write_json(staging / "generation_config.json", {
            "decoder_start_token_id": vocab.bos_id, "pad_token_id": vocab.pad_id, "eos_token_id": vocab.eos_id,
            "forced_eos_token_id": None, "num_beams": cfg.search.beam_size, "max_length": model.max_positions,
            **({"bad_words_ids": [[i] for i in vocab.suppressed_ids]} if vocab.suppressed_ids else {})})
        write_json(staging / "vocab.json", {token: i for i, token in enumerate(vocab.itos)})
        for side, tok in (("source", pipeline.src_tokenizer), ("target", pipeline.tgt_tokenizer)):
            shutil.copyfile(tok.model_file, staging / f"{side}.spm")
        write_json(staging / "tokenizer_config.json", {
            "tokenizer_class": "MarianTokenizer", "source_lang": cfg.data.src_lang, "target_lang": cfg.data.tgt_lang,
            "unk_token": vocab.UNK, "eos_token": vocab.EOS, "pad_token": vocab.PAD, "model_max_length": 512,
            "separate_vocabs": False})
        write_json(staging / HF_EXPORT_INFO, {"format": "hf", "run_dir": str(run.path),
                                              "checkpoint": str(run.weights(checkpoint))})


def marian_tensors(model, share: bool) -> dict[str, torch.Tensor]:
    """transformers' state dict (each tensor its own copy: safetensors stores no aliases)."""
    own = model.state_dict()
    out = {theirs: own[ours] for ours, theirs in layer_weight_names(len(model.encoder_layers),
                                                                    len(model.decoder_layers))}
    out["model.encoder.embed_tokens.weight"] = own["src_embed.weight"]
    out["model.decoder.embed_tokens.weight"] = own["tgt_embed.weight"]
    if share:
        out["model.shared.weight"] = own["src_embed.weight"]
    out["lm_head.weight"] = own["generator.weight"]
    out["final_logits_bias"] = own["generator.bias"].reshape(1, -1)
    return {name: t.detach().to("cpu", torch.float32).contiguous().clone() for name, t in out.items()}


def marian_config(cfg: Config, model, vocab: Vocab) -> dict:
    """config.json of the exported MarianMTModel."""
    m = cfg.model
    activation = {"swish": "swish", "gelu": "gelu", "relu": "relu"}[m.activation]
    return {
        "model_type": "marian", "architectures": ["MarianMTModel"], "vocab_size": len(vocab),
        "decoder_vocab_size": len(vocab), "d_model": m.d_model, "encoder_layers": m.enc_layers,
        "decoder_layers": m.dec_layers, "encoder_attention_heads": m.heads, "decoder_attention_heads": m.heads,
        "encoder_ffn_dim": m.ff_dim, "decoder_ffn_dim": m.ff_dim, "activation_function": activation,
        "dropout": m.dropout, "attention_dropout": m.attn_dropout,
        "activation_dropout": m.dropout if m.ff_dropout is None else m.ff_dropout,
        "max_position_embeddings": model.max_positions, "scale_embedding": m.scale_embeddings,
        "share_encoder_decoder_embeddings": m.share_embeddings, "tie_word_embeddings": m.tie_embeddings,
        "pad_token_id": vocab.pad_id, "eos_token_id": vocab.eos_id, "decoder_start_token_id": vocab.bos_id,
        "forced_eos_token_id": None, "bos_token_id": None, "is_encoder_decoder": True,
        "init_std": 1 / math.sqrt(m.d_model)}

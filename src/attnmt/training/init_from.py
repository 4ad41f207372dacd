"""`train.init_from: RUN`: a new run that starts from another run's weights (an `attnmt import`ed
model or an attnmt run), with that run's tokenizers and vocabularies.

The new config's model and tokenizer keys describe the same model and pipeline: a key left at
its default takes the init run's value, a key set to another value than the init run's is a
conflict (`resolve_init_from` names every one). Dropout rates may differ: they only shape
training. The resolved config is the one the new run saves.

One exception makes a student: a Transformer's `model.enc_layers` and `model.dec_layers` may be
smaller than the init run's. The new stack starts from a copy of some of its layers, spread
evenly with the first and the last kept (`kept_layers`), the shrink-and-fine-tune of Shleifer &
Rush (2020, "Pre-trained Summarization Distillation"): a shallow-decoder student that starts from
its teacher's embeddings, encoder and output layer, then learns from the teacher's translations.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torch import nn

from attnmt.checkpoint import load_state, load_weights_file
from attnmt.config import Config, DataConfig, ModelConfig
from attnmt.data.pipeline import TextPipeline
from attnmt.errors import AttnmtError, ConfigError
from attnmt.run_dir import RunDir

TRAINING_ONLY = ("dropout", "attn_dropout", "ff_dropout")  # model keys a fine-tuning run may change
SHRINKABLE = {"enc_layers": "encoder_layers", "dec_layers": "decoder_layers"}  # key -> its layers' weight prefix
PIPELINE_KEYS = ("src_lang", "tgt_lang", "tokenizer", "lowercase", "spm_model_type", "spm_vocab_size", "spm_joint",
                 "min_freq", "max_vocab")  # data keys that decide the pipeline the init run brings


def init_run(cfg: Config) -> RunDir:
    """The run `train.init_from` names, checked to be one.

    Raises:
        ConfigError: no such run, naming train.init_from.
    """
    run = RunDir(Path(cfg.train.init_from))
    try:
        run.require_run()
    except AttnmtError as err:
        raise ConfigError(f"train.init_from={cfg.train.init_from!r}: {err}") from None
    return run


def _resolve_section(new, old, keys: tuple[str, ...], section: str, conflicts: list[str], *,
                     fewer: tuple[str, ...] = ()):
    """`new` with the keys it leaves at their defaults taken from `old`; the keys in `fewer` may
    also be smaller than `old`'s (a shrunk stack); any other difference is a conflict."""
    defaults = type(new)()
    taken = {}
    for key in keys:
        mine, theirs = getattr(new, key), getattr(old, key)
        if mine == theirs:
            continue
        if mine == getattr(defaults, key):
            taken[key] = theirs
        elif key in fewer and mine < theirs:
            continue  # a shrunk stack: load_init_weights keeps some of the run's layers
        else:
            hint = "; a Transformer may keep fewer, not more" if key in fewer else ""
            conflicts.append(f"{section}.{key}={mine!r} (the run has {theirs!r}{hint})")
    return dataclasses.replace(new, **taken)


def kept_layers(available: int, wanted: int) -> list[int]:
    """The init run's layers (of `available`) that a stack of `wanted` layers starts from: spread
    evenly, the first and the last kept; one layer is the first (Shleifer & Rush 2020).

    >>> kept_layers(6, 3), kept_layers(3, 1), kept_layers(3, 3)
    ([0, 2, 5], [0], [0, 1, 2])
    """
    if not 1 <= wanted <= available:
        raise ValueError(f"cannot keep {wanted} of {available} layers")
    if wanted == 1:
        return [0]
    return [round(i * (available - 1) / (wanted - 1)) for i in range(wanted)]


def resolve_init_from(cfg: Config) -> Config:
    """`cfg` with the model and pipeline keys it leaves at their defaults taken from the init run.

    Raises:
        ConfigError: keys set to other values than the init run's, all named, or no init run.
    """
    old = init_run(cfg).config()
    conflicts: list[str] = []
    model_keys = tuple(f.name for f in dataclasses.fields(ModelConfig) if f.name not in TRAINING_ONLY)
    shrinkable = tuple(SHRINKABLE) if old.model.arch == "transformer" else ()
    model = _resolve_section(cfg.model, old.model, model_keys, "model", conflicts, fewer=shrinkable)
    data = _resolve_section(cfg.data, old.data, PIPELINE_KEYS, "data", conflicts)
    if conflicts:
        raise ConfigError(f"train.init_from={cfg.train.init_from!r}: the config conflicts with that run's model and "
                          f"tokenization: {'; '.join(conflicts)} (leave these keys out to take the run's values)")
    assert isinstance(data, DataConfig)
    return cfg.replace(model=model, data=data)


def init_pipeline(cfg: Config) -> TextPipeline:
    """The init run's tokenizers and vocabularies (verified against its checksums)."""
    return init_run(cfg).pipeline()


def load_init_weights(model: nn.Module, cfg: Config) -> str:
    """The init run's weights (`train.init_checkpoint`) into `model`, built from the resolved `cfg`:
    the same shapes and names, or, for a shrunk Transformer, the kept layers renumbered (the
    others are not read). Returns what was loaded, for the log.

    Raises:
        ConfigError: train.init_checkpoint names no weights of the run, or a damaged file.
    """
    run = init_run(cfg)
    try:
        path = run.weights(cfg.train.init_checkpoint)
        tensors = load_weights_file(path)
    except AttnmtError as err:
        raise ConfigError(f"train.init_checkpoint={cfg.train.init_checkpoint!r} of {run.path}: {err}") from None
    old = run.config().model
    notes = []
    for key, prefix in SHRINKABLE.items():
        available, wanted = getattr(old, key), getattr(cfg.model, key)
        if wanted < available:
            kept = kept_layers(available, wanted)
            tensors = _renumbered(tensors, prefix, kept)
            notes.append(f"{prefix} {kept} of {available}")
    load_state(model, tensors, path)
    return f"{path}" + (f" ({'; '.join(notes)})" if notes else "")


def _renumbered(tensors: dict, prefix: str, kept: list[int]) -> dict:
    """`tensors` with the layers `prefix.K.` in `kept` renamed `prefix.0.`, `prefix.1.` ... and
    the other layers of `prefix` left out."""
    new_index = {old: new for new, old in enumerate(kept)}
    out = {}
    for name, tensor in tensors.items():
        head, _, rest = name.partition(".")
        index, _, tail = rest.partition(".")
        if head != prefix or not index.isdigit():  # not a layer of the stack: kept (load_state names a stray one)
            out[name] = tensor
        elif int(index) in new_index:
            out[f"{prefix}.{new_index[int(index)]}.{tail}"] = tensor
    return out

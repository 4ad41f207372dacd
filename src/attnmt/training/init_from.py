"""`train.init_from: RUN`: a new run that starts from another run's weights (an `attnmt import`ed
model or an attnmt run), with that run's tokenizers and vocabularies.

The new config's model and tokenizer keys describe the same model and pipeline: a key left at
its default takes the init run's value, a key set to another value than the init run's is a
conflict (`resolve_init_from` names every one). Dropout rates may differ: they only shape
training. The resolved config is the one the new run saves.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torch import nn

from attnmt.checkpoint import load_weights
from attnmt.config import Config, DataConfig, ModelConfig
from attnmt.data.pipeline import TextPipeline
from attnmt.errors import AttnmtError, ConfigError
from attnmt.run_dir import RunDir

TRAINING_ONLY = ("dropout", "attn_dropout", "ff_dropout")  # model keys a fine-tuning run may change
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


def _resolve_section(new, old, keys: tuple[str, ...], section: str, conflicts: list[str]):
    defaults = type(new)()
    taken = {}
    for key in keys:
        mine, theirs = getattr(new, key), getattr(old, key)
        if mine == theirs:
            continue
        if mine == getattr(defaults, key):
            taken[key] = theirs
        else:
            conflicts.append(f"{section}.{key}={mine!r} (the run has {theirs!r})")
    return dataclasses.replace(new, **taken)


def resolve_init_from(cfg: Config) -> Config:
    """`cfg` with the model and pipeline keys it leaves at their defaults taken from the init run.

    Raises:
        ConfigError: keys set to other values than the init run's, all named, or no init run.
    """
    old = init_run(cfg).config()
    conflicts: list[str] = []
    model_keys = tuple(f.name for f in dataclasses.fields(ModelConfig) if f.name not in TRAINING_ONLY)
    model = _resolve_section(cfg.model, old.model, model_keys, "model", conflicts)
    data = _resolve_section(cfg.data, old.data, PIPELINE_KEYS, "data", conflicts)
    if conflicts:
        raise ConfigError(f"train.init_from={cfg.train.init_from!r}: the config conflicts with that run's model and "
                          f"tokenization: {'; '.join(conflicts)} (leave these keys out to take the run's values)")
    assert isinstance(data, DataConfig)
    return cfg.replace(model=model, data=data)


def init_pipeline(cfg: Config) -> TextPipeline:
    """The init run's tokenizers and vocabularies (verified against its checksums)."""
    return init_run(cfg).pipeline()


def load_init_weights(model: nn.Module, cfg: Config) -> None:
    """The init run's best weights into `model` (the shapes and names must match: same config)."""
    load_weights(model, init_run(cfg).weights("best"))

"""Typed configuration: frozen dataclasses loaded from YAML, validated with named keys.

A config file has one section per concern:

    data:   DataConfig    corpus, languages, tokenizer, vocabulary, length filter
    model:  ModelConfig   architecture and sizes
    train:  TrainConfig   optimizer, schedule, batches, epochs, early stopping, device
    search: SearchConfig  beam size, length penalty, maximum output length

Every key is checked against the dataclass field's type (and `Literal` choices), then the
cross-field rules in `_check_values` run. Any problem raises `ConfigError` naming the file and
the dotted key, e.g. ``configs/x.yaml: model.heads=6 must divide model.d_model=256``.
Command-line overrides (``--set train.lr=3e-4``) go through the same validation.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from attnmt.devices import check_device_name
from attnmt.errors import AttnmtError, ConfigError

_FLOAT_LITERAL = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


@dataclass(frozen=True)
class DataConfig:
    corpus: str = "multi30k"                 # "multi30k" or "files" (your own data)
    src_lang: str = "de"
    tgt_lang: str = "en"
    train: str | None = None                 # own data: path prefix (train -> train.de, train.en) or .tsv
    valid: str | None = None
    test: str | None = None
    tokenizer: Literal["moses", "sentencepiece"] = "moses"
    lowercase: bool = False                  # moses only (refused with sentencepiece): the tutorials' setup
    spm_model_type: Literal["bpe", "unigram"] = "bpe"
    spm_vocab_size: int = 8000
    spm_joint: bool = True                   # one sentencepiece model for both languages
    min_freq: int = 1
    max_vocab: int | None = None
    max_len: int = 100                       # longer training pairs are dropped (and counted)
    train_subset: int | None = None          # use only the first N training pairs (quick runs)


@dataclass(frozen=True)
class ModelConfig:
    arch: Literal["rnn", "transformer"] = "rnn"
    dropout: float = 0.5
    tie_embeddings: bool = False             # output layer shares the target embedding
    # RNN (Bahdanau et al. 2015)
    emb_dim: int = 256
    enc_hidden: int = 512                    # per direction
    dec_hidden: int = 512
    attn_dim: int = 512
    layers: int = 1
    attention: Literal["bahdanau", "luong-dot", "luong-general"] = "bahdanau"
    # Transformer (Vaswani et al. 2017)
    d_model: int = 256
    heads: int = 8
    ff_dim: int = 1024
    enc_layers: int = 3
    dec_layers: int = 3
    positions: Literal["sinusoidal", "learned"] = "sinusoidal"
    pre_norm: bool = True
    share_embeddings: bool = False           # source = target embedding (joint vocabulary)
    attn_dropout: float = 0.0


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 1
    device: str = "auto"                     # auto | cpu | cuda | cuda:N | mps (checked in devices.py)
    epochs: int = 10
    max_minutes: float | None = None         # stop after this much training time
    batch_size: int = 128
    batch_by: Literal["sentences", "tokens"] = "sentences"
    optimizer: Literal["adam", "adamw"] = "adam"
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    schedule: Literal["constant", "plateau", "inverse_sqrt"] = "constant"
    warmup_steps: int = 4000
    plateau_factor: float = 0.5
    plateau_patience: int = 1
    min_lr: float = 1e-6
    clip: float = 1.0                        # max gradient norm; 0 = off
    label_smoothing: float = 0.0
    teacher_forcing: float = 1.0             # RNN only: 1.0 = always feed the gold previous token
    amp: Literal["auto", "none", "bf16"] = "auto"  # auto = bf16 autocast on CUDA only
    compile: Literal["none", "default", "cudagraphs"] = "none"  # step: eager, torch.compile, CUDA graphs (graphs.py)
    early_stopping_metric: Literal["bleu", "loss"] = "bleu"
    early_stopping_patience: int | None = None
    eval_beam: int = 1                       # beam for the per-epoch validation BLEU (1 = greedy)
    eval_max_sentences: int | None = None    # validate BLEU on the first N val sentences
    keep_last: int = 5                       # epoch checkpoints kept (for averaging)
    save_every_steps: int | None = 500       # also save a resumable state every N steps mid-epoch
    max_bad_steps: int = 10                  # consecutive non-finite steps before stopping
    log_every: int = 50
    tensorboard: bool = False
    num_threads: int | None = None           # CPU threads (default: torch's choice)
    accum_steps: int = 1                     # batches per rank accumulated into each update
    backend: Literal["auto", "gloo", "nccl"] = "auto"  # torchrun only; auto = nccl on CUDA, else gloo


@dataclass(frozen=True)
class SearchConfig:
    beam_size: int = 5
    length_penalty: float = 1.0
    max_len_ratio: float = 2.0               # output may be this times the source length ...
    max_len_offset: int = 10                 # ... plus this many tokens
    max_input_tokens: int = 250              # longer inputs are cut, with a warning


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    search: SearchConfig = field(default_factory=SearchConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **sections: Any) -> Config:
        return dataclasses.replace(self, **sections)


# ----------------------------------------------------------------------------- loading

PACKAGED_CONFIGS = Path(__file__).resolve().parent / "configs"  # shipped in the wheel; ./configs in a clone


def packaged_configs() -> list[str]:
    """Names of the configs that ship with attnmt (`attnmt train NAME` finds them from any folder)."""
    return sorted(p.stem for p in PACKAGED_CONFIGS.glob("*.yaml"))


def find_config(name: str | Path) -> Path:
    """A config file: `name` itself when it is a file, else the packaged config of that name
    (``multi30k_transformer`` or ``multi30k_transformer.yaml``).

    Raises:
        ConfigError: neither a file nor a packaged config; the message lists the packaged names.
    """
    path = Path(name)
    if path.is_file():
        return path
    if path.parent == Path(".") and path.suffix in ("", ".yaml"):
        packaged = PACKAGED_CONFIGS / f"{path.stem}.yaml"
        if packaged.is_file():
            return packaged
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder, not a config file")
    raise ConfigError(f"{path}: config file not found, and not the name of a packaged config "
                      f"({', '.join(packaged_configs())})")


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a YAML config (a file, or a packaged config by name: see `find_config`), apply
    ``key=value`` overrides, validate, and return a `Config`.

    Raises:
        ConfigError: the file is missing or not YAML, or a key is unknown, of the wrong type,
            or has an impossible value; the message names the file and the dotted key.
    """
    path = find_config(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file: {err.strerror or err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(raw).__name__}")
    raw = apply_overrides(raw, overrides, source=str(path))
    return config_from_dict(raw, source=str(path))


def apply_overrides(raw: dict, overrides: list[str] | tuple[str, ...], *, source: str) -> dict:
    """Return a copy of `raw` with each ``section.key=value`` set (the value parsed as YAML)."""
    raw = json.loads(json.dumps(raw, default=list))  # deep copy of plain data
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) != 2 or not all(parts):
            raise ConfigError(f"{source}: override {item!r} must look like section.key=value (e.g. train.lr=3e-4)")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        section = raw.setdefault(parts[0], {})
        if not isinstance(section, dict):
            raise ConfigError(f"{source}: {parts[0]} must be a mapping, got {type(section).__name__}")
        section[parts[1]] = value
    return raw


def config_from_dict(raw: dict, *, source: str = "<config>") -> Config:
    """Build and validate a `Config` from plain nested dicts (YAML or the saved JSON)."""
    sections = {f.name: f.type for f in dataclasses.fields(Config)}
    hints = typing.get_type_hints(Config)
    built = {}
    for name, value in raw.items():
        if name not in sections:
            raise ConfigError(f"{source}: unknown section {name!r} (expected one of {', '.join(sections)})")
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {name} must be a mapping, got {type(value).__name__}")
        built[name] = _build_section(hints[name], value, source=source, prefix=name)
    cfg = Config(**built)
    _check_values(cfg, source)
    return cfg


def _build_section(cls: type, values: dict, *, source: str, prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in hints:
            known = ", ".join(f.name for f in dataclasses.fields(cls))
            raise ConfigError(f"{source}: unknown key {prefix}.{key} (known keys: {known})")
        kwargs[key] = _coerce(value, hints[key], source=source, key=f"{prefix}.{key}")
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, *, source: str, key: str) -> Any:
    """Check `value` against the type `hint`; return it (ints widened to float, lists to tuples)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], source=source, key=key)
    if origin is Literal:
        if value not in args:
            choices = ", ".join(repr(a) for a in args)
            raise ConfigError(f"{source}: {key}={value!r} is not one of {choices}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ConfigError(f"{source}: {key} must be a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, source=source, key=key) for v, a in zip(value, args))
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        if isinstance(value, str) and _FLOAT_LITERAL.fullmatch(value.strip()):
            value = float(value)  # YAML 1.1 reads `1e-3` (no dot) as a string
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif hint is str:
        ok = isinstance(value, str)
    else:  # pragma: no cover - a field type this validator does not know is a programming error
        raise TypeError(f"unsupported config type {hint!r} for {key}")
    if not ok:
        raise ConfigError(f"{source}: {key} must be {hint.__name__}, got {type(value).__name__} {value!r}")
    return value


def _check_values(cfg: Config, source: str) -> None:
    """Cross-field and range rules; each failure names the dotted key."""

    def fail(message: str) -> None:
        raise ConfigError(f"{source}: {message}")

    d, m, t, s = cfg.data, cfg.model, cfg.train, cfg.search
    if d.corpus == "multi30k":
        langs = ("de", "en", "fr", "cs")
        for key in ("src_lang", "tgt_lang"):
            if getattr(d, key) not in langs:
                fail(f"data.{key}={getattr(d, key)!r}: Multi30k has {', '.join(langs)}")
    elif d.corpus == "files":
        if not d.train:
            fail("data.train must name your training data when data.corpus is 'files'")
    else:
        fail(f"data.corpus={d.corpus!r} must be 'multi30k' or 'files'")
    if d.src_lang == d.tgt_lang:
        fail(f"data.src_lang and data.tgt_lang are both {d.src_lang!r}")
    positive = {
        "data.spm_vocab_size": d.spm_vocab_size, "data.min_freq": d.min_freq, "data.max_len": d.max_len,
        "model.emb_dim": m.emb_dim, "model.enc_hidden": m.enc_hidden, "model.dec_hidden": m.dec_hidden,
        "model.attn_dim": m.attn_dim, "model.layers": m.layers, "model.d_model": m.d_model,
        "model.heads": m.heads, "model.ff_dim": m.ff_dim, "model.enc_layers": m.enc_layers,
        "model.dec_layers": m.dec_layers, "train.epochs": t.epochs, "train.batch_size": t.batch_size,
        "train.lr": t.lr, "train.log_every": t.log_every, "train.max_bad_steps": t.max_bad_steps,
        "train.eval_beam": t.eval_beam, "train.accum_steps": t.accum_steps, "search.beam_size": s.beam_size,
        "search.max_len_ratio": s.max_len_ratio, "search.max_input_tokens": s.max_input_tokens,
    }
    for key, value in positive.items():
        if value <= 0:
            fail(f"{key}={value} must be positive")
    optional_positive = {
        "data.max_vocab": d.max_vocab, "data.train_subset": d.train_subset, "train.max_minutes": t.max_minutes,
        "train.early_stopping_patience": t.early_stopping_patience,
        "train.eval_max_sentences": t.eval_max_sentences, "train.num_threads": t.num_threads,
        "train.save_every_steps": t.save_every_steps,
    }
    for key, value in optional_positive.items():
        if value is not None and value <= 0:
            fail(f"{key}={value} must be positive (or null)")
    for key, value in {"model.dropout": m.dropout, "model.attn_dropout": m.attn_dropout,
                       "train.label_smoothing": t.label_smoothing}.items():
        if not 0.0 <= value < 1.0:
            fail(f"{key}={value} must be in [0, 1)")
    if not 0.0 <= t.teacher_forcing <= 1.0:
        fail(f"train.teacher_forcing={t.teacher_forcing} must be in [0, 1]")
    for key, value in {"train.weight_decay": t.weight_decay, "train.clip": t.clip,
                       "train.warmup_steps": t.warmup_steps, "train.min_lr": t.min_lr,
                       "train.keep_last": t.keep_last, "train.plateau_patience": t.plateau_patience,
                       "search.length_penalty": s.length_penalty,
                       "search.max_len_offset": s.max_len_offset}.items():
        if value < 0:
            fail(f"{key}={value} must not be negative")
    if not 0.0 < t.plateau_factor < 1.0:
        fail(f"train.plateau_factor={t.plateau_factor} must be in (0, 1)")
    if not all(0.0 <= b < 1.0 for b in t.betas):
        fail(f"train.betas={list(t.betas)} must each be in [0, 1)")
    if m.arch == "transformer" and m.d_model % m.heads:
        fail(f"model.heads={m.heads} must divide model.d_model={m.d_model}")
    if t.compile == "cudagraphs" and (m.arch != "transformer" or t.device == "cpu"):
        fail(f"train.compile='cudagraphs' needs model.arch='transformer' on a CUDA device; got model.arch="
             f"{m.arch!r}, train.device={t.device!r} (the RNN packs sequences on the host: use 'none' or 'default')")
    if t.schedule == "inverse_sqrt" and t.warmup_steps == 0:
        fail("train.warmup_steps must be positive with train.schedule='inverse_sqrt'")
    try:  # the spelling only: whether the device exists is checked where it is used (devices.py)
        check_device_name(t.device, key="train.device")
    except AttnmtError as err:
        fail(str(err))
    if m.arch == "transformer" and t.teacher_forcing != 1.0:
        fail(f"train.teacher_forcing={t.teacher_forcing} applies to model.arch='rnn' only: the Transformer "
             "is always trained on the gold previous tokens (set it to 1.0)")
    if d.lowercase and d.tokenizer == "sentencepiece":
        fail("data.lowercase=true applies to data.tokenizer='moses' only: sentencepiece models the text "
             "as it is (set data.lowercase to false, or use the moses tokenizer)")


def advisories(cfg: Config) -> list[str]:
    """Settings that are valid but known to train badly, one message each (training logs them).

    A post-norm Transformer (`model.pre_norm: false`, the original paper's wiring) with no learning-rate
    warmup learns about half as fast per update as the pre-norm one: measured on Multi30k with
    configs/onmt_compare_transformer.yaml, 4.97 against 10.99 test BLEU after 227 updates and 12.20
    against 21.83 after 454 (docs/results.md, "Quality per update"). Post-norm needs a warmup
    (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture"), and even with one
    it stayed behind pre-norm over those 454 updates, so the advice is pre-norm.
    """
    m, t = cfg.model, cfg.train
    notes = []
    if m.arch == "transformer" and not m.pre_norm and t.schedule != "inverse_sqrt":
        notes.append(f"model.pre_norm=false (post-norm) with train.schedule={t.schedule!r} has no learning-rate "
                     "warmup: a post-norm Transformer learns about half as fast per update without one "
                     "(docs/results.md). Set model.pre_norm=true; post-norm needs train.schedule='inverse_sqrt' "
                     "with train.warmup_steps, and long training")
    return notes


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved config as JSON (used in run directories)."""
    from attnmt.files import atomic_write_text

    atomic_write_text(Path(path), json.dumps(cfg.to_dict(), indent=2) + "\n")


def load_saved_config(path: str | Path) -> Config:
    """Read a config saved by `save_config` (JSON), validating it like a YAML file."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found (is this a run directory?)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid JSON: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return config_from_dict(raw, source=str(path))

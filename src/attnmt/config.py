"""Typed configuration: frozen dataclasses loaded from YAML, validated with named keys.

A config file has one section per concern:

    data:   DataConfig    corpus, languages, tokenizer, vocabulary, length filter
    model:  ModelConfig   architecture and sizes
    train:  TrainConfig   optimizer, schedule, batches, epochs, early stopping, device
    search: SearchConfig  beam size, length penalty, maximum output length

Files are read within bounds first (untrusted.py: size, nesting depth and YAML aliases, before
anything is expanded). Every key is checked against the dataclass field's type (and `Literal`
choices), every number against its range in `RANGES` / `FRACTIONS` (finite; NaN fails), the model
against MAX_PARAMETERS by `estimate_parameters`, then the cross-field rules run. Any problem raises `ConfigError` naming the file and
the dotted key, e.g. ``configs/x.yaml: model.heads=6 must divide model.d_model=256``.
Command-line overrides (``--set train.lr=3e-4``) go through the same validation.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import reprlib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

from attnmt.untrusted import load_json, load_yaml, plain_copy, read_text
from attnmt.bounds import (BEAM, LENGTH_PENALTY, MINUTES, PREPARE_WORKERS, THREADS, VOCAB, WEIGHT, Bound, non_negative,
                           positive)
from attnmt.devices import check_device_name
from attnmt.direction import Direction, check_language
from attnmt.direction import names as direction_names
from attnmt.errors import AttnmtError, ConfigError

_KEY_NAME = re.compile(r"[\w.-]{1,60}", re.ASCII)  # shown as it is in messages; other keys as repr
_FLOAT_LITERAL = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


@dataclass(frozen=True)
class TrainCorpus:
    """One training corpus of several (`data.train` as a list): its files and how often an epoch takes it."""

    path: str                                # a path prefix (path.de, path.en; plain or .gz) or a .tsv file
    weight: float = 1.0                      # examples per epoch = weight x pairs (3: three times; 0.5: a random half)
    pair: str | None = None                  # multilingual: the one direction these files hold ("de-en"); default:
                                             # every direction of data.pairs whose two files are there (multiway)


@dataclass(frozen=True)
class AugmentConfig:
    """Noise in training (data/augment.py): each example of each epoch gets each modifier with its
    probability, on the fly, the same under a seed whatever the ranks or a resume. The case modifiers
    (one at most per example) change both sides alike; the rest, the source only. The defaults are
    the rates measured for the packaged configs (docs/results.md, "What people type"); all 0 is no noise.
    Case is off by default: a text typed in lower case or capitals is read in the training data's case
    at translation (search.restore_case), which measured as well for no training cost, where case
    noise made sentencepiece batches of capitals two to three times as long (and a word vocabulary
    lacks "hund" and "HUND": they would become <unk>)."""

    lowercase: float = 0.0                   # "ein mann fährt rad ." -> "a man rides a bike ."
    uppercase: float = 0.0                   # "EIN MANN FÄHRT RAD ." -> "A MAN RIDES A BIKE ."
    titlecase: float = 0.0                   # "Ein Mann Fährt Rad ." -> "A Man Rides A Bike ."
    typos: float = 0.1                       # one word of the source: two letters swapped, one dropped or doubled
    no_final_punct: float = 0.15             # the source's final . ! ? dropped (the target keeps its own)
    diacritics: float = 0.02                 # the source typed without them: fährt -> fahrt, Straße -> Strasse
    fragments: float = 0.05                  # a short aligned piece of the pair instead (1 to 3 source words)


@dataclass(frozen=True)
class DataConfig:
    corpus: str = "multi30k"                 # "multi30k", "files" (your own data) or "none" (an imported model's)
    src_lang: str = "de"                     # one direction (the default); not used when data.pairs / langs is set
    tgt_lang: str = "en"
    pairs: tuple[str, ...] | None = None     # multilingual: the directions of one model, e.g. [de-en, en-de, fr-en]
    langs: tuple[str, ...] | None = None     # multilingual: every direction between these languages
    lang_token: Literal["source", "target"] = "target"  # where the target language's token goes: first source
                                             # token (Johnson et al. 2017) or first target token, forced (fairseq)
    temperature: float = 1.0                 # direction d is sampled with p ~ n_d^(1/T) (T 1: by size; larger: flatter)
    train: str | tuple[TrainCorpus, ...] | None = None  # own data: a path prefix (train -> train.de, train.en)
                                             # or .tsv; or a list of {path, weight} corpora
    valid: str | None = None
    test: str | None = None
    tokenizer: Literal["moses", "sentencepiece"] = "moses"
    lowercase: bool = False                  # lowercase all text (the tutorials' and many papers' setup);
                                             # val BLEU then compares with lowercased references
    spm_model_type: Literal["bpe", "unigram"] = "bpe"
    spm_vocab_size: int = 8000
    spm_joint: bool = True                   # one sentencepiece model for both languages
    spm_train_sentences: int = 2_000_000     # sentencepiece trains on a random sample of at most this many
    min_freq: int = 1
    max_vocab: int | None = None
    max_len: int = 100                       # longer training pairs are dropped (and counted)
    min_len: int = 1                         # shorter ones too (tokens on a side); empty sides always are
    max_len_ratio: float | None = None       # drop pairs whose longer side has more than this times the tokens of the other
    drop_identical: bool = False             # drop pairs whose source and target are the same text
    dedup: bool = False                      # keep the first of exactly repeated pairs
    train_subset: int | None = None          # use only the first N training pairs (quick runs)
    workers: int | None = None               # processes that prepare the data (default: one per core)
    augment: AugmentConfig = field(default_factory=AugmentConfig)  # noise in training, on the fly (not cached)

    def directions(self) -> list[Direction]:
        """The model's directions: data.pairs, every ordered pair of data.langs, or (src_lang, tgt_lang)."""
        if self.pairs:
            return [Direction.parse(p, "data.pairs", error=ConfigError) for p in self.pairs]
        if self.langs:
            return [Direction(a, b) for a in self.langs for b in self.langs if a != b]
        return [Direction(self.src_lang, self.tgt_lang)]

    @property
    def multilingual(self) -> bool:
        """Several directions in one model (the target language given by a token)."""
        return bool(self.pairs or self.langs)

    def train_corpora(self) -> tuple[TrainCorpus, ...]:
        """`train` as a list of corpora (one string: one corpus of weight 1; Multi30k: none)."""
        if self.train is None:
            return ()
        if isinstance(self.train, str):
            return (TrainCorpus(self.train),)
        return self.train


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
    positions: Literal["sinusoidal", "sinusoidal_halves", "learned"] = "sinusoidal"  # halves: Marian's sin|cos
    pre_norm: bool = True
    share_embeddings: bool = False           # source = target embedding (joint vocabulary)
    attn_dropout: float = 0.0
    activation: Literal["relu", "gelu", "swish"] = "relu"  # the feed-forward's (swish = SiLU: OPUS-MT)
    scale_embeddings: bool = True            # token embeddings times sqrt(d_model)
    ff_dropout: float | None = None          # after the feed-forward's activation; null = model.dropout


BUDGET_SCHEDULES = ("linear", "cosine")              # train.schedule values that end at train.max_updates
STEP_SCHEDULES = ("inverse_sqrt", *BUDGET_SCHEDULES)  # ... and those set the rate at every update (with a warmup)


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
    schedule: Literal["constant", "plateau", "inverse_sqrt", "linear", "cosine"] = "constant"  # linear, cosine:
                                             # warmup, then down to 0 at train.max_updates
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
    max_updates: int | None = None           # stop after this many updates
    validate_every: int | None = None        # also validate and checkpoint every N updates (besides epoch ends)
    length_window: int = 1_000_000           # each epoch: shuffled, then sorted by length in windows of this many pairs
    backend: Literal["auto", "gloo", "nccl"] = "auto"  # torchrun only; auto = nccl on CUDA, else gloo
    init_from: str | None = None             # a run (trained or `attnmt import`ed): start from its weights,
                                             # tokenizers and vocabularies (training/init_from.py); a
                                             # Transformer may keep fewer of its layers (a shrunk student)
    init_checkpoint: str = "best"            # which of init_from's weights: best, last, average or a file


@dataclass(frozen=True)
class SearchConfig:
    beam_size: int = 5
    length_penalty: float = 1.0
    max_len_ratio: float = 2.0               # output may be this times the source length ...
    max_len_offset: int = 10                 # ... plus this many tokens
    max_input_tokens: int = 250              # longer inputs are cut, with a warning
    replace_unk: bool | None = None          # <unk> -> the most attended source word; None = on for moses
    restore_case: bool = True                # a text typed in lower case, capitals or title case is read in the
                                             # training data's case and translated into its own (data/lexicon.py)
    correct_spelling: bool = True            # an unknown word one slip from a known one is read as that word
    complete_final_mark: bool = True         # a sentence of four words or more typed without its final mark is
                                             # read with the one the training data's sentences end with
    short_phrases: bool = True               # an input of one to three words the training pairs' phrase table
                                             # knows is translated by it (data/phrases.py), not by the model
    budget_in_lower_case: bool | None = None  # the output budget counts the source's tokens in lower case where
                                             # fewer (decoding/inputs.py: a page of capitals costs what a page of
                                             # text does); None: on, unless the model was trained with capitals
                                             # (data.augment.uppercase > 0), which it answers in capitals


@dataclass(frozen=True)
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    search: SearchConfig = field(default_factory=SearchConfig)

    def __post_init__(self) -> None:
        if self.search.budget_in_lower_case is None:  # what the model was taught decides (SearchConfig)
            object.__setattr__(self, "search", dataclasses.replace(
                self.search, budget_in_lower_case=self.data.augment.uppercase == 0))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **sections: Any) -> Config:
        return dataclasses.replace(self, **sections)


# ----------------------------------------------------------------------------- bounds
# Sizes and counts are bounded where a larger value would hang, overflow or allocate without
# bound; the bounds are far above any sensible setting. (Issue 24 items 10, 11, 16 and 17.)

MAX_DIM = 65_536              # any model width (emb_dim, hidden sizes, d_model, ff_dim)
MAX_LAYERS = 64
MAX_TOKENS = 10_000           # data.max_len, search.max_input_tokens, search.max_len_offset
MAX_COUNT = 1_000_000_000     # steps, sentences, pairs: a count nothing could reach
MAX_PARAMETERS = 1_000_000_000  # the model's estimated parameters (4 GB of float32 weights)
NOMINAL_VOCAB = 50_000        # the vocabulary the estimate assumes for Moses without data.max_vocab
MAX_POSITIONS = 1024          # the Transformer's position table (models/transformer.py)
MAX_TEXT = 4096               # characters in a string setting (a path's limit on Linux)

def _count(high: int) -> Bound:
    """An integer setting of at least 1 ("positive")."""
    return Bound(1, high)


# key -> its Bound (bounds.py): the ranges a CLI flag or the service also takes are named there.
# Optional settings may also be null. Floats must be finite.
RANGES: dict[str, Bound] = {
    "data.spm_vocab_size": VOCAB, "data.min_freq": _count(MAX_COUNT),
    "data.max_vocab": VOCAB, "data.max_len": _count(MAX_TOKENS),
    "data.train_subset": _count(MAX_COUNT), "data.spm_train_sentences": _count(MAX_COUNT),
    "data.min_len": _count(MAX_TOKENS), "data.max_len_ratio": positive(1e6), "data.workers": PREPARE_WORKERS,
    "train.max_updates": _count(MAX_COUNT), "train.validate_every": _count(MAX_COUNT),
    "train.length_window": _count(MAX_COUNT), "data.temperature": positive(1000.0),
    **{f"model.{k}": _count(MAX_DIM) for k in ("emb_dim", "enc_hidden", "dec_hidden", "attn_dim", "d_model", "ff_dim")},
    **{f"model.{k}": _count(MAX_LAYERS) for k in ("layers", "enc_layers", "dec_layers")},
    "model.heads": _count(1024),
    "train.seed": Bound(0, 2**63 - 1),  # torch.manual_seed's range, with room for seed + rank
    "train.epochs": _count(100_000), "train.max_minutes": MINUTES,
    "train.batch_size": _count(1_000_000), "train.lr": positive(10.0),
    "train.weight_decay": non_negative(10.0), "train.warmup_steps": Bound(0, MAX_COUNT),
    "train.plateau_patience": Bound(0, 1_000_000), "train.min_lr": non_negative(10.0),
    "train.clip": non_negative(1e6), "train.early_stopping_patience": _count(1_000_000),
    "train.eval_beam": BEAM, "train.eval_max_sentences": _count(MAX_COUNT),
    "train.keep_last": Bound(0, 10_000), "train.save_every_steps": _count(MAX_COUNT),
    "train.max_bad_steps": _count(1_000_000), "train.log_every": _count(MAX_COUNT),
    "train.num_threads": THREADS, "train.accum_steps": _count(10_000),
    "search.beam_size": BEAM, "search.length_penalty": LENGTH_PENALTY,
    "search.max_len_ratio": positive(10.0), "search.max_len_offset": Bound(0, MAX_TOKENS),
    "search.max_input_tokens": _count(MAX_TOKENS),
}
# probabilities and factors: key -> interval
FRACTIONS = {"model.dropout": "[0, 1)", "model.attn_dropout": "[0, 1)", "model.ff_dropout": "[0, 1)", "train.label_smoothing": "[0, 1)",
             "train.teacher_forcing": "[0, 1]", "train.plateau_factor": "(0, 1)",
             **{f"data.augment.{f.name}": "[0, 1]" for f in dataclasses.fields(AugmentConfig)}}
CASE_MODIFIERS = ("lowercase", "uppercase", "titlecase")  # one at most per example: their sum is at most 1
NO_AUGMENT = {f.name: 0.0 for f in dataclasses.fields(AugmentConfig)}  # data.augment of a run without noise


def setting(cfg: Config, key: str) -> Any:
    """The value of a dotted key ("data.augment.typos")."""
    value: Any = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return value


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
        text = read_text(path)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file: {err.strerror or err}") from None
    raw = load_yaml(text, source=str(path))
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(raw).__name__}")
    raw = apply_overrides(raw, overrides, source=str(path))
    return config_from_dict(raw, source=str(path))


class _NotYAML(Exception):
    """An override value that is not YAML: it is taken as a plain string."""


def apply_overrides(raw: dict, overrides: list[str] | tuple[str, ...], *, source: str) -> dict:
    """Return an unshared copy of `raw` with each ``section.key=value`` set (the value parsed as
    YAML within the same bounds as a file; text that is not YAML is a string)."""
    raw = plain_copy(raw, source=source)  # bounded: YAML aliases are expanded under a value budget
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) not in (2, 3) or not all(parts):
            raise ConfigError(f"{source}: override {item!r} must look like section.key=value (e.g. train.lr=3e-4, "
                              f"data.augment.typos=0.05)")
        try:
            value = load_yaml(text, source=f"{source}: {key.strip()}", invalid=_NotYAML)
        except _NotYAML:
            value = text
        section = raw
        for depth, part in enumerate(parts[:-1]):
            section = section.setdefault(part, {})
            if not isinstance(section, dict):
                raise ConfigError(f"{source}: {'.'.join(parts[:depth + 1])} must be a mapping, got "
                                  f"{type(section).__name__}")
        section[parts[-1]] = plain_copy(value, source=source, at=key.strip())
    return raw


def config_from_dict(raw: dict, *, source: str = "<config>") -> Config:
    """Build and validate a `Config` from plain nested dicts (YAML or the saved JSON)."""
    raw = plain_copy(raw, source=source)  # refused past the bounds before any key is read
    sections = {f.name: f.type for f in dataclasses.fields(Config)}
    hints = typing.get_type_hints(Config)
    built = {}
    for name, value in raw.items():
        if name not in sections:
            raise ConfigError(f"{source}: unknown section {_show(name)} (expected one of {', '.join(sections)})")
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
            shown = key if isinstance(key, str) and _KEY_NAME.fullmatch(key) else _show(key)
            raise ConfigError(f"{source}: unknown key {prefix}.{shown} (known keys: {known})")
        kwargs[key] = _coerce(value, hints[key], source=source, key=f"{prefix}.{key}")
    return cls(**kwargs)


def _coerce(value: Any, hint: Any, *, source: str, key: str) -> Any:
    """Check `value` against the type `hint`; return it (ints widened to float, lists to tuples)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) > 1 and isinstance(value, (list, tuple)):  # `str | tuple[...]`: the list form
            inner = [a for a in inner if typing.get_origin(a) is tuple] or inner
        return _coerce(value, inner[0], source=source, key=key)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:  # a list of sections (data.train) or values
        if dataclasses.is_dataclass(args[0]):
            return _coerce_list(value, args[0], source=source, key=key)
        if not isinstance(value, (list, tuple)) or not value or len(value) > MAX_LIST:
            raise ConfigError(f"{source}: {key} must be a list of 1 to {MAX_LIST} values, got {_show(value)}")
        return tuple(_coerce(v, args[0], source=source, key=f"{key}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(hint):  # a section inside a section (data.augment)
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {key} must be a mapping, got {_show(value)}")
        return _build_section(hint, value, source=source, prefix=key)
    if origin is Literal:
        if not isinstance(value, str) or value not in args:
            choices = ", ".join(repr(a) for a in args)
            raise ConfigError(f"{source}: {key}={_show(value)} is not one of {choices}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ConfigError(f"{source}: {key} must be a list of {len(args)} values, got {_show(value)}")
        return tuple(_coerce(v, a, source=source, key=key) for v, a in zip(value, args))
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        if isinstance(value, str) and _FLOAT_LITERAL.fullmatch(value.strip()):
            value = float(value)  # YAML 1.1 reads `1e-3` (no dot) as a string
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = _to_float(value, source=source, key=key) if ok else value
    elif hint is str:
        ok = isinstance(value, str)
        if ok:
            _check_text(value, source=source, key=key)
    else:  # pragma: no cover - a field type this validator does not know is a programming error
        raise TypeError(f"unsupported config type {hint!r} for {key}")
    if not ok:
        raise ConfigError(f"{source}: {key} must be {hint.__name__}, got {type(value).__name__} {_show(value)}")
    return value


MAX_LIST = 255  # items of a list setting (data.train's corpora)


def _coerce_list(value: Any, item: type, *, source: str, key: str) -> tuple:
    """A list of `item` sections (dataclasses); a bare string in it is the section's first field."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"{source}: {key} must be a non-empty list, got {_show(value)}")
    if len(value) > MAX_LIST:
        raise ConfigError(f"{source}: {key} has {len(value)} items; at most {MAX_LIST}")
    first = dataclasses.fields(item)[0].name
    items = []
    for i, entry in enumerate(value):
        if isinstance(entry, str):
            entry = {first: entry}
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: {key}[{i}] must be a mapping or a string, got {_show(entry)}")
        if first not in entry:
            raise ConfigError(f"{source}: {key}[{i}] needs the key {first!r}")
        items.append(_build_section(item, entry, source=source, prefix=f"{key}[{i}]"))
    return tuple(items)


def _to_float(value: int | float, *, source: str, key: str) -> float:
    try:
        return float(value)
    except OverflowError:  # an int past the float range
        raise ConfigError(f"{source}: {key}={_show(value)} must be a finite number") from None


def _check_text(value: str, *, source: str, key: str) -> None:
    """A string setting (a path, a language, a device): UTF-8, no NUL, at most MAX_TEXT characters."""
    if len(value) > MAX_TEXT:
        raise ConfigError(f"{source}: {key} is {len(value)} characters long; at most {MAX_TEXT}")
    if "\x00" in value:
        raise ConfigError(f"{source}: {key}={_show(value)} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{source}: {key}={_show(value)} is not valid Unicode (a lone surrogate)") from None


def _show(value: Any) -> str:
    """A value for a message: at most about 60 characters, whatever its size."""
    try:
        return _SHOW.repr(value)
    except ValueError:  # an int past Python's digit limit
        return f"<an int of {value.bit_length()} bits>"


_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = _SHOW.maxlong = 60
_SHOW.maxlevel, _SHOW.maxlist, _SHOW.maxdict = 2, 4, 4


def _check_values(cfg: Config, source: str) -> None:
    """Range, size and cross-field rules; each failure names the dotted key."""
    for check in (_check_data, _check_ranges, _check_model_size, _check_rules):
        problem = check(cfg)
        if problem:
            raise ConfigError(f"{source}: {problem}")


def _check_data(cfg: Config) -> str | None:
    data_cfg = cfg.data
    if data_cfg.pairs and data_cfg.langs:
        return "data.pairs and data.langs both name the directions: set one of them"
    try:
        for i, text in enumerate(data_cfg.pairs or ()):
            Direction.parse(text, f"data.pairs[{i}]")
        for i, lang in enumerate(data_cfg.langs or ()):
            check_language(lang, f"data.langs[{i}]")
        for key in ("src_lang", "tgt_lang"):  # a file suffix and a path part (data.src_lang: ../../etc was used as one)
            check_language(getattr(data_cfg, key), f"data.{key}")
    except ValueError as err:
        return str(err)
    if data_cfg.pairs and len(set(data_cfg.pairs)) != len(data_cfg.pairs):
        return f"data.pairs={list(data_cfg.pairs)} names a direction twice"
    if data_cfg.langs and len(set(data_cfg.langs)) != len(data_cfg.langs) or data_cfg.langs is not None and len(data_cfg.langs) < 2:
        return f"data.langs={list(data_cfg.langs)} must name at least two different languages"
    used = sorted({lang for direction in data_cfg.directions() for lang in direction})
    if data_cfg.corpus == "multi30k":
        langs = ("de", "en", "fr", "cs")
        for key in ("src_lang", "tgt_lang"):
            if getattr(data_cfg, key) not in langs:
                return f"data.{key}={_show(getattr(data_cfg, key))}: Multi30k has {', '.join(langs)}"
        other = [lang for lang in used if lang not in langs]
        if other:
            return f"data.{'pairs' if data_cfg.pairs else 'langs'} names {other[0]!r}: Multi30k has {', '.join(langs)}"
    elif data_cfg.corpus == "files":
        if not data_cfg.train:
            return "data.train must name your training data when data.corpus is 'files'"
        for i, corpus in enumerate(data_cfg.train_corpora()):
            where = "data.train" if isinstance(data_cfg.train, str) else f"data.train[{i}]"
            if not (WEIGHT.contains(corpus.weight) and corpus.weight > 0):
                return f"{where}.weight={_show(corpus.weight)} must be a number in (0, {WEIGHT.high:g}]"
            if corpus.pair is not None and (not data_cfg.multilingual or corpus.pair not in map(str, data_cfg.directions())):
                return (f"{where}.pair={_show(corpus.pair)} must be one of the model's directions "
                        f"({direction_names(data_cfg.directions())})")
    elif data_cfg.corpus != "none":  # "none": a model imported from elsewhere names no corpus (attnmt import)
        return f"data.corpus={_show(data_cfg.corpus)} must be 'multi30k', 'files' or 'none'"
    if data_cfg.corpus == "multi30k" and data_cfg.train is not None:
        return "data.train names own data; set data.corpus to 'files' (Multi30k has its own splits)"
    if data_cfg.multilingual and not (data_cfg.tokenizer == "sentencepiece" and data_cfg.spm_joint):
        return (f"a multilingual model (data.{'pairs' if data_cfg.pairs else 'langs'}) needs one joint subword vocabulary: "
                f"data.tokenizer=sentencepiece and data.spm_joint=true (got {data_cfg.tokenizer!r}, {data_cfg.spm_joint})")
    if not data_cfg.multilingual and data_cfg.src_lang == data_cfg.tgt_lang:
        return f"data.src_lang and data.tgt_lang are both {_show(data_cfg.src_lang)}"
    return None


def _check_ranges(cfg: Config) -> str | None:
    """Every number finite and inside its `RANGES` or `FRACTIONS` entry (written so that NaN fails)."""
    for key, bound in RANGES.items():
        value = setting(cfg, key)
        if value is None:  # an optional setting (the type check allowed None)
            continue
        if isinstance(value, float) and not math.isfinite(value):
            return f"{key}={value} must be a finite number"
        if not (value > bound.low if bound.low_open else value >= bound.low):
            return f"{key}={_show(value)} must {'not be negative' if bound.low == 0 and not bound.low_open else 'be positive'}"
        if not value <= bound.high:
            return f"{key}={_show(value)} must be at most {bound.high:g}" if isinstance(bound.high, float) else \
                f"{key}={_show(value)} must be at most {bound.high}"
    for key, interval in FRACTIONS.items():
        value = setting(cfg, key)
        if value is not None and not _in_interval(value, interval):
            return f"{key}={value} must be in {interval}"
    cases = {name: getattr(cfg.data.augment, name) for name in CASE_MODIFIERS}
    if sum(cases.values()) > 1:
        return (f"data.augment's case modifiers ({', '.join(f'{k}={v:g}' for k, v in cases.items())}) add up to "
                f"{sum(cases.values()):g}: one at most changes an example, so they must add up to at most 1")
    if not all(_in_interval(b, "[0, 1)") for b in cfg.train.betas):
        return f"train.betas={list(cfg.train.betas)} must each be in [0, 1)"
    return None


def _in_interval(value: float, interval: str) -> bool:
    """Whether `value` lies in "[0, 1)", "[0, 1]" or "(0, 1)"; False for NaN."""
    low_ok = value > 0 if interval.startswith("(") else value >= 0
    high_ok = value <= 1 if interval.endswith("]") else value < 1
    return low_ok and high_ok


def _check_model_size(cfg: Config) -> str | None:
    """The model's parameter count, estimated before anything is allocated, within MAX_PARAMETERS."""
    model_cfg, data_cfg = cfg.model, cfg.data
    if data_cfg.tokenizer == "sentencepiece":
        vocab = data_cfg.spm_vocab_size + 4  # attnmt's <pad> <unk> <s> </s>, counted generously
    else:
        vocab = NOMINAL_VOCAB if data_cfg.max_vocab is None else data_cfg.max_vocab + 4
    params = estimate_parameters(model_cfg, vocab, vocab)
    if params <= MAX_PARAMETERS:
        return None
    keys = (("d_model", "ff_dim", "enc_layers", "dec_layers") if model_cfg.arch == "transformer"
            else ("emb_dim", "enc_hidden", "dec_hidden", "attn_dim", "layers"))
    sizes = ", ".join(f"model.{k}={getattr(model_cfg, k)}" for k in keys)
    return (f"{sizes} give a model of about {params:.2g} parameters (with vocabularies of {vocab}); "
            f"it must be at most {MAX_PARAMETERS:.0e} (make these sizes smaller)")


def _check_rules(cfg: Config) -> str | None:
    """Rules between keys: settings that cannot work together, or would be accepted and ignored."""
    data_cfg, model_cfg, train_cfg = cfg.data, cfg.model, cfg.train
    if model_cfg.arch == "transformer" and model_cfg.d_model % model_cfg.heads:
        return f"model.heads={model_cfg.heads} must divide model.d_model={model_cfg.d_model}"
    if train_cfg.compile == "cudagraphs" and (model_cfg.arch != "transformer" or train_cfg.device == "cpu"):
        return (f"train.compile='cudagraphs' needs model.arch='transformer' on a CUDA device; got model.arch="
                f"{model_cfg.arch!r}, train.device={train_cfg.device!r} (the RNN packs sequences on the host: use 'none' or "
                "'default')")
    if train_cfg.schedule == "inverse_sqrt" and train_cfg.warmup_steps == 0:
        return "train.warmup_steps must be positive with train.schedule='inverse_sqrt'"
    if train_cfg.schedule in BUDGET_SCHEDULES and (not train_cfg.max_updates or train_cfg.warmup_steps >= train_cfg.max_updates):
        return (f"train.schedule={train_cfg.schedule!r} decays to zero at train.max_updates: set train.max_updates above "
                f"train.warmup_steps={train_cfg.warmup_steps} (got train.max_updates={train_cfg.max_updates})")
    try:  # the spelling only: whether the device exists is checked where it is used (devices.py)
        check_device_name(train_cfg.device, key="train.device")
    except AttnmtError as err:
        return str(err)
    if model_cfg.arch == "rnn" and (model_cfg.activation, model_cfg.scale_embeddings, model_cfg.ff_dropout) != ("relu", True, None):
        return (f"model.activation={model_cfg.activation!r}, model.scale_embeddings={model_cfg.scale_embeddings} and model.ff_dropout="
                f"{model_cfg.ff_dropout} apply to model.arch='transformer' only: leave them at 'relu', true and null for the RNN")
    if model_cfg.arch == "transformer" and train_cfg.teacher_forcing != 1.0:
        return (f"train.teacher_forcing={train_cfg.teacher_forcing} applies to model.arch='rnn' only: the Transformer "
                "is always trained on the gold previous tokens (set it to 1.0)")
    if data_cfg.min_len > data_cfg.max_len:
        return f"data.min_len={data_cfg.min_len} must not exceed data.max_len={data_cfg.max_len}"
    return None


def estimate_parameters(model: ModelConfig, src_vocab: int, tgt_vocab: int) -> int:
    """The trainable parameters `models.build_model` would allocate (tied weights counted once),
    computed from the sizes alone; equal to `models.count_parameters` (tests/test_config_ranges.py)."""
    if model.arch == "transformer":
        return _transformer_parameters(model, src_vocab, tgt_vocab)
    return _rnn_parameters(model, src_vocab, tgt_vocab)


def _linear(n_in: int, n_out: int, bias: bool = True) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _rnn_parameters(m: ModelConfig, src_vocab: int, tgt_vocab: int) -> int:
    """Bahdanau et al. 2015 as models/rnn.py builds it: bi-GRU encoder, bridge, attentive GRU decoder."""
    E, H, D, A = m.emb_dim, m.enc_hidden, m.dec_hidden, m.attn_dim
    gru = sum(2 * (3 * H * ((E if n == 0 else 2 * H) + H) + 6 * H) for n in range(m.layers))  # both directions
    encoder = src_vocab * E + gru + _linear(2 * H, D)
    if m.attention == "bahdanau":
        attention = _linear(D, A, bias=False) + _linear(2 * H, A) + _linear(A, 1, bias=False)
        readout = D + 2 * H + E
        pre_output = _linear(readout, E) if m.tie_embeddings else 0
        readout = E if m.tie_embeddings else readout
        cell = 3 * D * (E + 2 * H + D) + 6 * D
    else:
        attention = _linear(D, 2 * H, bias=False) if m.attention == "luong-general" else 0
        readout = E if m.tie_embeddings else D
        pre_output = _linear(2 * H + D, readout, bias=False)  # W_c
        cell = 3 * D * (E + readout + D) + 6 * D
    generator = tgt_vocab if m.tie_embeddings else _linear(readout, tgt_vocab)
    return encoder + tgt_vocab * E + attention + pre_output + cell + generator


def _transformer_parameters(m: ModelConfig, src_vocab: int, tgt_vocab: int) -> int:
    """Vaswani et al. 2017 as models/transformer.py builds it (sinusoidal positions are no parameters)."""
    d = m.d_model
    attention, feed_forward, norm = 4 * _linear(d, d), _linear(d, m.ff_dim) + _linear(m.ff_dim, d), 2 * d
    encoder = m.enc_layers * (attention + feed_forward + 2 * norm)
    decoder = m.dec_layers * (2 * attention + feed_forward + 3 * norm)
    final_norms = 2 * norm if m.pre_norm else 0
    embeddings = src_vocab * d + (0 if m.share_embeddings else tgt_vocab * d)
    positions = MAX_POSITIONS * d if m.positions == "learned" else 0
    generator = tgt_vocab if m.tie_embeddings else _linear(d, tgt_vocab)
    return embeddings + positions + encoder + decoder + final_norms + generator


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
    if m.arch == "transformer" and not m.pre_norm and (t.schedule not in STEP_SCHEDULES or not t.warmup_steps):
        notes.append(f"model.pre_norm=false (post-norm) with train.schedule={t.schedule!r} and train.warmup_steps="
                     f"{t.warmup_steps} has no learning-rate warmup: a post-norm Transformer learns about half as "
                     "fast per update without one (docs/results.md). Set model.pre_norm=true; post-norm needs "
                     "train.schedule='inverse_sqrt', 'linear' or 'cosine' with train.warmup_steps, and long training")
    return notes


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved config as JSON (used in run directories)."""
    from attnmt.files import atomic_write_text

    atomic_write_text(Path(path), json.dumps(cfg.to_dict(), indent=2) + "\n")


def load_saved_config(path: str | Path) -> Config:
    """Read a config saved by `save_config` (JSON), validating it like a YAML file."""
    path = Path(path)
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: not found (is this a run directory?)") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file: {err.strerror or err}") from None
    raw = load_json(text, source=str(path))
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    data = raw.get("data")
    if isinstance(data, dict) and "augment" not in data:  # saved before data.augment existed: it trained without
        raw = {**raw, "data": {**data, "augment": NO_AUGMENT}}
    return config_from_dict(raw, source=str(path))

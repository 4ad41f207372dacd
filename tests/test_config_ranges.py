"""Config value bounds (issue 24 items 10, 11, 16 and 17): every number finite and in range, sizes
checked against a parameter estimate before anything is allocated, the seed within what
torch.manual_seed takes; each refusal is one `ConfigError` naming the file and the dotted key."""

import json
import math
from pathlib import Path

import pytest

from attnmt.config import Config, DataConfig, ModelConfig, config_from_dict, load_config, load_saved_config, save_config
from attnmt.errors import ConfigError

SRC = Path(__file__).resolve().parents[1] / "src"


def write(tmp_path, text, name="cfg.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("where", ["override", "json"])
@pytest.mark.parametrize("key", ["emb_dim", "enc_hidden", "dec_hidden", "attn_dim", "d_model", "ff_dim"])
def test_a_dimension_of_1e11_is_refused_naming_the_key(tmp_path, where, key):
    if where == "override":
        with pytest.raises(ConfigError, match=rf"cfg.yaml: model.{key}=100000000000 must be at most"):
            load_config(write(tmp_path, ""), [f"model.{key}=100000000000"])
    else:
        raw = Config().to_dict()
        raw["model"][key] = 100_000_000_000
        path = write(tmp_path, json.dumps(raw), "config.json")
        with pytest.raises(ConfigError, match=rf"config.json: model.{key}=100000000000 must be at most"):
            load_saved_config(path)


def test_1e11_in_yaml_is_not_an_int(tmp_path):
    with pytest.raises(ConfigError, match=r"model.emb_dim must be int, got str '1e11'"):
        load_config(write(tmp_path, "model:\n  emb_dim: 1e11\n"))
    with pytest.raises(ConfigError, match=r"model.emb_dim must be int, got float 100000000000.0"):
        load_config(write(tmp_path, "model:\n  emb_dim: 1.0e+11\n"))


@pytest.mark.parametrize("model, data, key", [
    (dict(arch="transformer", d_model=16384, heads=8, ff_dim=65536, enc_layers=24, dec_layers=24), {},
     "model.d_model"),
    (dict(arch="rnn", emb_dim=65536), dict(tokenizer="sentencepiece", spm_vocab_size=100_000), "model.emb_dim"),
    (dict(arch="rnn", enc_hidden=30000, dec_hidden=30000, layers=8), {}, "model.enc_hidden"),
])
def test_a_model_over_the_parameter_bound_is_refused_naming_its_size_keys(model, data, key):
    with pytest.raises(ConfigError, match=rf"x: .*{key}=\d+.*about [\d.e+]+ parameters.* at most"):
        config_from_dict({"model": model, "data": data}, source="x")


@pytest.mark.parametrize("model", [
    dict(arch="rnn", emb_dim=16, enc_hidden=24, dec_hidden=32, attn_dim=20, layers=2),
    dict(arch="rnn", emb_dim=16, enc_hidden=24, dec_hidden=32, attn_dim=20, tie_embeddings=True),
    dict(arch="rnn", emb_dim=16, enc_hidden=16, dec_hidden=32, attention="luong-dot"),
    dict(arch="rnn", emb_dim=16, enc_hidden=24, dec_hidden=32, attention="luong-general", tie_embeddings=True),
    dict(arch="transformer", d_model=32, heads=4, ff_dim=48, enc_layers=2, dec_layers=1),
    dict(arch="transformer", d_model=32, heads=4, ff_dim=48, positions="learned", pre_norm=False,
         share_embeddings=True, tie_embeddings=True),
])
def test_the_parameter_estimate_is_the_models_count(model):
    from attnmt.config import estimate_parameters
    from attnmt.models import build_model, count_parameters

    cfg = config_from_dict({"model": model}).model
    for src_vocab, tgt_vocab in [(50, 50), (70, 90)]:
        if cfg.share_embeddings and src_vocab != tgt_vocab:
            continue
        real = count_parameters(build_model(cfg, src_vocab, tgt_vocab))
        assert estimate_parameters(cfg, src_vocab, tgt_vocab) == real


def test_shipped_configs_are_far_below_the_parameter_bound():
    from attnmt.config import MAX_PARAMETERS, estimate_parameters

    for path in sorted((SRC / "attnmt" / "configs").glob("*.yaml")):
        cfg = load_config(path)
        assert estimate_parameters(cfg.model, 60_000, 60_000) < MAX_PARAMETERS / 5, path.name


# ----------------------------------------------------------------------------- items 11 and 16: NaN, inf, ranges

FLOAT_KEYS = ["model.dropout", "model.attn_dropout", "train.max_minutes", "train.lr", "train.weight_decay",
              "train.plateau_factor", "train.min_lr", "train.clip", "train.label_smoothing",
              "train.teacher_forcing", "search.length_penalty", "search.max_len_ratio", "data.temperature",
              "data.max_len_ratio"]


def test_every_float_setting_is_in_the_list_above():
    floats = {f"{section}.{name}" for section, values in Config().to_dict().items()
              for name, value in values.items() if isinstance(value, float)}
    floats |= {"train.max_minutes", "data.max_len_ratio"}  # None by default
    assert floats == set(FLOAT_KEYS)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e400"])
@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_nan_and_infinity_fail_every_float_setting_naming_the_key(tmp_path, key, value):
    with pytest.raises(ConfigError, match=rf"cfg.yaml: {key}=(nan|inf|-inf) must be"):
        load_config(write(tmp_path, ""), [f"{key}={value}"])


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_in_betas_and_in_a_run_config_json_are_refused(tmp_path, value):
    with pytest.raises(ConfigError, match=r"train.betas=\[.*\] must each be in \[0, 1\)"):
        config_from_dict({"train": {"betas": [value, 0.9]}})
    raw = Config().to_dict()
    raw["train"]["lr"] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))  # Python's json writes NaN / Infinity
    with pytest.raises(ConfigError, match=r"config.json: train.lr=(nan|inf) must be"):
        load_saved_config(path)


@pytest.mark.parametrize("setting", [
    "search.length_penalty=1e308", "search.max_len_ratio=1e300", "search.max_len_offset=1000000000000",
    "search.max_input_tokens=1000000000000", "search.beam_size=1000000", "train.eval_beam=1000000",
    "train.epochs=1000000000000", "train.batch_size=1000000000000", "train.max_minutes=1e300",
    "train.lr=1e10", "train.min_lr=1e10", "train.clip=1e300", "train.weight_decay=1e300",
    "train.warmup_steps=1000000000000000", "train.accum_steps=1000000000", "train.num_threads=1000000",
    "train.log_every=1000000000000000000000", "train.keep_last=1000000000", "train.plateau_patience=10000000000",
    "train.max_bad_steps=10000000000", "train.save_every_steps=100000000000000000000",
    "train.early_stopping_patience=100000000000", "train.eval_max_sentences=100000000000000",
    "data.spm_vocab_size=100000000000", "data.max_vocab=100000000000", "data.max_len=100000000000",
    "data.min_freq=100000000000000", "data.train_subset=100000000000000", "model.layers=100000",
    "model.enc_layers=100000", "model.dec_layers=100000", "model.heads=1000000",
])
def test_huge_values_that_would_hang_or_overflow_are_refused_naming_the_key(tmp_path, setting):
    key, value = setting.split("=")
    with pytest.raises(ConfigError, match=rf"cfg.yaml: {key}=.* must be at most"):
        load_config(write(tmp_path, ""), [setting])


@pytest.mark.parametrize("setting, message", [
    ("train.seed=1180591620717411303424", r"train.seed=1180591620717411303424 must be at most"),  # 2**70
    ("train.seed=9223372036854775808", r"train.seed=9223372036854775808 must be at most"),  # 2**63
    ("train.seed=-1", r"train.seed=-1 must not be negative"),
])
def test_seed_is_what_torch_manual_seed_takes(tmp_path, setting, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, ""), [setting])
    assert load_config(write(tmp_path, ""), [f"train.seed={2**63 - 1}"]).train.seed == 2**63 - 1


@pytest.mark.parametrize("key, value", [("data.train", "a\x00b"), ("data.train", "bad \ud800 path"),
                                        ("data.src_lang", "x" * 5000)])
def test_strings_that_no_file_system_takes_are_refused(key, value):
    section, name = key.split(".")
    with pytest.raises(ConfigError, match=rf"{key}"):
        config_from_dict({"data": {"corpus": "files", "train": "t", "src_lang": "x", "tgt_lang": "y"}
                          | {name: value}})


def test_valid_edge_values_round_trip(tmp_path):
    from attnmt.config import RANGES

    raw = {"train": {"seed": 2**63 - 1, "lr": RANGES["train.lr"].high, "clip": 0.0, "max_minutes": 1e-3},
           "search": {"length_penalty": 0.0, "max_len_offset": 0},
           "data": {"corpus": "files", "train": "t", "src_lang": "xx", "tgt_lang": "yy"}}
    cfg = config_from_dict(raw)
    save_config(cfg, tmp_path / "config.json")
    assert load_saved_config(tmp_path / "config.json") == cfg
    assert math.isfinite(cfg.train.lr) and DataConfig() == Config().data and ModelConfig() == Config().model
